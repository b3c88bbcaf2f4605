#include <catch2/catch.hpp>
#include <specdec/verify/rejection.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/rare_draws.hpp"

namespace {

using specdec::logits_view;
using specdec::row_matrix;
using specdec::token_id;

row_matrix logits_of(const std::vector<std::vector<double>>& rows) {
  row_matrix m(rows.size(), rows[0].size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j)
      m(i, j) = rows[i][j] > 0 ? static_cast<float>(std::log(rows[i][j]))
                               : -std::numeric_limits<float>::infinity();
  return m;
}

std::vector<double> normalised(std::vector<double> x) {
  double s = 0;
  for (double v : x) s += v;
  for (double& v : x) v /= s;
  return x;
}

struct pq_case {
  std::string name;
  std::vector<double> p, q;  // q empty = deterministic one-hot draft at `fixed`
  specdec::token_id fixed = 0;
};

std::vector<pq_case> cases() {
  std::vector<pq_case> out;
  out.push_back({"random", normalised({.3, .1, .25, .05, .2, .1}), normalised({.1, .3, .1, .2, .2, .1})});
  out.push_back({"p equals q", normalised({.4, .1, .2, .3}), normalised({.4, .1, .2, .3})});
  out.push_back({"disjoint supports", normalised({.5, .5, 0, 0}), normalised({0, 0, .7, .3})});
  out.push_back({"zeros in p", normalised({.6, 0, .4, 0, 0}), normalised({.2, .2, .2, .2, .2})});
  out.push_back({"zeros in q", normalised({.2, .2, .2, .2, .2}), normalised({0, .5, 0, .5, 0})});
  out.push_back({"near one-hot", normalised({.97, .01, .01, .01}), normalised({.01, .97, .01, .01})});
  out.push_back({"one-hot q on a likely token", normalised({.5, .3, .2}), {}, 0});
  out.push_back({"one-hot q on an unlikely token", normalised({.5, .3, .2}), {}, 2});
  out.push_back({"one-hot q on a zero token", normalised({.5, .5, 0}), {}, 2});
  specdec::rng g(99);
  for (int i = 0; i < 4; ++i) {
    std::vector<double> p(8), q(8);
    for (auto& x : p) x = g.uniform_open() < 0.3 ? 0.0 : g.uniform_open();
    for (auto& x : q) x = g.uniform_open() < 0.3 ? 0.0 : g.uniform_open();
    p[static_cast<std::size_t>(i)] += 0.1;
    q[static_cast<std::size_t>(7 - i)] += 0.1;
    out.push_back({"random sparse " + std::to_string(i), normalised(p), normalised(q)});
  }
  return out;
}

}  // namespace

TEST_CASE("rejection: the emitted token is distributed as p, acceptance is sum min(p, q)") {
  const int trials = 100000;
  for (const auto& c : cases()) {
    SECTION(c.name) {
      const std::size_t v = c.p.size();
      // Row 0 scores the draft, row 1 gives the bonus token; use p for both.
      const row_matrix target = logits_of({c.p, c.p});
      row_matrix q;
      std::vector<float> qf(v);
      if (!c.q.empty()) {
        q.resize(1, static_cast<Eigen::Index>(v));
        for (std::size_t j = 0; j < v; ++j) q(0, static_cast<Eigen::Index>(j)) = static_cast<float>(c.q[j]);
        for (std::size_t j = 0; j < v; ++j) qf[j] = static_cast<float>(c.q[j]);
      }
      const specdec::logits_view tv(target.data(), 2, static_cast<Eigen::Index>(v));
      const specdec::logits_view qv(q.data(), q.rows(), static_cast<Eigen::Index>(v));
      specdec::rng draft_rng(1), verify_rng(2);
      specdec::rejection_workspace ws;
      std::vector<std::size_t> counts(v);
      std::size_t accepted = 0;
      for (int t = 0; t < trials; ++t) {
        const specdec::token_id x = c.q.empty() ? c.fixed : specdec::sample(qf, draft_rng);
        const auto r = specdec::verify_rejection(tv, std::span(&x, 1), qv, {}, verify_rng, ws);
        accepted += r.accepted;
        counts[static_cast<std::size_t>(r.accepted ? x : r.next)]++;
      }
      const auto chi = specdec::test::chi_square(counts, c.p);
      INFO(chi.describe());
      CHECK(chi.pass());
      double expected_accept = 0.0;
      for (std::size_t j = 0; j < v; ++j)
        expected_accept += std::min(c.p[j], c.q.empty() ? (static_cast<specdec::token_id>(j) == c.fixed ? 1.0 : 0.0) : c.q[j]);
      const double sd = std::sqrt(expected_accept * (1 - expected_accept) / trials);
      CHECK(static_cast<double>(accepted) / trials == Approx(expected_accept).margin(5 * sd + 1e-9));
    }
  }
}

