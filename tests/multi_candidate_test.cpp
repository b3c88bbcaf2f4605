#include <catch2/catch.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/math/warp.hpp>
#include <specdec/verify/multi_candidate.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/rare_draws.hpp"
#include "support/table_model.hpp"

using specdec::candidate_draw;
using specdec::logits_view;
using specdec::row_matrix;
using specdec::token_id;
using specdec::token_tree;

namespace {

// Pearson's goodness-of-fit check of `counts` against `probs` (tests/support/chi_square.hpp; a
// count on a zero-probability cell fails outright), labelled in the Catch2 log.
void check_fits(const std::vector<std::size_t>& counts, const std::vector<double>& probs,
                const std::string& label) {
  INFO(label);
  REQUIRE(counts.size() == probs.size());
  const auto r = specdec::test::chi_square(counts, probs);
  INFO(r.describe());
  CHECK(r.pass());
}

std::vector<float> to_float(const std::vector<double>& x) { return {x.begin(), x.end()}; }

// Logits whose softmax is p (zero -> -inf, a masked token).
void write_log(const std::vector<double>& p, row_matrix& m, Eigen::Index row) {
  for (std::size_t i = 0; i < p.size(); ++i)
    m(row, static_cast<Eigen::Index>(i)) = p[i] > 0.0 ? static_cast<float>(std::log(p[i]))
                                                      : -std::numeric_limits<float>::infinity();
}

struct node_outcome {
  std::vector<std::size_t> counts;  // emitted first token
  double accept_rate = 0.0;         // fraction of trials that accepted a candidate
};

// One node with k children: the root's target distribution is p, the children are proposed by
// `draw` from q (iid / without replacement) or are `fixed` (deterministic). Counts the first
// emitted token: the accepted child's token, else the correction.
node_outcome run_node(const std::vector<double>& p, const std::vector<double>& q, std::size_t k,
                      candidate_draw draw, const std::vector<token_id>& fixed,
                      std::size_t trials, std::uint64_t seed) {
  const std::size_t v = p.size();
  auto tree = token_tree::from_branching(std::vector<std::size_t>{k});
  row_matrix target = row_matrix::Zero(static_cast<Eigen::Index>(tree.size()),
                                       static_cast<Eigen::Index>(v));
  write_log(p, target, 0);
  row_matrix qm;
  if (draw != candidate_draw::deterministic) {
    qm = row_matrix::Zero(static_cast<Eigen::Index>(tree.size()), static_cast<Eigen::Index>(v));
    for (std::size_t i = 0; i < v; ++i) qm(0, static_cast<Eigen::Index>(i)) = static_cast<float>(q[i]);
  } else {
    for (std::size_t j = 0; j < k; ++j) tree.set_token(j + 1, fixed[j]);
  }
  const logits_view tv(target.data(), target.rows(), target.cols());
  const logits_view qv(qm.data(), qm.rows(), qm.cols());
  const std::vector<float> qf = to_float(q);
  std::vector<float> pool(v);
  specdec::rng gen(seed);
  specdec::sampling_params sp;
  specdec::tree_verify_workspace ws;
  specdec::tree_verify_result r;
  node_outcome out;
  out.counts.assign(v, 0);
  std::size_t accepted = 0;
  for (std::size_t t = 0; t < trials; ++t) {
    if (draw == candidate_draw::iid) {
      for (std::size_t j = 0; j < k; ++j) tree.set_token(j + 1, specdec::sample(qf, gen));
    } else if (draw == candidate_draw::without_replacement) {
      pool = qf;
      for (std::size_t j = 0; j < k; ++j) {
        const token_id x = specdec::sample(pool, gen);
        pool[static_cast<std::size_t>(x)] = 0.0f;
        tree.set_token(j + 1, x);
      }
    }
    specdec::verify_tree(tree, tv, qv, draw, sp, gen, ws, r);
    const token_id first = r.accepted.empty() ? r.next : tree.token(static_cast<std::size_t>(r.accepted[0]));
    ++out.counts[static_cast<std::size_t>(first)];
    accepted += !r.accepted.empty();
  }
  out.accept_rate = static_cast<double>(accepted) / static_cast<double>(trials);
  return out;
}

double overlap(const std::vector<double>& p, const std::vector<double>& q) {
  double s = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) s += std::min(p[i], q[i]);
  return s;
}

