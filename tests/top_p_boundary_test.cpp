// Top-p at its rounding boundary: rows built so that the mass of a prefix of tokens equals
// top_p * total in real arithmetic, checked through every path that decides membership in the
// nucleus (warp, plain sampling, one-hot and full-q draft acceptance, the bonus token, the
// decoder). Built twice (tests/CMakeLists.txt): with the default flags and with -march=native, so
// the vectorised kernels run at two SIMD widths.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/math/warp.hpp>
#include <specdec/verify/rejection.hpp>
#include <string>
#include <vector>

#include "support/chi_square.hpp"

namespace {

namespace d = specdec::detail;
using specdec::token_id;
__extension__ using i128 = __int128;
constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// The documented rule, written independently of the library: mass(e) = e * 2^39 rounded to the
// nearest integer (ties to even), summed as integers; x is inside iff the mass of the weights
// strictly above e_x is below top_p * total, compared exactly.
std::int64_t reference_mass(float e) {
  return static_cast<std::int64_t>(std::nearbyint(std::ldexp(static_cast<double>(e), 39)));
}
bool reference_inside(std::int64_t above, std::int64_t total, float top_p) {
  int exp = 0;
  const double f = std::frexp(static_cast<double>(top_p), &exp);
  const auto m = static_cast<i128>(std::ldexp(f, 53));  // top_p = m * 2^(exp - 53), exactly
  const int s = 53 - exp;                               // s <= 120 for the top_p used here
  return (static_cast<i128>(above) << s) < m * static_cast<i128>(total);
}

// The row's weights exactly as the library computes them (exp((logit - max) / T), masked = 0).
std::vector<float> weights_of(std::span<const float> logits, float temperature) {
  bool masked = false;
  const float m = specdec::checked_max(logits, &masked);
  std::vector<float> w(logits.size());
  d::exp_blocks(logits.data(), logits.size(), m, 1.0f / temperature, masked, w.data(), nullptr);
  return w;
}

// Which tokens the documented rule keeps, from the library's weights.
std::vector<bool> reference_nucleus(std::span<const float> logits, float temperature, float top_p) {
  const auto w = weights_of(logits, temperature);
  std::vector<std::size_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return w[a] > w[b]; });
  std::int64_t total = 0;
  for (float x : w) total += reference_mass(x);
  std::vector<bool> in(w.size());
  std::int64_t above = 0;  // mass of the weights strictly greater than the current group
  for (std::size_t r = 0; r < order.size();) {
    std::size_t end = r;
    std::int64_t group = 0;
    while (end < order.size() && w[order[end]] == w[order[r]])
      group += reference_mass(w[order[end++]]);
    const bool inside = w[order[r]] > 0.0f && reference_inside(above, total, top_p);
    for (std::size_t i = r; i < end; ++i) in[order[i]] = inside;
    above += group;
    r = end;
  }
  return in;
}

// A logit whose weight (after exp(logit - 0)) is exactly w, searched near log(w).
float logit_with_weight(float w) {
  float x = static_cast<float>(std::log(static_cast<double>(w)));
  for (int step = 0; step < 4096; ++step) {
    const float e = d::packet_exp(x);
    if (e == w) return x;
    x = std::nextafter(x, e < w ? 1.0f : -1.0f);
  }
  FAIL("no logit gives the weight " << w << " exactly");
  return 0.0f;
}

struct boundary_row {
  std::string name;
  std::vector<float> logits;
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::vector<bool> expected;  // the nucleus where the row fixes it in exact arithmetic; else empty
};

std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(x > 0.0 ? static_cast<float>(std::log(x)) : neg_inf);
  return out;
}

// Weights 2^-k in groups of 2^k tokens (k = 0..7): every group holds mass 1 of a total of 8, so
// the mass above group k is exactly k and top_p = k / 8 puts group k exactly on the boundary
// (outside: the groups above already reach top_p). Spread over `v` positions with the rest
// masked, so that several blocks and the masked kernels are crossed.
boundary_row dyadic_groups(std::size_t v, float top_p, std::uint64_t seed) {
  boundary_row r;
  r.name = "dyadic groups, V = " + std::to_string(v) + ", top_p = " + std::to_string(top_p);
  r.top_p = top_p;
  r.logits.assign(v, neg_inf);
  r.expected.assign(v, false);
  std::vector<std::size_t> slots(v);
  std::iota(slots.begin(), slots.end(), 0);
  specdec::rng g(seed);
  for (std::size_t i = v; i > 1; --i) std::swap(slots[i - 1], slots[g() % i]);
  std::size_t next = 0;
  for (int k = 0; k < 8; ++k) {
    const float logit = logit_with_weight(std::ldexp(1.0f, -k));
    const bool inside = static_cast<float>(k) / 8.0f < top_p;
    for (int j = 0; j < (1 << k); ++j) {
      r.logits[slots[next]] = logit;
      r.expected[slots[next]] = inside;
      ++next;
    }
  }
  return r;
}

