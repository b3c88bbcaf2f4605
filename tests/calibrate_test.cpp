// Calibration (cost/calibrate.hpp) on models whose "time" is a counter: the curve is the median
// per n over rounds, interpolated between the timed n and made non-decreasing; the budget bounds
// the rounds; draft costs come from the drafter's model or its rehearse; the contexts are left as
// found; bad options are refused with the field named.
#include <catch2/catch.hpp>
#include <cstddef>
#include <functional>
#include <span>
#include <specdec/cost/calibrate.hpp>
#include <specdec/draft/min_length_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <stdexcept>
#include <vector>

#include "support/clocked_model.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

namespace {

using specdec::calibrate_options;
using specdec::token_id;
using specdec::test::clocked_model;
using specdec::test::table_model;
using specdec::test::table_model_options;

// A tree model whose append costs n and whose append_tree costs 2 n on a counter clock.
class clocked_tree_model {
 public:
  explicit clocked_tree_model(double& now) : m_({.vocab_size = 8}), now_(now) {}
  std::size_t vocab_size() const noexcept { return m_.vocab_size(); }
  std::size_t size() const noexcept { return m_.size(); }
  std::span<const token_id> tokens() const noexcept { return m_.tokens(); }
  void append(std::span<const token_id> t, std::span<float> logits) {
    m_.append(t, logits);
    now_ += static_cast<double>(t.size());
  }
  void truncate(std::size_t n) { m_.truncate(n); }
  void append_tree(std::span<const token_id> t, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    m_.append_tree(t, parents, logits);
    now_ += 2.0 * static_cast<double>(t.size());
  }
  void commit(std::span<const std::int32_t> path) { m_.commit(path); }
  const specdec::test::tree_table_model& inner() const noexcept { return m_; }

 private:
  specdec::test::tree_table_model m_;
  double& now_;
};

}  // namespace