// Exact acceptance probability of Algorithm 1 with k i.i.d. candidates: each rejection leaves
// the residual, and candidate j is accepted with probability sum_x min(p_j(x), q(x)).
double exact_iid_acceptance(std::vector<double> p, const std::vector<double>& q, std::size_t k) {
  double reject_all = 1.0;
  for (std::size_t j = 0; j < k; ++j) {
    const double a = overlap(p, q);
    reject_all *= 1.0 - a;
    double mass = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) mass += std::max(0.0, p[i] - q[i]);
    if (mass <= 1e-12) break;  // p == q: everything accepted
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::max(0.0, p[i] - q[i]) / mass;
  }
  return 1.0 - reject_all;
}

constexpr std::size_t trials_per_case = 100'000;

struct dist_case {
  const char* name;
  std::vector<double> p, q;
};

std::vector<dist_case> distribution_cases() {
  return {
      {"generic", {.22, .18, .15, .12, .1, .08, .06, .05, .03, .01},
       {.05, .1, .3, .05, .2, .02, .08, .1, .05, .05}},
      {"p == q", {.3, .2, .1, .1, .1, .05, .05, .04, .03, .03},
       {.3, .2, .1, .1, .1, .05, .05, .04, .03, .03}},
      {"disjoint supports", {.5, .3, .2, 0, 0, 0, 0, 0, 0, 0},
       {0, 0, 0, .3, .2, .1, .1, .1, .1, .1}},
      {"zeros in both", {.4, 0, .3, 0, .2, 0, .1, 0, 0, 0},
       {.1, .3, .05, .15, 0, .1, .1, .1, .05, .05}},
      {"q one-hot", {.2, .1, .3, .1, .1, .05, .05, .05, .03, .02},
       {0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
  };
}

std::size_t support(const std::vector<double>& q) {
  return static_cast<std::size_t>(std::count_if(q.begin(), q.end(), [](double x) { return x > 0; }));
}

}  // namespace

TEST_CASE("multi_candidate: Algorithm 1 (i.i.d. candidates) is lossless at one node") {
  std::uint64_t seed = 100;
  for (const auto& c : distribution_cases()) {
    for (std::size_t k : {1, 2, 4, 8}) {
      const auto label = std::string("iid, ") + c.name + ", k = " + std::to_string(k);
      const auto out = run_node(c.p, c.q, k, candidate_draw::iid, {}, trials_per_case, ++seed);
      check_fits(out.counts, c.p, label);
      // Acceptance: exactly 1 - prod(rejections), never below single-candidate sum min(p, q).
      const double exact = exact_iid_acceptance(c.p, c.q, k);
      INFO(label << ": acceptance " << out.accept_rate << ", exact " << exact);
      CHECK(exact >= overlap(c.p, c.q) - 1e-12);
      CHECK(std::abs(out.accept_rate - exact) < 5.0 * std::sqrt(0.25 / trials_per_case) + 1e-9);
    }
  }
}

TEST_CASE("multi_candidate: Algorithm 2 (without replacement) is lossless at one node") {
  std::uint64_t seed = 200;
  for (const auto& c : distribution_cases()) {
    for (std::size_t k : {1, 2, 4, 8}) {
      if (k > support(c.q)) continue;  // cannot draw k distinct tokens
      const auto label = std::string("without replacement, ") + c.name + ", k = " + std::to_string(k);
      const auto out =
          run_node(c.p, c.q, k, candidate_draw::without_replacement, {}, trials_per_case, ++seed);
      check_fits(out.counts, c.p, label);
      INFO(label << ": acceptance " << out.accept_rate);
      const double floor = overlap(c.p, c.q);
      CHECK(out.accept_rate >= floor - 5.0 * std::sqrt(0.25 / trials_per_case));
      if (k == 1) CHECK(std::abs(out.accept_rate - floor) < 5.0 * std::sqrt(0.25 / trials_per_case));
    }
  }
}

TEST_CASE("multi_candidate: deterministic candidates are lossless at one node") {
  const std::vector<double> p{.22, .18, .15, .12, .1, .08, .06, .05, .03, .01};
  const std::vector<double> zeros{.4, 0, .3, 0, .2, 0, .1, 0, 0, 0};
  // After removing token 3 the remainder is < 1e-3: the mass is then recomputed exactly.
  const std::vector<double> peaked{.0002, .0001, .0001, .999, .0001, .0001, .0001, .0001, .0001, .0001};
  const std::vector<std::vector<token_id>> lists{
      {3, 0, 9, 1, 4, 8, 2, 5},  // distinct (3 first: the peak of `peaked`)
      {2, 2, 7, 2, 0, 0, 9, 9},  // duplicates
      {1, 3, 5, 7, 0, 2, 4, 6},  // leading zero-probability tokens (under `zeros`)
  };
  std::uint64_t seed = 300;
  for (const auto& target : {p, zeros, peaked}) {
    for (const auto& list : lists) {
      for (std::size_t k : {1, 2, 4, 8}) {
        const std::vector<token_id> cands(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(k));
        const auto label = "deterministic, k = " + std::to_string(k) + ", first " +
                           std::to_string(list[0]) + ", p[1] = " + std::to_string(target[1]);
        const auto out =
            run_node(target, {}, k, candidate_draw::deterministic, cands, trials_per_case, ++seed);
        check_fits(out.counts, target, label);
        // Exact acceptance: the mass of the distinct candidates.
        std::vector<token_id> distinct = cands;
        std::sort(distinct.begin(), distinct.end());
        distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
        double mass = 0.0;
        for (token_id x : distinct) mass += target[static_cast<std::size_t>(x)];
        INFO(label << ": acceptance " << out.accept_rate << ", exact " << mass);
        CHECK(std::abs(out.accept_rate - mass) < 5.0 * std::sqrt(0.25 / trials_per_case));
      }
    }
  }
}

namespace {
// Exact output distribution of a chain of proposals tested MCSD-style: candidate j with
// proposal q_j is accepted with probability min(1, p_j(x) / q_j(x)), else p <- norm(max(0, p - q_j)).
std::vector<double> exact_chain(std::vector<double> p, const std::vector<token_id>& cands,
                                const std::vector<std::vector<double>>& qs) {
  std::vector<double> out(p.size(), 0.0);
  double reach = 1.0;
  for (std::size_t j = 0; j < cands.size(); ++j) {
    const auto x = static_cast<std::size_t>(cands[j]);
    const double a = std::min(1.0, p[x] / qs[j][x]);
    out[x] += reach * a;
    reach *= 1.0 - a;
    double mass = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) mass += std::max(0.0, p[i] - qs[j][i]);
    if (mass > 1e-12)
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::max(0.0, p[i] - qs[j][i]) / mass;
  }
  for (std::size_t i = 0; i < p.size(); ++i) out[i] += reach * p[i];
  return out;
}

// q with `removed` tokens dropped and renormalised.
std::vector<double> without(std::vector<double> q, const std::vector<token_id>& removed) {
  for (token_id x : removed) q[static_cast<std::size_t>(x)] = 0.0;
  const double s = std::accumulate(q.begin(), q.end(), 0.0);
  for (double& x : q) x /= s;
  return q;
}
}  // namespace

