// cost_keeper (cost/cost_keeper.hpp) on models whose "time" is a counter: it measures on first
// use and again only when its curve is older than max_age_seconds (or on refresh()), carries the
// drafter's cost, stays as it was when a calibration throws, and refuses bad options by name.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <specdec/cost/cost_keeper.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <vector>

#include "support/clocked_model.hpp"

namespace {

using specdec::token_id;
using specdec::test::clocked_model;

// A call of n tokens costs per_call + per_token x n on the counter clock; both can change.
struct call_cost {
  double per_call, per_token;
  double operator()(std::size_t n, std::size_t) const {
    return per_call + per_token * static_cast<double>(n);
  }
};

}  // namespace

TEST_CASE("cost_keeper: measures on first use, then again only when its curve is stale") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  call_cost costs{1.0, 0.1};
  clocked_model target({.vocab_size = 8}, now, std::ref(costs));
  specdec::cost_keeper keeper(target, {.max_age_seconds = 100.0, .calibration = {.max_n = 4}},
                              clock);
  CHECK(keeper.calibrations() == 0);
  const double before = now;
  const auto& first = keeper.current();
  CHECK(keeper.calibrations() == 1);
  CHECK(keeper.calibration_seconds() == Approx(now - before));
  CHECK(first.target.size() == 5);
  CHECK(first.target[1] == Approx(1.1));
  CHECK(first.target[4] == Approx(1.4));

  // Younger than max_age: the same curve, nothing measured.
  costs.per_token = 0.5;
  now += 60.0;
  CHECK(keeper.current().target[4] == Approx(1.4));
  CHECK(keeper.calibrations() == 1);

  // Older: measured again, and the curve is the machine's new one.
  now += 41.0;
  const double spent = keeper.calibration_seconds(), again = now;
  CHECK(keeper.current().target[4] == Approx(3.0));
  CHECK(keeper.calibrations() == 2);
  CHECK(keeper.calibration_seconds() == Approx(spent + (now - again)));
  CHECK(target.size() == 0);  // the context as found
}

TEST_CASE("cost_keeper: refresh() measures whatever the age, and an infinite age never expires") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  call_cost costs{1.0, 0.1};
  clocked_model target({.vocab_size = 8}, now, std::ref(costs));
  specdec::cost_keeper keeper(
      target, {.max_age_seconds = std::numeric_limits<double>::infinity(), .calibration = {}},
      clock);
  keeper.current();
  now += 1e9;
  keeper.current();
  CHECK(keeper.calibrations() == 1);
  costs.per_call = 2.0;
  CHECK(keeper.refresh().target[1] == Approx(2.1));
  CHECK(keeper.calibrations() == 2);
  CHECK(keeper.current().target[1] == Approx(2.1));
}

TEST_CASE("cost_keeper: with a model drafter, the drafting cost is kept too") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  call_cost costs{1.0, 0.1};
  clocked_model target({.vocab_size = 8}, now, std::ref(costs));
  clocked_model draft_model({.vocab_size = 8, .seed = 3}, now, call_cost{0.05, 0.01});
  specdec::model_drafter<clocked_model> drafter(draft_model);
  specdec::cost_keeper keeper(target, drafter, {.max_age_seconds = 10.0, .calibration = {}}, clock);
  const auto& cost = keeper.current();
  CHECK(cost.draft_per_level == Approx(0.05));
  CHECK(cost.draft_per_node == Approx(0.01));
  CHECK(draft_model.size() == 0);
  // The target-only keeper has no drafting cost.
  specdec::cost_keeper alone(target, {}, clock);
  CHECK(alone.current().draft_per_level == 0.0);
}

TEST_CASE("cost_keeper: a calibration that throws leaves the keeper as it was") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  call_cost costs{1.0, 0.1};
  clocked_model target({.vocab_size = 8}, now, std::ref(costs));
  std::vector<float> logits(2 * 8);
  target.append(std::vector<token_id>{4, 5}, logits);
  specdec::cost_keeper keeper(target, {.max_age_seconds = 5.0, .calibration = {.max_n = 4}}, clock);
  keeper.current();
  const double spent = keeper.calibration_seconds();
  target.throw_at_ = 3;
  CHECK_THROWS_WITH(keeper.refresh(), "clocked_model: refused");
  CHECK(keeper.calibrations() == 1);
  CHECK(keeper.calibration_seconds() == spent);
  CHECK(keeper.current().target[1] == Approx(1.1));  // not stale yet: the old curve
  now += 10.0;
  CHECK_THROWS_WITH(keeper.current(), "clocked_model: refused");
  CHECK(keeper.calibrations() == 1);
  CHECK(std::vector<token_id>(target.tokens().begin(), target.tokens().end()) ==
        std::vector<token_id>{4, 5});
  target.throw_at_ = 0;
  CHECK(keeper.current().target[1] == Approx(1.1));
  CHECK(keeper.calibrations() == 2);
}

TEST_CASE("cost_keeper: bad options are refused with the field named") {
  double now = 0.0;
  call_cost costs{1.0, 0.1};
  clocked_model target({.vocab_size = 8}, now, std::ref(costs));
  CHECK_THROWS_WITH(specdec::cost_keeper(target, {.max_age_seconds = 0.0, .calibration = {}}),
                    "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(specdec::cost_keeper(target, {.max_age_seconds = -1.0, .calibration = {}}),
                    "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(
      specdec::cost_keeper(target, {.max_age_seconds = std::nan(""), .calibration = {}}),
      "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(
      specdec::cost_keeper(target, {.max_age_seconds = 1.0, .calibration = {.max_n = 0}}),
      "calibrate_options.max_n: must be >= 1");
  CHECK(target.size() == 0);
}