// 50 tokens of probability (6 + d_j) / 400 (sum 300 / 400), then 50 of 1 / 400 and 100 of
// 0.5 / 400: the first group holds exactly 0.75 in real arithmetic, so with top_p = 0.75 the
// tokens of 1 / 400 sit on the boundary; the float weights decide, the same way everywhere.
boundary_row integer_row(float temperature) {
  boundary_row r;
  r.name = "integer weights, V = 200, T = " + std::to_string(temperature);
  r.temperature = temperature;
  r.top_p = 0.75f;
  std::vector<double> p;
  for (int j = 0; j < 50; ++j) p.push_back((6.0 + (j % 2 == 0 ? 0.02 : -0.02) * (j % 7)) / 400.0);
  double head = 0.0;
  for (double x : p) head += x;
  p.back() += 0.75 - head;  // the head sums to 0.75 (up to the double rounding here)
  for (int j = 0; j < 50; ++j) p.push_back(1.0 / 400.0);
  for (int j = 0; j < 100; ++j) p.push_back(0.5 / 400.0);
  std::vector<std::size_t> perm(p.size());
  std::iota(perm.begin(), perm.end(), 0);
  specdec::rng g(5);
  for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[g() % i]);
  std::vector<double> shuffled(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) shuffled[perm[i]] = p[i];
  r.logits = log_of(shuffled);
  for (float& x : r.logits) x *= temperature;  // weights stay proportional to p
  return r;
}

std::vector<boundary_row> boundary_rows() {
  std::vector<boundary_row> rows;
  // The row of issue 10: 0.5 + 0.2 + 0.1 = 0.8 = top_p, token 5 (0.06) on the boundary.
  rows.push_back(
      {"issue 10 row", log_of({0.5, 0.053, 0.047, 0.2, 0.1, 0.06, 0.02, 0.02}), 1.0f, 0.8f, {}});
  // Exact weights: 1, 0.5, 0.25, 0.25 with top_p = 0.75: the tokens of 0.25 sit exactly on it.
  {
    boundary_row r{"exact weights 1, 1/2, 1/4, 1/4", {}, 1.0f, 0.75f, {true, true, false, false}};
    for (float w : {1.0f, 0.5f, 0.25f, 0.25f}) r.logits.push_back(logit_with_weight(w));
    rows.push_back(r);
    r.name = "exact weights 1, 1/2, 1/4, 1/4, top_p one ulp above 0.75";
    r.top_p = std::nextafter(0.75f, 1.0f);
    r.expected = {true, true, true, true};
    rows.push_back(r);
  }
  rows.push_back(dyadic_groups(255, 0.5f, 1));
  rows.push_back(dyadic_groups(1100, 0.625f, 2));
  rows.push_back(dyadic_groups(2100, 0.75f, 3));
  rows.push_back(integer_row(1.0f));
  rows.push_back(integer_row(0.7f));
  return rows;
}

std::vector<double> as_double(const std::vector<float>& p) { return {p.begin(), p.end()}; }

std::int64_t weights_mass_above(const std::vector<float>& w, float over) {
  std::int64_t s = 0;
  for (float x : w)
    if (x > over) s += reference_mass(x);
  return s;
}

}  // namespace