TEST_CASE("multi_candidate: deterministic top-k is not a sample without replacement") {
  const std::vector<double> p{.5, .3, .2}, q{.6, .3, .1};
  const std::vector<token_id> top2{0, 1};  // the two most probable tokens under q, always
  SECTION("the naive procedure is biased") {
    // Treating top-2 as a without-replacement sample from q restricted to the top-2:
    const auto q1 = without(q, {2});     // (2/3, 1/3, 0)
    const auto q2 = without(q1, {0});    // (0, 1, 0)
    const auto naive = exact_chain(p, top2, {q1, q2});
    CHECK(naive[0] == Approx(0.75));
    CHECK(naive[1] == Approx(0.0).margin(1e-12));
    CHECK(naive[2] == Approx(0.25));
    // ... and treating it as Algorithm 2 over the full q is biased too: (5/6, 0, 1/6).
    const auto naive_full = exact_chain(p, top2, {q, without(q, {0})});
    CHECK(naive_full[0] == Approx(5.0 / 6.0));
    CHECK(naive_full[1] == Approx(0.0).margin(1e-12));
    CHECK(naive_full[2] == Approx(1.0 / 6.0));
  }
  SECTION("one-hot proposals are exact") {
    // The library's deterministic path: each candidate its own one-hot proposal.
    const std::vector<std::vector<double>> one_hot{{1, 0, 0}, {0, 1, 0}};
    const auto exact = exact_chain(p, top2, one_hot);
    for (std::size_t i = 0; i < 3; ++i) CHECK(exact[i] == Approx(p[i]));
    const auto out = run_node(p, {}, 2, candidate_draw::deterministic, top2, 200'000, 7);
    check_fits(out.counts, p, "library, deterministic top-2");
    // The naive law would be rejected by the same test at this sample size.
    const std::vector<std::size_t> naive_counts{150'000, 0, 50'000};
    CHECK_FALSE(specdec::test::chi_square(naive_counts, p).pass());
  }
}

TEST_CASE("multi_candidate: greedy target walks the argmax path") {
  // 2x2 tree over V = 4; rows chosen so the argmax path is root -> node 2 -> node 5.
  auto tree = token_tree::from_branching("2x2");
  const std::vector<token_id> tokens{0, 1, 3, 0, 2, 2, 2};
  for (std::size_t i = 1; i < tree.size(); ++i) tree.set_token(i, tokens[i]);
  row_matrix target = row_matrix::Zero(7, 4);
  target.row(0) << 0, 1, 0, 5;  // argmax 3 -> node 2
  target.row(2) << 0, 0, 4, 4;  // tie 2 vs 3 -> 2; nodes 5 and 6 both hold 2: the first, node 5
  target.row(5) << 9, 1, 1, 1;  // leaf: bonus = 0
  target.row(6) << 0, 0, 0, 9;
  const logits_view tv(target.data(), 7, 4);
  specdec::sampling_params sp;
  sp.temperature = 0.0f;
  specdec::rng gen(1);
  auto r = specdec::verify_tree(tree, tv, specdec::no_q_rows(), candidate_draw::deterministic, sp, gen);
  CHECK(r.accepted == std::vector<std::int32_t>{2, 5});
  CHECK(r.next == 0);
  CHECK(r.stop_node() == 5);
  SECTION("a miss at the root stops there") {
    target.row(0) << 7, 1, 0, 5;
    r = specdec::verify_tree(tree, tv, specdec::no_q_rows(), candidate_draw::deterministic, sp, gen);
    CHECK(r.accepted.empty());
    CHECK(r.next == 0);
    CHECK(r.stop_node() == 0);
  }
}

TEST_CASE("multi_candidate: input validation") {
  auto tree = token_tree::from_branching("2");
  tree.set_token(1, 1);
  tree.set_token(2, 2);
  row_matrix target = row_matrix::Zero(3, 4), q = row_matrix::Zero(3, 4);
  q.row(0) << .5, .5, 0, 0;
  const logits_view tv(target.data(), 3, 4), qv(q.data(), 3, 4), short_t(target.data(), 2, 4);
  specdec::sampling_params sp;
  specdec::rng gen(3);
  using specdec::verify_tree;
  REQUIRE_THROWS_WITH(verify_tree(tree, short_t, qv, candidate_draw::iid, sp, gen),
                      "verify_tree: target must have tree.size() = 3 rows, has 2");
  REQUIRE_THROWS_WITH(verify_tree(tree, tv, qv, candidate_draw::deterministic, sp, gen),
                      "verify_tree: q must have no rows when draw is candidate_draw::deterministic");
  REQUIRE_THROWS_WITH(verify_tree(tree, tv, specdec::no_q_rows(), candidate_draw::iid, sp, gen),
                      "verify_tree: q must have tree.size() = 3 rows of 4 probabilities for a "
                      "sampled draw, has 0 x 0");
  // Token 2 has q = 0 at the root: it cannot have been drawn (reached when token 1 is rejected).
  target.row(0) << -10, -10, 0, 0;  // p(1) tiny: token 1 is almost surely rejected
  REQUIRE_THROWS_WITH(verify_tree(tree, tv, qv, candidate_draw::iid, sp, gen),
                      "verify_tree: q(0, 2) = 0 but node 2 proposes it: a candidate must have "
                      "been drawn from its parent's q row");
  tree.set_token(2, 1);  // drawn twice without replacement
  REQUIRE_THROWS_WITH(verify_tree(tree, tv, qv, candidate_draw::without_replacement, sp, gen),
                      "verify_tree: node 2 proposes token 1, which q(0) minus the earlier "
                      "candidates gives probability 0 (drawn twice, or not from q)");
  tree.set_token(2, 4);
  REQUIRE_THROWS_WITH(verify_tree(tree, tv, qv, candidate_draw::iid, sp, gen),
                      "verify_tree: node 2 has token 4 outside the vocabulary [0, 4)");
  sp.temperature = -1.0f;
  CHECK_THROWS_AS(verify_tree(tree, tv, qv, candidate_draw::iid, sp, gen), std::invalid_argument);
}

namespace {
// A whole decoding step over a 2-level tree, repeated until two tokens are emitted; the target
// and draft are table models. The pair of first two tokens must follow the target's joint law.
std::vector<std::size_t> run_tree_pairs(candidate_draw draw, std::size_t trials, std::uint64_t seed) {
  const std::size_t v = 5;
  const specdec::test::table_model target({.vocab_size = v, .seed = 11});
  const specdec::test::table_model drafter({.vocab_size = v, .seed = 11, .mix = 0.6f, .mix_seed = 12});
  const std::vector<token_id> prompt{1, 3};
  specdec::sampling_params sp;
  specdec::rng gen(seed);
  specdec::tree_verify_workspace ws;
  specdec::tree_verify_result r;
  std::vector<float> logits(v), probs(v), pool(v);
  std::vector<std::size_t> counts(v * v, 0);
  const auto shape = token_tree::from_branching("3x2");
  for (std::size_t t = 0; t < trials; ++t) {
    std::vector<token_id> seq = prompt;
    while (seq.size() < prompt.size() + 2) {
      token_tree tree = shape;
      tree.set_token(0, seq.back());
      row_matrix q;
      if (draw == candidate_draw::deterministic) {
        // A trie of deterministic drafts: the draft's top-2 at the root, each followed greedily.
        drafter.next_logits(seq, logits);
        std::vector<token_id> order(v);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](token_id a, token_id b) { return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)]; });
        std::vector<std::vector<token_id>> cands;
        for (std::size_t j = 0; j < 2; ++j) {
          auto ctx = seq;
          ctx.push_back(order[j]);
          drafter.next_logits(ctx, logits);
          cands.push_back({order[j], specdec::argmax(logits)});
        }
        tree = token_tree::from_candidates(seq.back(), cands);
      } else {
        q = row_matrix::Zero(static_cast<Eigen::Index>(tree.size()), static_cast<Eigen::Index>(v));
        for (std::size_t node = 0; node < tree.size(); ++node) {
          if (tree.is_leaf(node)) continue;
          auto ctx = seq;
          const auto path = tree.path_tokens(node);
          ctx.insert(ctx.end(), path.begin() + 1, path.end());
          drafter.next_logits(ctx, logits);
          specdec::warp(logits, sp, probs);
          for (std::size_t i = 0; i < v; ++i) q(static_cast<Eigen::Index>(node), static_cast<Eigen::Index>(i)) = probs[i];
          pool = probs;
          for (const std::int32_t child : tree.children(node)) {
            const token_id x = specdec::sample(pool, gen);
            if (draw == candidate_draw::without_replacement) pool[static_cast<std::size_t>(x)] = 0.0f;
            tree.set_token(static_cast<std::size_t>(child), x);
          }
        }
      }
      row_matrix rows(static_cast<Eigen::Index>(tree.size()), static_cast<Eigen::Index>(v));
      for (std::size_t node = 0; node < tree.size(); ++node) {
        auto ctx = seq;
        const auto path = tree.path_tokens(node);
        ctx.insert(ctx.end(), path.begin() + 1, path.end());
        target.next_logits(ctx, std::span<float>(rows.row(static_cast<Eigen::Index>(node)).data(), v));
      }
      specdec::verify_tree(tree, logits_view(rows.data(), rows.rows(), rows.cols()),
                           logits_view(q.data(), q.rows(), q.cols()), draw, sp, gen, ws, r);
      for (const std::int32_t node : r.accepted) seq.push_back(tree.token(static_cast<std::size_t>(node)));
      seq.push_back(r.next);
    }
    ++counts[static_cast<std::size_t>(seq[2]) * v + static_cast<std::size_t>(seq[3])];
  }
  return counts;
}