TEST_CASE("rejection: a chain of two drafts keeps the joint distribution") {
  const std::vector<double> p0 = normalised({.5, .2, .3}), p1 = normalised({.1, .6, .3});
  const std::vector<double> q0 = normalised({.2, .5, .3}), q1 = normalised({.3, .3, .4});
  // Rows: after context, after draft 1, after draft 2 (the bonus row).
  const row_matrix target = logits_of({p0, p1, p1});
  row_matrix q(2, 3);
  for (int j = 0; j < 3; ++j) {
    q(0, j) = static_cast<float>(q0[static_cast<std::size_t>(j)]);
    q(1, j) = static_cast<float>(q1[static_cast<std::size_t>(j)]);
  }
  const specdec::logits_view tv(target.data(), 3, 3), qv(q.data(), 2, 3);
  std::vector<float> q0f(q0.begin(), q0.end()), q1f(q1.begin(), q1.end());
  specdec::rng g(5);
  std::vector<std::size_t> counts(9);
  for (int t = 0; t < 200000; ++t) {
    const specdec::token_id d[2] = {specdec::sample(q0f, g), specdec::sample(q1f, g)};
    const auto r = specdec::verify_rejection(tv, d, qv, {}, g);
    const specdec::token_id first = r.accepted >= 1 ? d[0] : r.next;
    // The second token: the accepted draft, or the correction/bonus at row 1.
    const specdec::token_id second = r.accepted >= 2 ? d[1] : (r.accepted == 1 ? r.next : -1);
    if (second < 0) continue;  // only one token emitted: condition on two emitted
    counts[static_cast<std::size_t>(first * 3 + second)]++;
  }
  // Given that the first token was accepted, (first, second) must still follow p0 x p1 restricted
  // to the drafts' first-accepted event; simpler and exact: the second token given the first is p1.
  for (int a = 0; a < 3; ++a) {
    std::vector<std::size_t> c(counts.begin() + a * 3, counts.begin() + a * 3 + 3);
    const auto chi = specdec::test::chi_square(c, p1);
    INFO("first token " << a << ": " << chi.describe());
    CHECK(chi.pass());
  }
}

TEST_CASE("rejection: temperature 0 is exact-match greedy verification") {
  const row_matrix target = logits_of({{.1, .6, .3}, {.5, .4, .1}, {.2, .2, .6}});
  const specdec::logits_view tv(target.data(), 3, 3), none(nullptr, 0, 3);
  specdec::sampling_params sp;
  sp.temperature = 0.0f;
  specdec::rng g(1);
  const specdec::token_id good[2] = {1, 0}, bad[2] = {1, 2};
  auto r = specdec::verify_rejection(tv, good, none, sp, g);
  CHECK(r.accepted == 2);
  CHECK(r.next == 2);
  r = specdec::verify_rejection(tv, bad, none, sp, g);
  CHECK(r.accepted == 1);
  CHECK(r.next == 0);
}

TEST_CASE("rejection: bad drafts and shapes are refused with a message") {
  const row_matrix target = logits_of({{.5, .5}, {.5, .5}});
  const specdec::logits_view tv(target.data(), 2, 2), none(nullptr, 0, 2);
  specdec::rng g(1);
  const specdec::token_id out_of_range = 2, fine = 0;
  REQUIRE_THROWS_WITH(specdec::verify_rejection(tv, std::span(&out_of_range, 1), none, {}, g),
                      "verify_rejection: drafts[0] = 2 is outside the vocabulary [0, 2)");
  row_matrix q(1, 2);
  q << 0.0f, 1.0f;
  const specdec::logits_view qv(q.data(), 1, 2);
  REQUIRE_THROWS_WITH(
      specdec::verify_rejection(tv, std::span(&fine, 1), qv, {}, g),
      "verify_rejection: q(0, 0) = 0: a draft token must have been drawn from its q row");
  const specdec::logits_view one_row(target.data(), 1, 2);
  REQUIRE_THROWS_AS(specdec::verify_rejection(one_row, std::span(&fine, 1), none, {}, g),
                    std::invalid_argument);
  row_matrix nan_rows = target;
  nan_rows(0, 1) = std::nanf("");
  const specdec::logits_view nv(nan_rows.data(), 2, 2);
  REQUIRE_THROWS_WITH(specdec::verify_rejection(nv, std::span(&fine, 1), none, {}, g),
                      "logits: NaN at token 1");
}