TEST_CASE("calibrate: the curve is t(n) per n, the median over rounds, non-decreasing") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  SECTION("every n timed up to 8, exact for a noiseless curve") {
    clocked_model m({.vocab_size = 8}, now, [](std::size_t n, std::size_t) {
      return 0.010 + 0.001 * static_cast<double>(n);
    });
    const auto t = specdec::measure_cost_curve(m, {.max_n = 9}, clock);
    REQUIRE(t.size() == 10);
    CHECK(t[0] == 0.0);
    for (std::size_t n = 1; n <= 9; ++n) CHECK(t[n] == Approx(0.010 + 0.001 * n));
  }
  SECTION("a slow call in a round is outvoted by the median") {
    // Every 7th call (the warm-up is call 0; a round is n = 1, 2, 3, 4, 1) takes 100 times
    // longer: 4 of the 35 timed calls, spread over the points.
    clocked_model m({.vocab_size = 8}, now, [](std::size_t n, std::size_t call) {
      return (call % 7 == 0 ? 100.0 : 1.0) * static_cast<double>(n);
    });
    const auto t = specdec::measure_cost_curve(
        m, {.max_n = 4, .min_rounds = 5, .max_rounds = 5, .budget_seconds = 1e9}, clock);
    for (std::size_t n = 1; n <= 4; ++n) CHECK(t[n] == Approx(static_cast<double>(n)));
  }
  SECTION("t(1) timed slow at the start of most rounds does not make every shape look cheap") {
    // A burst on the machine at the start of rounds 1 and 2 (calls 1 and 6: n = 1): with one
    // t(1) per round its median would be 1.5 and t(2) / t(1) 1.33 instead of 2.
    clocked_model m({.vocab_size = 8}, now, [](std::size_t n, std::size_t call) {
      return (call == 1 || call == 6 ? 1.5 : 1.0) * static_cast<double>(n);
    });
    const auto t = specdec::measure_cost_curve(
        m, {.max_n = 4, .min_rounds = 3, .max_rounds = 3, .budget_seconds = 0.0}, clock);
    for (std::size_t n = 1; n <= 4; ++n) CHECK(t[n] == Approx(static_cast<double>(n)));
  }
  SECTION("a dip is flattened: more tokens never cost less") {
    clocked_model m({.vocab_size = 8}, now, [](std::size_t n, std::size_t) {
      return n == 3 ? 0.5 : static_cast<double>(n);
    });
    const auto t = specdec::measure_cost_curve(m, {.max_n = 5}, clock);
    CHECK(t[1] == 1.0);
    CHECK(t[2] == Approx(1.25));  // 2 and 0.5 pooled: the nearest non-decreasing curve
    CHECK(t[3] == Approx(1.25));
    CHECK(t[4] == 4.0);
  }
  SECTION("one slow point is averaged with the later ones, not copied onto them") {
    // A flat curve from n = 5 on (a kernel's tile) with n = 5 measured slow: the running maximum
    // would give t(6..8) = 1.5; the least-squares fit pools 5..8.
    clocked_model m({.vocab_size = 16}, now, [](std::size_t n, std::size_t) {
      return n < 5 ? 1.0 : n == 5 ? 1.5 : 1.2;
    });
    const auto t = specdec::measure_cost_curve(m, {.max_n = 8}, clock);
    for (std::size_t n = 5; n <= 8; ++n) CHECK(t[n] == Approx((1.5 + 3 * 1.2) / 4));
  }
  SECTION("isotonic_fit is the pool-adjacent-violators fit") {
    std::vector<double> v{1, 3, 2, 2, 5, 4};
    specdec::detail::isotonic_fit(v);
    CHECK(v == std::vector<double>{1, 7.0 / 3, 7.0 / 3, 7.0 / 3, 4.5, 4.5});
  }
  SECTION("past 8, a grid about 25% apart and linear between") {
    const auto points = specdec::detail::calibration_points(33);
    CHECK(points == std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 18, 22, 27, 33});
    clocked_model m({.vocab_size = 8}, now, [](std::size_t n, std::size_t) {
      return static_cast<double>(n * n);  // convex: interpolation lies above
    });
    const auto t = specdec::measure_cost_curve(m, {.max_n = 33}, clock);
    for (std::size_t n : points) CHECK(t[n] == Approx(static_cast<double>(n * n)));
    CHECK(t[9] == Approx((64.0 + 100.0) / 2));
    CHECK(t[30] == Approx(27.0 * 27 + (33.0 * 33 - 27.0 * 27) * 3 / 6));
  }
}

TEST_CASE("calibrate: the budget bounds the rounds past min_rounds") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_model m({.vocab_size = 8}, now,
                  [](std::size_t n, std::size_t) { return static_cast<double>(n); });
  // A round of n = 1..4 and n = 1 again costs 11: warm-up 4, then rounds while the spent + 11
  // <= budget.
  SECTION("a tiny budget runs min_rounds") {
    specdec::measure_cost_curve(m, {.max_n = 4, .min_rounds = 2, .budget_seconds = 0.0}, clock);
    CHECK(m.calls() == 1 + 2 * 5);
    CHECK(now == Approx(4 + 2 * 11));
  }
  SECTION("a budget of 49 runs 4 rounds (4 + 44 spent, a fifth would reach 59)") {
    specdec::measure_cost_curve(m, {.max_n = 4, .min_rounds = 1, .budget_seconds = 49.0}, clock);
    CHECK(m.calls() == 1 + 4 * 5);
  }
  SECTION("max_rounds caps a generous budget") {
    specdec::measure_cost_curve(
        m, {.max_n = 4, .min_rounds = 1, .max_rounds = 3, .budget_seconds = 1e9}, clock);
    CHECK(m.calls() == 1 + 3 * 5);
  }
  SECTION("a max_n of 1 times n = 1 once per round") {
    specdec::measure_cost_curve(
        m, {.max_n = 1, .min_rounds = 3, .max_rounds = 3, .budget_seconds = 0.0}, clock);
    CHECK(m.calls() == 1 + 3);
  }
}

