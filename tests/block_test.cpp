// Block verification (verify/block.hpp): its law, computed exactly here, is lossless and never
// keeps fewer drafts than token-wise verification (enumerated); verify_block samples that law
// (chi-square); through the decoder the emitted tokens follow the target (sequence level).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/verify/block.hpp>
#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/rare_draws.hpp"
#include "support/table_model.hpp"

namespace {

using specdec::token_id;
using dist = std::vector<double>;
using prefix = std::vector<token_id>;
using dist_of = std::function<dist(const prefix&)>;

dist normalised(dist x) {
  double s = 0;
  for (double v : x) s += v;
  for (double& v : x) v /= s;
  return x;
}

// The block rule written out in doubles, independently of the header: stop scores h_0..h_n for
// drafts x (h_0 = 1 stands for "keep nothing"), and the weights w_0..w_n.
struct block_scores {
  std::vector<double> h, w;
};

block_scores scores(const dist_of& p, const dist_of& q, const prefix& x) {
  const std::size_t n = x.size();
  block_scores s{{1.0}, {1.0}};
  for (std::size_t i = 1; i <= n; ++i) {
    const prefix before(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(i - 1));
    const auto xi = static_cast<std::size_t>(x[i - 1]);
    s.w.push_back(std::min(1.0, s.w.back() * p(before)[xi] / q(before)[xi]));
    if (i == n) {
      s.h.push_back(s.w.back());
      break;
    }
    const prefix upto(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(i));
    const dist pn = p(upto), qn = q(upto);
    double r = 0;
    for (std::size_t y = 0; y < pn.size(); ++y) r += std::max(0.0, s.w.back() * pn[y] - qn[y]);
    s.h.push_back(r > 0 ? r / (r + 1.0 - s.w.back()) : 0.0);
  }
  return s;
}

// P(kept = t, next = y | drafts x), index t * V + y.
dist law_given(const dist_of& p, const dist_of& q, const prefix& x, std::size_t v) {
  const std::size_t n = x.size();
  const auto s = scores(p, q, x);
  dist out((n + 1) * v, 0.0);
  for (std::size_t t = 0; t <= n; ++t) {
    double pt = s.h[t];
    for (std::size_t j = t + 1; j <= n; ++j) pt *= 1.0 - s.h[j];
    if (pt <= 0) continue;
    const prefix kept(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(t));
    dist next = p(kept);
    if (t < n) {
      const dist qk = q(kept);
      double mass = 0;
      for (std::size_t y = 0; y < v; ++y) mass += next[y] = std::max(0.0, s.w[t] * next[y] - qk[y]);
      REQUIRE(mass > 0);  // exact arithmetic: a stop with positive probability has a residual
      for (double& e : next) e /= mass;
    }
    for (std::size_t y = 0; y < v; ++y) out[t * v + y] = pt * next[y];
  }
  return out;
}

// Every draft block x of length n with its q-probability.
void for_each_block(const dist_of& q, std::size_t v, std::size_t n,
                    const std::function<void(const prefix&, double)>& f, prefix x = {},
                    double qx = 1.0) {
  if (x.size() == n) return f(x, qx);
  const dist qn = q(x);
  for (std::size_t t = 0; t < v; ++t) {
    if (qn[t] <= 0) continue;
    x.push_back(static_cast<token_id>(t));
    for_each_block(q, v, n, f, x, qx * qn[t]);
    x.pop_back();
  }
}

struct exact_outcome {
  double worst_error = 0;  // max |P(stream starts with s) - p(s)| over all s up to length n + 1
  double block_accepted = 0, token_accepted = 0;
};

// The emitted stream (block, then the target's own tokens) against the target, for every
// sequence up to n + 1 tokens; and the expected kept drafts of both verifiers.
exact_outcome exact(const dist_of& p, const dist_of& q, std::size_t v, std::size_t n) {
  std::map<prefix, double> blocks;  // emitted block -> probability
  exact_outcome o;
  for_each_block(q, v, n, [&](const prefix& x, double qx) {
    const dist law = law_given(p, q, x, v);
    for (std::size_t t = 0; t <= n; ++t)
      for (std::size_t y = 0; y < v; ++y) {
        if (law[t * v + y] <= 0) continue;
        prefix b(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(t));
        b.push_back(static_cast<token_id>(y));
        blocks[b] += qx * law[t * v + y];
        o.block_accepted += qx * law[t * v + y] * static_cast<double>(t);
      }
    double run = 1.0;  // token-wise: draft i is kept with prod_{j <= i} min(1, p / q)
    for (std::size_t i = 0; i < n; ++i) {
      const prefix before(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(i));
      const auto xi = static_cast<std::size_t>(x[i]);
      run *= std::min(1.0, p(before)[xi] / q(before)[xi]);
      o.token_accepted += qx * run;
    }
  });
  std::function<void(prefix&, double)> walk = [&](prefix& s, double ps) {
    if (!s.empty()) {
      double got = 0;
      for (const auto& [b, pb] : blocks) {
        if (b.size() <= s.size()) {
          if (!std::equal(b.begin(), b.end(), s.begin())) continue;
          double c = pb;  // the block, then the target's own tokens up to |s|
          for (std::size_t i = b.size(); i < s.size(); ++i)
            c *= p(prefix(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(
                                                     i)))[static_cast<std::size_t>(s[i])];
          got += c;
        } else if (std::equal(s.begin(), s.end(), b.begin())) {
          got += pb;
        }
      }
      o.worst_error = std::max(o.worst_error, std::abs(got - ps));
    }
    if (s.size() == n + 1) return;
    const dist pn = p(s);
    for (std::size_t t = 0; t < v; ++t) {
      s.push_back(static_cast<token_id>(t));
      walk(s, ps * pn[t]);
      s.pop_back();
    }
  };
  prefix s;
  walk(s, 1.0);
  return o;
}

// A context-dependent distribution per prefix, random with zeros, fixed by a seed.
dist_of random_model(std::size_t v, std::uint64_t seed, double zeros) {
  auto table = std::make_shared<std::map<prefix, dist>>();
  auto gen = std::make_shared<specdec::rng>(seed);
  return [=](const prefix& x) {
    auto it = table->find(x);
    if (it != table->end()) return it->second;
    dist d(v);
    for (auto& e : d) e = gen->uniform_open() < zeros ? 0.0 : std::pow(gen->uniform_open(), 3.0);
    d[static_cast<std::size_t>((*gen)() % v)] += 0.05;  // never all zero
    return (*table)[x] = normalised(d);
  };
}

dist_of constant(dist d) {
  return [d = normalised(std::move(d))](const prefix&) { return d; };
}

specdec::row_matrix log_rows(const std::vector<dist>& rows) {
  specdec::row_matrix m(static_cast<Eigen::Index>(rows.size()),
                        static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
          rows[i][j] > 0 ? static_cast<float>(std::log(rows[i][j]))
                         : -std::numeric_limits<float>::infinity();
  return m;
}

}  // namespace

TEST_CASE("block: the paper's two-token example keeps 11/9 drafts per step against 10/9") {
  // Target prefers b, draft prefers a, context-free, two drafts (Sun et al., section 2).
  const auto o = exact(constant({1, 2}), constant({2, 1}), 2, 2);
  CHECK(o.worst_error < 1e-12);
  CHECK(o.token_accepted == Approx(10.0 / 9.0).epsilon(1e-12));  // drafts kept per step
  CHECK(o.block_accepted == Approx(11.0 / 9.0).epsilon(1e-12));
  CHECK(o.block_accepted > o.token_accepted);
}

TEST_CASE("block: the law is lossless and never keeps fewer drafts than token-wise (enumerated)") {
  struct named {
    std::string name;
    dist_of p, q;
    std::size_t v;
  };
  std::vector<named> cases{
      {"p equals q", constant({.4, .1, .2, .3}), constant({.4, .1, .2, .3}), 4},
      {"draft mass where the target has none", constant({.5, .5, 0}), constant({.2, .2, .6}), 3},
      {"target mass where the draft has none", constant({.2, .3, .5}), constant({.5, .5, 0}), 3},
      {"disjoint supports", constant({.5, .5, 0, 0}), constant({0, 0, .7, .3}), 4},
      {"ties", constant({.25, .25, .25, .25}), constant({.5, .5, 0, 0}), 4},
      {"near-zero entries", constant({1e-9, .5, .5 - 1e-9}), constant({.5, 1e-9, .5 - 1e-9}), 3},
      {"one-hot equal", constant({1, 0}), constant({1, 0}), 2},
  };
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const std::size_t v = 2 + seed % 3;
    cases.push_back({"random context-dependent " + std::to_string(seed),
                     random_model(v, seed, 0.25), random_model(v, 100 + seed, 0.25), v});
  }
  for (const auto& c : cases)
    for (std::size_t n = 1; n <= 3; ++n) {
      INFO(c.name << ", n = " << n);
      const auto o = exact(c.p, c.q, c.v, n);
      CHECK(o.worst_error < 1e-12);
      CHECK(o.block_accepted >= o.token_accepted - 1e-12);
    }
}