TEST_CASE("rejection: large vocabularies through the fast paths (temperature only, top-p only)") {
  // V spans several of the kernels' blocks; q is a different warped distribution, so drafts are
  // rejected often and the residual, the bounds on p(x) and the bonus draw are all exercised.
  const std::size_t v = 2500;
  specdec::rng g(2024);
  specdec::row_matrix target(2, static_cast<Eigen::Index>(v)), draft_logits(1, static_cast<Eigen::Index>(v));
  for (std::size_t j = 0; j < v; ++j) {
    const auto c = static_cast<Eigen::Index>(j);
    const double peak = j < 40 ? 3.0 : 0.0;  // a head of likely tokens over a long tail
    target(0, c) = static_cast<float>(peak + 2.0 * (g.uniform_open() - 0.5));
    target(1, c) = static_cast<float>(peak + 2.0 * (g.uniform_open() - 0.5));
    draft_logits(0, c) = target(0, c) + static_cast<float>(1.5 * (g.uniform_open() - 0.5));
  }
  if (v > 7) target(0, 7) = -std::numeric_limits<float>::infinity();  // a masked token
  for (const float top_p : {1.0f, 0.8f}) {
    SECTION("top_p = " + std::to_string(top_p)) {
      specdec::sampling_params sp;
      sp.temperature = 0.8f;
      sp.top_p = top_p;
      std::vector<float> p0(v), p1(v), qf(v);
      specdec::warp(std::span<const float>(target.row(0).data(), v), sp, p0);
      specdec::warp(std::span<const float>(target.row(1).data(), v), sp, p1);
      specdec::warp(std::span<const float>(draft_logits.row(0).data(), v), sp, qf);
      row_matrix q(1, static_cast<Eigen::Index>(v));
      for (std::size_t j = 0; j < v; ++j) q(0, static_cast<Eigen::Index>(j)) = qf[j];
      const specdec::logits_view tv(target.data(), 2, static_cast<Eigen::Index>(v));
      const specdec::logits_view qv(q.data(), 1, static_cast<Eigen::Index>(v));
      const specdec::logits_view none(nullptr, 0, static_cast<Eigen::Index>(v));
      specdec::rng draft_rng(3), verify_rng(4);
      specdec::rejection_workspace ws;
      std::vector<std::size_t> first(v), bonus(v), first_one_hot(v);
      for (int t = 0; t < 50000; ++t) {
        const specdec::token_id x = specdec::sample(qf, draft_rng);
        auto r = specdec::verify_rejection(tv, std::span(&x, 1), qv, sp, verify_rng, ws);
        first[static_cast<std::size_t>(r.accepted ? x : r.next)]++;
        if (r.accepted) bonus[static_cast<std::size_t>(r.next)]++;
        const specdec::token_id fixed = static_cast<specdec::token_id>(t % 50);  // one-hot drafts
        r = specdec::verify_rejection(tv, std::span(&fixed, 1), none, sp, verify_rng, ws);
        first_one_hot[static_cast<std::size_t>(r.accepted ? fixed : r.next)]++;
      }
      const std::vector<double> e0(p0.begin(), p0.end()), e1(p1.begin(), p1.end());
      const auto c0 = specdec::test::chi_square(first, e0);
      const auto c1 = specdec::test::chi_square(bonus, e1);
      const auto c2 = specdec::test::chi_square(first_one_hot, e0);
      INFO("first token: " << c0.describe() << "; bonus token: " << c1.describe()
                           << "; one-hot drafts: " << c2.describe());
      CHECK(c0.pass());
      CHECK(c1.pass());
      CHECK(c2.pass());
      CHECK(first[7] == 0);  // masked
    }
  }
}