// The exact joint law of the first two tokens after {1, 3} (temperature 1).
std::vector<double> target_pairs() {
  const specdec::test::table_model target({.vocab_size = 5, .seed = 11});
  return specdec::test::exact_joint(target, {1, 3}, 2, specdec::sampling_params{});
}
}  // namespace

TEST_CASE("multi_candidate: whole trees are lossless over two tokens") {
  const auto joint = target_pairs();
  SECTION("iid") { check_fits(run_tree_pairs(candidate_draw::iid, 100'000, 41), joint, "iid 3x2"); }
  SECTION("without replacement") {
    check_fits(run_tree_pairs(candidate_draw::without_replacement, 100'000, 42), joint, "wor 3x2");
  }
  SECTION("deterministic trie") {
    check_fits(run_tree_pairs(candidate_draw::deterministic, 100'000, 43), joint, "trie");
  }
}

TEST_CASE("multi_candidate: a rejected deterministic candidate is never emitted, and later ones "
          "are judged against the renormalised rest") {
  // Root children: token 0 (p = 0.9999995), then token 1 (p = 3e-7 of the 5e-7 left). After 0
  // is rejected, token 1 must be accepted with probability 3e-7 / 5e-7 = 0.6, and a token drawn
  // from the rest must not be 0.
  constexpr std::size_t v = 4;
  const std::vector<double> p{1.0 - 5e-7, 3e-7, 1e-7, 1e-7};
  row_matrix target(3, v);
  for (Eigen::Index r = 0; r < 3; ++r)
    for (std::size_t j = 0; j < v; ++j) target(r, static_cast<Eigen::Index>(j)) = static_cast<float>(std::log(p[j]));
  const std::vector<token_id> tokens{2, 0, 1};
  const std::vector<std::int32_t> parents{-1, 0, 0};
  const token_tree tree(tokens, parents);
  specdec::sampling_params sp;
  sp.temperature = 1.0f;
  int second = 0, trials = 0;
  for (specdec::rng g : specdec::test::generators_drawing_above(1.0 - 4e-7, 40)) {
    const auto r = specdec::verify_tree(tree, logits_view(target.data(), 3, v), specdec::no_q_rows(),
                                        candidate_draw::deterministic, sp, g);
    ++trials;
    CHECK((r.accepted.empty() || r.accepted == std::vector<std::int32_t>{2}));
    if (r.accepted.empty()) {
      CHECK(r.next != 0);
      CHECK(r.next != 1);
    } else {
      ++second;
    }
  }
  INFO(second << " of " << trials << " accepted the second candidate");
  CHECK(second >= 12);  // Binomial(40, 0.6): mean 24, P(< 12) < 1e-4
  CHECK(second <= 36);
}