TEST_CASE("top_p boundary: a weight's mass is e * 2^39 rounded to nearest in every kernel") {
  // Strided over every float in [0, 1], plus the values whose mass is a tie (odd multiples of
  // 2^-40) and the extremes, through the scalar mass() and the packet digits (mass_above over
  // arrays long enough for whole packets, several blocks and a tail).
  std::vector<float> values;
  for (std::uint32_t bits = 0; bits <= 0x3f800000u; bits += 4099) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  for (int k = 1; k < 5000; k += 2) values.push_back(std::ldexp(static_cast<float>(k), -40));
  for (float f : {0.0f, 1.0f, std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -40),
                  std::ldexp(3.0f, -41), std::nextafter(1.0f, 0.0f), 0.5f, 0x1.fffffep-14f})
    values.push_back(f);
  std::size_t mismatches = 0;
  for (float f : values) mismatches += d::mass(f) != reference_mass(f);
  CHECK(mismatches == 0);
  // the packet path, element by element: a window of whole packets holding one value (in a
  // different lane each time) and zeros, whose digits are 0
  const std::size_t w = 2 * d::lanes;
  std::vector<float> window(w, 0.0f);
  mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    window[i % w] = values[i];
    mismatches += d::mass_above(window.data(), w, -1.0f) != reference_mass(values[i]);
    window[i % w] = 0.0f;
  }
  CHECK(mismatches == 0);
  // whole arrays: several blocks, any over
  for (std::size_t n : {1u, 7u, 64u, 1023u, 1024u, 1025u, 5000u}) {
    std::vector<float> x(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
    for (float over : {-1.0f, 0.0f, 1e-6f, 0.3f}) {
      INFO("n = " << n << ", over = " << over);
      CHECK(d::mass_above(x.data(), n, over) == weights_mass_above(x, over));
    }
  }
}

TEST_CASE("top_p boundary: nucleus_limit is the largest integer below top_p * total") {
  specdec::rng g(17);
  std::vector<float> tops{
      0.5f, 0.75f, 0.8f, 0.9f, 0.95f, 1e-7f, std::nextafter(1.0f, 0.0f), std::nextafter(0.5f, 0.0f),
      0.3f};
  for (int i = 0; i < 200; ++i) tops.push_back(static_cast<float>(g.uniform_open()));
  std::vector<std::int64_t> totals{1,
                                   2,
                                   3,
                                   7,
                                   (std::int64_t{1} << 24) - 1,
                                   std::int64_t{1} << 24,
                                   (std::int64_t{1} << 24) + 1,
                                   std::int64_t{1} << 39,
                                   std::int64_t{1} << 62,
                                   (std::int64_t{1} << 62) - 1};
  for (int i = 0; i < 200; ++i) totals.push_back(static_cast<std::int64_t>(g() >> 2) + 1);
  for (float tp : tops)
    for (std::int64_t total : totals) {
      const std::int64_t limit = d::nucleus_limit(total, tp);
      INFO("top_p = " << tp << ", total = " << total << ", limit = " << limit);
      REQUIRE(reference_inside(limit, total, tp));
      REQUIRE_FALSE(reference_inside(limit + 1, total, tp));
    }
  CHECK(d::nucleus_limit(8, 0.75f) == 5);  // 6 = 0.75 * 8 does not let a token in
  CHECK(d::nucleus_limit(8, 1.0f) == 7);
  CHECK(d::nucleus_limit(0, 0.5f) == -1);
}

TEST_CASE("top_p boundary: the fast paths' float sums never contradict the exact rule") {
  // For every token of boundary rows and random rows: the weights above it and the total summed
  // as the fast paths sum them (exp_blocks with Above, weight_above, block_sums), judged by
  // nucleus_test, against the rule on exact masses. `unsure` is allowed (warp then decides);
  // `in` or `out` must be the rule's answer.
  auto rows = boundary_rows();
  specdec::rng g(23);
  for (int i = 0; i < 30; ++i) {
    const std::size_t v = 1 + g() % 2500;
    boundary_row r{"random " + std::to_string(i),
                   std::vector<float>(v),
                   1.0f,
                   static_cast<float>(0.05 + 0.95 * g.uniform_open()),
                   {}};
    for (float& x : r.logits) x = static_cast<float>(6.0 * (g.uniform_open() - 0.5));
    if (i % 3 == 0)
      for (float& x : r.logits) x = std::round(x);  // many equal weights
    rows.push_back(r);
  }
  for (const auto& r : rows) {
    INFO(r.name);
    const std::size_t v = r.logits.size();
    const auto w = weights_of(r.logits, r.temperature);
    const auto in = reference_nucleus(r.logits, r.temperature, r.top_p);
    if (!r.expected.empty()) REQUIRE(in == r.expected);
    bool masked = false;
    const float m = specdec::checked_max(r.logits, &masked);
    const double total = d::block_sums(w, nullptr);
    std::size_t unsure = 0;
    for (std::size_t x = 0; x < v; ++x) {
      double above = 0.0;
      const double pass_total =
          masked ? d::exp_blocks<true, true>(r.logits.data(), v, m, 1.0f / r.temperature, nullptr,
                                             nullptr, w[x], &above)
                 : d::exp_blocks<false, true>(r.logits.data(), v, m, 1.0f / r.temperature, nullptr,
                                              nullptr, w[x], &above);
      for (const auto verdict :
           {d::nucleus_test(above, pass_total, r.top_p, v),
            d::nucleus_test(d::weight_above(w.data(), v, w[x]), total, r.top_p, v)}) {
        INFO("token " << x << " weight " << w[x] << " inside " << in[x]);
        if (verdict == d::nucleus_verdict::unsure) {
          ++unsure;
          continue;
        }
        REQUIRE((verdict == d::nucleus_verdict::in) == in[x]);
      }
    }
    if (r.name.rfind("random", 0) == 0) CHECK(unsure <= 2 * v / 100 + 4);
  }
}