TEST_CASE("calibrate: the contexts are left as found, also when a call throws") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_model target({.vocab_size = 8, .max_size = 40}, now,
                       [](std::size_t n, std::size_t) { return 1.0 + 0.1 * n; });
  std::vector<float> logits(3 * 8);
  const std::vector<token_id> context{5, 6, 7};
  target.append(context, logits);
  const auto cost = specdec::calibrate(target, {.max_n = 12}, clock);
  CHECK(cost.target.size() == 13);
  CHECK(cost.draft_per_level == 0.0);
  CHECK(std::vector<token_id>(target.tokens().begin(), target.tokens().end()) == context);
  target.throw_at_ = 6;
  CHECK_THROWS_WITH(specdec::calibrate(target, {.max_n = 12}, clock), "clocked_model: refused");
  CHECK(std::vector<token_id>(target.tokens().begin(), target.tokens().end()) == context);
}

TEST_CASE("calibrate: trees = true times append_tree too and drops the pending tree") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_tree_model m(now);
  std::vector<float> logits(2 * 8);
  m.append(std::vector<token_id>{3, 4}, logits);
  const auto chains = specdec::measure_cost_curve(m, {.max_n = 6}, clock);
  const auto trees = specdec::measure_cost_curve(m, {.max_n = 6, .trees = true}, clock);
  for (std::size_t n = 1; n <= 6; ++n) {
    CHECK(chains[n] == static_cast<double>(n));
    CHECK(trees[n] == 2.0 * static_cast<double>(n));
  }
  CHECK(m.inner().tree_calls() == m.inner().commit_calls());
  CHECK(std::vector<token_id>(m.tokens().begin(), m.tokens().end()) == std::vector<token_id>{3, 4});
  m.append(std::vector<token_id>{5}, std::span<float>(logits).first(8));  // nothing pending
  CHECK(m.size() == 3);
  // calibrate keeps append's curve as the target's and adds append_tree's as tree_target.
  const auto both = specdec::calibrate(m, {.max_n = 6, .trees = true}, clock);
  const auto chains_only = specdec::calibrate(m, {.max_n = 6}, clock);
  REQUIRE(both.tree_target.size() == 7);
  for (std::size_t n = 1; n <= 6; ++n) {
    CHECK(both.target[n] == static_cast<double>(n));
    CHECK(both.tree_target[n] == 2.0 * static_cast<double>(n));
  }
  CHECK(chains_only.tree_target.empty());
  CHECK(m.size() == 3);
  // A model without append_tree: trees = true has nothing more to time.
  clocked_model flat({.vocab_size = 8}, now, [](std::size_t n, std::size_t) { return 1.0 * n; });
  CHECK(specdec::calibrate(flat, {.max_n = 4, .trees = true}, clock).tree_target.empty());
}

TEST_CASE("calibrate: a model drafter's draft model gives the drafting cost") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_model target({.vocab_size = 8}, now,
                       [](std::size_t n, std::size_t) { return 1.0 + 0.1 * n; });
  clocked_model draft_model({.vocab_size = 8, .seed = 3}, now,
                            [](std::size_t n, std::size_t) { return 0.05 + 0.01 * n; });
  specdec::model_drafter<clocked_model> drafter(draft_model);
  std::vector<float> logits(2 * 8);
  draft_model.append(std::vector<token_id>{1, 2}, logits);
  const auto cost = specdec::calibrate(target, drafter, {.max_n = 9, .draft_width = 4}, clock);
  CHECK(cost.target[1] == Approx(1.1));
  // A level of k nodes costs draft_per_level + k draft_per_node: the clock's own 0.05 + 0.01 k,
  // so a chain's level (k = 1) is t_draft(1), not t_draft(1) plus another node.
  CHECK(cost.draft_per_node == Approx(0.01));   // (t_draft(4) - t_draft(1)) / 3
  CHECK(cost.draft_per_level == Approx(0.05));  // t_draft(1) - draft_per_node
  CHECK(cost.seconds(1, 1) - cost.target[2] == Approx(0.06));  // one level of one node
  CHECK(draft_model.size() == 2);
  // A drafter without a model: no drafting cost.
  specdec::ngram_drafter lookup;
  const auto free_cost = specdec::calibrate(target, lookup, {.max_n = 3}, clock);
  CHECK(free_cost.draft_per_level == 0.0);
  CHECK(free_cost.draft_per_node == 0.0);
}