TEST_CASE("block: verify_block draws (kept, next) from the exact law") {
  const int trials = 150000;
  struct named {
    std::string name;
    dist_of p, q;
    std::size_t v;
    prefix drafts;
  };
  const std::vector<named> cases{
      {"paper example, a a", constant({1, 2}), constant({2, 1}), 2, {0, 0}},
      {"paper example, a b", constant({1, 2}), constant({2, 1}), 2, {0, 1}},
      {"random, 3 drafts", random_model(4, 7, 0.2), random_model(4, 8, 0.2), 4, {1, 3, 0}},
      {"random, 4 drafts", random_model(5, 9, 0.1), random_model(5, 10, 0.1), 5, {2, 2, 4, 1}},
      {"zero target mass on draft 2", constant({.4, .6, 0}), constant({.3, .3, .4}), 3, {1, 2}},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      const std::size_t n = c.drafts.size(), v = c.v;
      std::vector<dist> prows, qrows;
      for (std::size_t i = 0; i <= n; ++i) {
        const prefix before(c.drafts.begin(), c.drafts.begin() + static_cast<std::ptrdiff_t>(i));
        prows.push_back(c.p(before));
        if (i < n) qrows.push_back(c.q(before));
      }
      // Draft i must be possible under q.
      for (std::size_t i = 0; i < n; ++i)
        REQUIRE(qrows[i][static_cast<std::size_t>(c.drafts[i])] > 0);
      const auto target = log_rows(prows);
      specdec::row_matrix q(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(v));
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < v; ++j)
          q(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
              static_cast<float>(qrows[i][j]);
      const specdec::logits_view tv(target.data(), target.rows(), target.cols());
      const specdec::logits_view qv(q.data(), q.rows(), q.cols());
      specdec::rng gen(42);
      specdec::block_workspace ws;
      std::vector<std::size_t> counts((n + 1) * v, 0);
      specdec::sampling_params sp;
      for (int t = 0; t < trials; ++t) {
        const auto r = specdec::verify_block(tv, c.drafts, qv, sp, gen, ws);
        counts[r.accepted * v + static_cast<std::size_t>(r.next)]++;
      }
      const auto chi = specdec::test::chi_square(counts, law_given(c.p, c.q, c.drafts, v));
      INFO(chi.describe());
      CHECK(chi.pass());
    }
  }
}