TEST_CASE("top_p boundary: warp keeps exactly the rule's nucleus on rows built on the boundary") {
  // The boundary rows, and random rows with long flat tails, where the float total cannot place
  // the cut and warp sums the masses exactly (and cuts again among the larger values).
  auto rows = boundary_rows();
  specdec::rng g(31);
  for (int i = 0; i < 16; ++i) {
    const std::size_t v = 2000 + g() % 30000;
    const float top_p = i % 2 ? 0.95f : 0.9f;
    boundary_row r{"flat tail " + std::to_string(i), std::vector<float>(v), 1.0f, top_p, {}};
    for (float& x : r.logits) x = static_cast<float>(3.0 * (g.uniform_open() - 0.5));
    for (int j = 0; j < 4; ++j) r.logits[g() % v] = 6.0f + static_cast<float>(j);
    rows.push_back(r);
  }
  for (const auto& r : rows) {
    INFO(r.name);
    const auto in = reference_nucleus(r.logits, r.temperature, r.top_p);
    if (!r.expected.empty()) REQUIRE(in == r.expected);
    specdec::sampling_params sp;
    sp.temperature = r.temperature;
    sp.top_p = r.top_p;
    std::vector<float> p(r.logits.size());
    specdec::warp(r.logits, sp, p);
    for (std::size_t x = 0; x < p.size(); ++x) {
      INFO("token " << x);
      CHECK((p[x] > 0.0f) == in[x]);
    }
    // with top-k dropping one token (the top-k branch sums the masses anew): the rule's nucleus
    // of the row without that token (the smallest weight; among equal ones the highest id)
    const auto w = weights_of(r.logits, r.temperature);
    std::size_t dropped = 0;
    for (std::size_t x = 0; x < w.size(); ++x)
      if (w[x] <= w[dropped]) dropped = x;
    auto without = r.logits;
    without[dropped] = neg_inf;
    if (std::any_of(without.begin(), without.end(), [](float x) { return x > neg_inf; })) {
      const auto in_k = reference_nucleus(without, r.temperature, r.top_p);
      sp.top_k = p.size() - 1;
      specdec::warp(r.logits, sp, p);
      for (std::size_t x = 0; x < p.size(); ++x) {
        INFO("top_k = V - 1, token " << x);
        CHECK((p[x] > 0.0f) == in_k[x]);
      }
    }
  }
}