TEST_CASE("calibrate: a drafter without a model is timed by its rehearse") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_model target({.vocab_size = 8}, now,
                       [](std::size_t n, std::size_t) { return 1.0 + 0.1 * n; });
  // A level of n nodes costs 0.02 + 0.005 n on the counter clock (draft heads: one predictor
  // step per level, a row per node).
  struct rehearsing_drafter : specdec::ngram_drafter {
    double* now = nullptr;
    std::vector<std::size_t> rehearsed;
    void rehearse(std::size_t n) {
      rehearsed.push_back(n);
      *now += 0.02 + 0.005 * static_cast<double>(n);
    }
  } heads;
  heads.now = &now;
  const auto cost = specdec::calibrate(target, heads, {.max_n = 3, .draft_width = 5}, clock);
  CHECK(cost.draft_per_node == Approx(0.005));  // (rehearse(5) - rehearse(1)) / 4
  CHECK(cost.draft_per_level == Approx(0.02));  // rehearse(1) - draft_per_node
  // A warm-up of the widest level, then min_rounds (3) rounds of 1 and w.
  CHECK(heads.rehearsed == std::vector<std::size_t>{5, 1, 5, 1, 5, 1, 5});
  // Through a wrapper that forwards it (min_length_drafter).
  specdec::min_length_drafter<rehearsing_drafter> wrapped(heads, 2);
  const auto through = specdec::calibrate(target, wrapped, {.max_n = 3, .draft_width = 5}, clock);
  CHECK(through.draft_per_level == Approx(0.02));
  CHECK(through.draft_per_node == Approx(0.005));
}

TEST_CASE("calibrate: bad options are refused with the field named, nothing touched") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  clocked_model m({.vocab_size = 8, .max_size = 10}, now,
                  [](std::size_t n, std::size_t) { return static_cast<double>(n); });
  CHECK_THROWS_WITH(specdec::measure_cost_curve(m, {.max_n = 0}, clock),
                    "calibrate_options.max_n: must be >= 1");
  CHECK_THROWS_WITH(specdec::measure_cost_curve(m, {.max_n = 4, .min_rounds = 0}, clock),
                    "calibrate_options.min_rounds: must be >= 1");
  CHECK_THROWS_WITH(
      specdec::measure_cost_curve(m, {.max_n = 4, .min_rounds = 4, .max_rounds = 3}, clock),
      "calibrate_options.max_rounds: must be >= min_rounds (4), is 3");
  CHECK_THROWS_WITH(specdec::measure_cost_curve(m, {.max_n = 4, .budget_seconds = -1}, clock),
                    "calibrate_options.budget_seconds: must be >= 0");
  CHECK_THROWS_WITH(specdec::measure_cost_curve(m, {.max_n = 4, .draft_width = 1}, clock),
                    "calibrate_options.draft_width: must be >= 2");
  std::vector<float> logits(4 * 8);
  m.append(std::vector<token_id>{1, 2, 3, 4}, logits);
  CHECK_THROWS_WITH(specdec::measure_cost_curve(m, {.max_n = 7}, clock),
                    Catch::StartsWith("the model: 7 tokens after its 4 exceed its max_size 10"));
  CHECK(m.size() == 4);
  CHECK(m.calls() == 1);
}