TEST_CASE("rejection: a rejected draft is never emitted, however small the residual") {
  // p(x = 0) = 0.9999995; the 7 other tokens share 5e-7. A draft of x is rejected with
  // probability 5e-7, and then the token must come from p without x. The generators below
  // are in states whose next draw rejects x for certain.
  constexpr std::size_t v = 8;
  row_matrix target(2, v);
  const float other = static_cast<float>(std::log(5e-7 / 7.0 / (1.0 - 5e-7)));
  for (std::size_t j = 0; j < v; ++j) target(0, j) = target(1, j) = j == 0 ? 0.0f : other;
  row_matrix one_hot_q = row_matrix::Zero(1, v);
  one_hot_q(0, 0) = 1.0f;
  const std::vector<token_id> drafts{0};
  specdec::sampling_params sp;
  sp.temperature = 1.0f;
  for (const bool full_q : {false, true}) {
    for (specdec::rng g : specdec::test::generators_drawing_above(1.0 - 4e-7, 20)) {
      const auto r = specdec::verify_rejection(
          logits_view(target.data(), 2, v), drafts, full_q ? logits_view(one_hot_q.data(), 1, v) : logits_view(nullptr, 0, v), sp, g);
      INFO((full_q ? "q as a row" : "one-hot q"));
      CHECK(r.accepted == 0);
      CHECK(r.next != 0);
    }
  }
}

TEST_CASE("rejection: a 152k-token row with its likely tokens at block boundaries") {
  // The likely tokens sit on both sides of the 1024-value blocks of sample() and the row kernels
  // (and at the row's end, in a partial block), among a tail of 150k unlikely ones; q moves mass
  // between them, so drafts are rejected often and the residual is drawn across blocks.
  const std::size_t v = 151936;
  specdec::rng g(7);
  std::vector<std::size_t> likely;
  for (std::size_t b = 1024; b < v; b += 1024 * 15) {
    likely.push_back(b - 1);
    likely.push_back(b);
  }
  likely.push_back(v - 1);
  row_matrix target(2, static_cast<Eigen::Index>(v)), draft_logits(1, static_cast<Eigen::Index>(v));
  for (std::size_t j = 0; j < v; ++j)
    for (Eigen::Index r = 0; r < 2; ++r) target(r, static_cast<Eigen::Index>(j)) = -4.0f;
  draft_logits.setConstant(-4.0f);
  for (std::size_t i = 0; i < likely.size(); ++i) {
    const auto c = static_cast<Eigen::Index>(likely[i]);
    target(0, c) = static_cast<float>(6.0 + 2.0 * g.uniform_open());
    target(1, c) = static_cast<float>(6.0 + 2.0 * g.uniform_open());
    draft_logits(0, c) = static_cast<float>(6.0 + 2.0 * g.uniform_open());
  }
  specdec::sampling_params sp;
  sp.temperature = 1.0f;
  std::vector<float> p0(v), qf(v);
  specdec::warp(std::span<const float>(target.row(0).data(), v), sp, p0);
  specdec::warp(std::span<const float>(draft_logits.row(0).data(), v), sp, qf);
  row_matrix q(1, static_cast<Eigen::Index>(v));
  for (std::size_t j = 0; j < v; ++j) q(0, static_cast<Eigen::Index>(j)) = qf[j];
  const logits_view tv(target.data(), 2, static_cast<Eigen::Index>(v));
  const logits_view qv(q.data(), 1, static_cast<Eigen::Index>(v));
  specdec::rng draft_rng(5), verify_rng(6);
  specdec::rejection_workspace ws;
  // Cells: each likely token, and the tail as one.
  std::vector<std::size_t> counts(likely.size() + 1);
  std::vector<double> expected(likely.size() + 1, 0.0);
  std::vector<std::size_t> cell(v, likely.size());
  for (std::size_t i = 0; i < likely.size(); ++i) cell[likely[i]] = i;
  for (std::size_t j = 0; j < v; ++j) expected[cell[j]] += p0[j];
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    const token_id x = specdec::sample(qf, draft_rng);
    const auto r = specdec::verify_rejection(tv, std::span(&x, 1), qv, sp, verify_rng, ws);
    counts[cell[static_cast<std::size_t>(r.accepted ? x : r.next)]]++;
  }
  const auto c = specdec::test::chi_square(counts, expected);
  INFO(c.describe() << "; tail mass " << expected.back());
  CHECK(c.pass());
}