TEST_CASE("block: greedy is exact match, one-hot drafts are verified token-wise") {
  const auto target = log_rows({{.1, .6, .3}, {.5, .4, .1}, {.2, .2, .6}});
  const specdec::logits_view tv(target.data(), 3, 3), none(nullptr, 0, 3);
  const token_id drafts[2] = {1, 0};
  specdec::sampling_params greedy{.temperature = 0.0f};
  specdec::rng g1(3), g2(3);
  const auto r = specdec::verify_block(tv, drafts, none, greedy, g1);
  CHECK(r.accepted == 2);
  CHECK(r.next == 2);
  // One-hot: the same draws as verify_rejection from the same generator state.
  specdec::sampling_params sp;
  for (int t = 0; t < 200; ++t) {
    const auto a = specdec::verify_block(tv, drafts, none, sp, g1);
    const auto b = specdec::verify_rejection(tv, drafts, none, sp, g2);
    CHECK(a.accepted == b.accepted);
    CHECK(a.next == b.next);
  }
}

TEST_CASE("block: bad drafts, shapes and logits are refused with a message") {
  const auto target = log_rows({{.1, .6, .3}, {.5, .4, .1}, {.2, .2, .6}});
  const specdec::logits_view tv(target.data(), 3, 3);
  specdec::row_matrix q(2, 3);
  q << .5f, .5f, 0.0f, .3f, .3f, .4f;
  const specdec::logits_view qv(q.data(), 2, 3);
  specdec::rng g(1);
  const specdec::sampling_params sp;
  const token_id ok[2] = {0, 1}, outside[2] = {0, 3}, impossible[2] = {2, 1};
  const token_id one[1] = {0};
  CHECK_THROWS_WITH(specdec::verify_block(tv, outside, qv, sp, g),
                    Catch::Contains("drafts[1] = 3 is outside the vocabulary"));
  CHECK_THROWS_WITH(specdec::verify_block(tv, impossible, qv, sp, g),
                    Catch::Contains("q(0, 2) = 0"));
  CHECK_THROWS_WITH(specdec::verify_block(tv, one, qv, sp, g),
                    Catch::Contains("target must have drafts.size() + 1 = 2 rows"));
  const specdec::logits_view q1(q.data(), 1, 3);
  CHECK_THROWS_WITH(specdec::verify_block(tv, ok, q1, sp, g), Catch::Contains("q must have"));
  specdec::row_matrix bad = target;
  bad(1, 2) = std::numeric_limits<float>::quiet_NaN();
  const specdec::logits_view bv(bad.data(), 3, 3);
  CHECK_THROWS_AS(specdec::verify_block(bv, ok, qv, sp, g), std::domain_error);
}