TEST_CASE("top_p boundary: plain sampling, drafts and the bonus token follow warp (chi-square)") {
  for (const auto& r : boundary_rows()) {
    SECTION(r.name) {
      const std::size_t v = r.logits.size();
      specdec::sampling_params sp;
      sp.temperature = r.temperature;
      sp.top_p = r.top_p;
      std::vector<float> p(v);
      specdec::warp(r.logits, sp, p);
      const auto expected = as_double(p);
      // the tokens to draft: the boundary tokens (largest weight outside, smallest inside) and
      // the most likely one
      const auto w = weights_of(r.logits, r.temperature);
      token_id largest_out = -1, smallest_in = -1;
      for (std::size_t x = 0; x < v; ++x) {
        if (w[x] <= 0.0f) continue;
        if (p[x] == 0.0f && (largest_out < 0 || w[x] > w[static_cast<std::size_t>(largest_out)]))
          largest_out = static_cast<token_id>(x);
        if (p[x] > 0.0f && (smallest_in < 0 || w[x] < w[static_cast<std::size_t>(smallest_in)]))
          smallest_in = static_cast<token_id>(x);
      }
      const auto top = static_cast<token_id>(std::max_element(p.begin(), p.end()) - p.begin());
      // K = 1 chains: row 0 verifies the draft, row 1 gives the bonus token
      specdec::row_matrix target(2, static_cast<Eigen::Index>(v));
      for (std::size_t j = 0; j < v; ++j) {
        target(0, static_cast<Eigen::Index>(j)) = r.logits[j];
        target(1, static_cast<Eigen::Index>(j)) = r.logits[j];
      }
      const specdec::logits_view both(target.data(), 2, static_cast<Eigen::Index>(v));
      const specdec::logits_view first(target.data(), 1, static_cast<Eigen::Index>(v));
      const specdec::logits_view none(nullptr, 0, static_cast<Eigen::Index>(v));
      // full q: a flatter warp of the same logits, so its support covers the nucleus and more
      specdec::sampling_params sq = sp;
      sq.temperature = r.temperature * 1.5f;
      sq.top_p = 1.0f;
      std::vector<float> qf(v);
      specdec::warp(r.logits, sq, qf);
      specdec::row_matrix q(1, static_cast<Eigen::Index>(v));
      for (std::size_t j = 0; j < v; ++j) q(0, static_cast<Eigen::Index>(j)) = qf[j];
      const specdec::logits_view qv(q.data(), 1, static_cast<Eigen::Index>(v));

      const int draws = v > 1000 ? 6000 : v > 256 ? 20000 : 40000;
      specdec::rng gen(1000 + v), draft_gen(77);
      specdec::rejection_workspace ws;
      std::vector<std::size_t> plain(v), bonus(v), drafted(v);
      std::vector<std::vector<std::size_t>> one_hot;
      std::vector<token_id> fixed;
      for (token_id t : {largest_out, smallest_in, top})
        if (t >= 0) fixed.push_back(t);
      one_hot.assign(fixed.size(), std::vector<std::size_t>(v));
      for (int i = 0; i < draws; ++i) {
        plain[static_cast<std::size_t>(
            specdec::verify_rejection(first, {}, none, sp, gen, ws).next)]++;
        const token_id x = specdec::sample(qf, draft_gen);
        auto res = specdec::verify_rejection(both, std::span(&x, 1), qv, sp, gen, ws);
        drafted[static_cast<std::size_t>(res.accepted ? x : res.next)]++;
        if (res.accepted) bonus[static_cast<std::size_t>(res.next)]++;
        for (std::size_t f = 0; f < fixed.size(); ++f) {
          res = specdec::verify_rejection(both, std::span(&fixed[f], 1), none, sp, gen, ws);
          one_hot[f][static_cast<std::size_t>(res.accepted ? fixed[f] : res.next)]++;
        }
      }
      const auto c_plain = specdec::test::chi_square(plain, expected);
      const auto c_drafted = specdec::test::chi_square(drafted, expected);
      const auto c_bonus = specdec::test::chi_square(bonus, expected);
      INFO("plain: " << c_plain.describe() << "; full-q draft: " << c_drafted.describe()
                     << "; bonus: " << c_bonus.describe());
      CHECK(c_plain.pass());
      CHECK(c_drafted.pass());
      CHECK(c_bonus.pass());
      for (std::size_t f = 0; f < fixed.size(); ++f) {
        const auto c = specdec::test::chi_square(one_hot[f], expected);
        INFO("one-hot draft of token " << fixed[f]
                                       << " (p = " << p[static_cast<std::size_t>(fixed[f])]
                                       << "): " << c.describe());
        CHECK(c.pass());
      }
    }
  }
}

namespace {

// A model whose next-token logits are the same row after any context.
struct fixed_row_model {
  std::vector<float> row;
  std::vector<token_id> tokens;
  std::size_t vocab_size() const { return row.size(); }
  std::size_t size() const { return tokens.size(); }
  void append(std::span<const token_id> in, std::span<float> logits) {
    for (token_id t : in)
      if (t < 0 || static_cast<std::size_t>(t) >= row.size()) throw std::out_of_range("token");
    for (std::size_t i = 0; i < in.size(); ++i) {
      tokens.push_back(in[i]);
      std::copy(row.begin(), row.end(),
                logits.begin() + static_cast<std::ptrdiff_t>(i * row.size()));
    }
  }
  void truncate(std::size_t n) { tokens.resize(n); }
};
static_assert(specdec::LanguageModel<fixed_row_model>);

// Counts of the first three generated tokens over `trials` runs of generate(prompt, o).
template <class Generate>
std::vector<std::size_t> first_three(Generate&& generate, specdec::generate_options o,
                                     std::size_t v, int trials) {
  std::vector<std::size_t> counts(v * v * v);
  o.max_new_tokens = 3;
  for (int t = 0; t < trials; ++t) {
    o.sampling.seed = 5000 + static_cast<std::uint64_t>(t);
    const auto r = generate(o);
    REQUIRE(r.tokens.size() == 3);
    const auto at = [&](std::size_t i) { return static_cast<std::size_t>(r.tokens[i]); };
    counts[(at(0) * v + at(1)) * v + at(2)]++;
  }
  return counts;
}

}  // namespace

TEST_CASE("top_p boundary: speculative and plain decoding agree end to end on the issue's row") {
  // The row after every context, top_p = 0.8, K = 4: one-hot drafts of token 5 (the
  // boundary token) from prompt lookup over a prompt of 5s, and full-q drafts from a draft model.
  const auto row = log_of({0.5, 0.053, 0.047, 0.2, 0.1, 0.06, 0.02, 0.02});
  const std::size_t v = row.size();
  specdec::generate_options o;
  o.draft_length = 4;
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 0.8f;
  std::vector<float> p(v);
  specdec::warp(row, o.sampling, p);
  std::vector<double> joint;
  for (std::size_t a = 0; a < v; ++a)
    for (std::size_t b = 0; b < v; ++b)
      for (std::size_t c = 0; c < v; ++c)
        joint.push_back(static_cast<double>(p[a]) * static_cast<double>(p[b]) *
                        static_cast<double>(p[c]));
  const std::vector<token_id> prompt{5, 5, 5, 5, 5, 5};
  const int trials = 40000;
  auto check = [&](auto&& generate) {
    const auto chi = specdec::test::chi_square(first_three(generate, o, v, trials), joint);
    INFO(chi.describe());
    CHECK(chi.pass());
  };
  SECTION("plain decoding") {
    fixed_row_model target{row, {}};
    check([&](const specdec::generate_options& g) {
      return specdec::generate_autoregressive(target, prompt, g);
    });
  }
  SECTION("one-hot drafts (prompt lookup)") {
    fixed_row_model target{row, {}};
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 2});
    specdec::speculative_decoder decoder(target, lookup);
    check([&](const specdec::generate_options& g) { return decoder.generate(prompt, g); });
  }
  SECTION("full-q drafts (a draft model)") {
    fixed_row_model target{row, {}};
    fixed_row_model draft_model{log_of({0.3, 0.1, 0.1, 0.2, 0.1, 0.1, 0.05, 0.05}), {}};
    specdec::model_drafter drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    check([&](const specdec::generate_options& g) { return decoder.generate(prompt, g); });
  }
}

TEST_CASE("top_p boundary: a vocabulary above 2^23 tokens is refused when top_p < 1") {
  std::vector<float> logits(d::max_mass_vocab + 1, 0.0f), p(logits.size());
  specdec::sampling_params sp;
  sp.top_p = 0.9f;
  REQUIRE_THROWS_WITH(specdec::warp(logits, sp, p),
                      "warp: top_p < 1 needs a vocabulary of at most 8388608 tokens, got 8388609");
  specdec::rng g(1);
  const specdec::logits_view one(logits.data(), 1, static_cast<Eigen::Index>(logits.size()));
  const specdec::logits_view none(nullptr, 0, static_cast<Eigen::Index>(logits.size()));
  REQUIRE_THROWS_WITH(specdec::verify_rejection(one, {}, none, sp, g),
                      "verify_rejection: top_p < 1 needs a vocabulary of at most 8388608 tokens, "
                      "got 8388609");
  sp.top_p = 1.0f;  // temperature alone has no such bound
  CHECK_NOTHROW(specdec::warp(logits, sp, p));
}