TEST_CASE("block: through the decoder, the emitted tokens keep the target's joint distribution") {
  using specdec::test::table_model;
  table_model target({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f});
  table_model draft_model(
      {.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f, .mix_seed = 4});
  specdec::model_drafter<table_model> drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2};
  struct warping {
    std::string name;
    specdec::sampling_params sp;
  };
  const std::vector<warping> warps{
      {"temperature 0.9", {.temperature = 0.9f}},
      {"top-k 3", {.temperature = 1.0f, .top_k = 3}},
      {"top-p 0.8", {.temperature = 1.0f, .top_p = 0.8f}},
      {"min-p 0.2", {.temperature = 1.2f, .min_p = 0.2f}},
  };
  const int trials = 40000;
  for (const auto& w : warps)
    for (std::size_t k : {2u, 4u}) {
      SECTION(w.name + ", K = " + std::to_string(k)) {
        const auto expected = specdec::test::exact_joint(target, prompt, 3, w.sp);
        specdec::generate_options o;
        o.draft_length = k;
        o.sampling = w.sp;
        o.verification = specdec::verification_rule::block;
        const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, trials, 7000 * k);
        const auto chi = specdec::test::chi_square(got.counts, expected);
        INFO(chi.describe());
        CHECK(chi.pass());
        CHECK(got.accepted > 0);
      }
    }
}

TEST_CASE("block: a tree with block verification is refused, the decoder stays usable") {
  using specdec::test::table_model;
  table_model target({.vocab_size = 8, .order = 2, .seed = 3});
  table_model draft_model({.vocab_size = 8, .order = 2, .seed = 3, .mix = 0.3f, .mix_seed = 5});
  specdec::model_drafter<table_model> drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 1.0f;
  o.tree = {2, 2};
  o.verification = specdec::verification_rule::block;
  CHECK_THROWS_WITH(decoder.generate(prompt, o), Catch::Contains("generate_options.verification"));
  o.tree.clear();
  CHECK(decoder.generate(prompt, o).tokens.size() == 12);
}

TEST_CASE("block: a rejected draft is never emitted, however small the residual") {
  // As in rejection_test: p(x = 0) = 0.9999995, q one-hot at x, generators whose next draw
  // rejects x. The residual max(0, p - q) holds 5e-7, all of it off x.
  constexpr std::size_t v = 8;
  specdec::row_matrix target(2, v);
  const float other = static_cast<float>(std::log(5e-7 / 7.0 / (1.0 - 5e-7)));
  for (std::size_t j = 0; j < v; ++j) target(0, j) = target(1, j) = j == 0 ? 0.0f : other;
  specdec::row_matrix q = specdec::row_matrix::Zero(1, v);
  q(0, 0) = 1.0f;
  const std::vector<specdec::token_id> drafts{0};
  specdec::sampling_params sp;
  sp.temperature = 1.0f;
  for (specdec::rng g : specdec::test::generators_drawing_above(1.0 - 4e-7, 20)) {
    const auto r = specdec::verify_block(specdec::logits_view(target.data(), 2, v), drafts,
                                         specdec::logits_view(q.data(), 1, v), sp, g);
    CHECK(r.accepted == 0);
    CHECK(r.next != 0);
  }
}
