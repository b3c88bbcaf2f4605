// cost_keeper (cost/cost_keeper.hpp) on models whose "time" is a counter: it measures on first
// use and again only when its curve is older than max_age_seconds (or on refresh()), carries the
// drafter's cost, stays as it was when a calibration throws, and refuses bad options by name.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <specdec/cost/cost_keeper.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <stdexcept>
#include <vector>

#include "support/table_model.hpp"

namespace {

using specdec::token_id;

// A table model whose append of n tokens advances a shared counter clock by per_call + per_token
// x n; an append of throw_at tokens throws (0: none).
class timed_model {
 public:
  timed_model(double& now, double per_call, double per_token, std::uint64_t seed = 1)
      : m_({.vocab_size = 8, .seed = seed}), now_(now), per_call(per_call), per_token(per_token) {}
  std::size_t vocab_size() const noexcept { return m_.vocab_size(); }
  std::size_t size() const noexcept { return m_.size(); }
  std::size_t max_size() const noexcept { return m_.max_size(); }
  std::span<const token_id> tokens() const noexcept { return m_.tokens(); }
  void append(std::span<const token_id> t, std::span<float> logits) {
    if (throw_at == t.size()) throw std::runtime_error("timed_model: refused");
    m_.append(t, logits);
    now_ += per_call + per_token * static_cast<double>(t.size());
  }
  void truncate(std::size_t n) { m_.truncate(n); }

 private:
  specdec::test::table_model m_;
  double& now_;

 public:
  double per_call, per_token;
  std::size_t throw_at = 0;
};

}  // namespace

TEST_CASE("cost_keeper: measures on first use, then again only when its curve is stale") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  timed_model target(now, 1.0, 0.1);
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
  target.per_token = 0.5;
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
  timed_model target(now, 1.0, 0.1);
  specdec::cost_keeper keeper(
      target, {.max_age_seconds = std::numeric_limits<double>::infinity(), .calibration = {}},
      clock);
  keeper.current();
  now += 1e9;
  keeper.current();
  CHECK(keeper.calibrations() == 1);
  target.per_call = 2.0;
  CHECK(keeper.refresh().target[1] == Approx(2.1));
  CHECK(keeper.calibrations() == 2);
  CHECK(keeper.current().target[1] == Approx(2.1));
}

TEST_CASE("cost_keeper: with a model drafter, the drafting cost is kept too") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  timed_model target(now, 1.0, 0.1);
  timed_model draft_model(now, 0.05, 0.01, 3);
  specdec::model_drafter<timed_model> drafter(draft_model);
  specdec::cost_keeper keeper(target, drafter, {.max_age_seconds = 10.0, .calibration = {}},
                              clock);
  const auto& cost = keeper.current();
  CHECK(cost.draft_per_level == Approx(0.06));
  CHECK(cost.draft_per_node == Approx(0.01));
  CHECK(draft_model.size() == 0);
  // The target-only keeper has no drafting cost.
  specdec::cost_keeper alone(target, {}, clock);
  CHECK(alone.current().draft_per_level == 0.0);
}

TEST_CASE("cost_keeper: a calibration that throws leaves the keeper as it was") {
  double now = 0.0;
  const auto clock = [&now] { return now; };
  timed_model target(now, 1.0, 0.1);
  std::vector<float> logits(2 * 8);
  target.append(std::vector<token_id>{4, 5}, logits);
  specdec::cost_keeper keeper(target, {.max_age_seconds = 5.0, .calibration = {.max_n = 4}},
                              clock);
  keeper.current();
  const double spent = keeper.calibration_seconds();
  target.throw_at = 3;
  CHECK_THROWS_WITH(keeper.refresh(), "timed_model: refused");
  CHECK(keeper.calibrations() == 1);
  CHECK(keeper.calibration_seconds() == spent);
  CHECK(keeper.current().target[1] == Approx(1.1));  // not stale yet: the old curve
  now += 10.0;
  CHECK_THROWS_WITH(keeper.current(), "timed_model: refused");
  CHECK(keeper.calibrations() == 1);
  CHECK(std::vector<token_id>(target.tokens().begin(), target.tokens().end()) ==
        std::vector<token_id>{4, 5});
  target.throw_at = 0;
  CHECK(keeper.current().target[1] == Approx(1.1));
  CHECK(keeper.calibrations() == 2);
}

TEST_CASE("cost_keeper: bad options are refused with the field named") {
  double now = 0.0;
  timed_model target(now, 1.0, 0.1);
  CHECK_THROWS_WITH(specdec::cost_keeper(target, {.max_age_seconds = 0.0, .calibration = {}}),
                    "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(specdec::cost_keeper(target, {.max_age_seconds = -1.0, .calibration = {}}),
                    "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(
      specdec::cost_keeper(target, {.max_age_seconds = std::nan(""), .calibration = {}}),
      "cost_keeper_options.max_age_seconds: must be > 0");
  CHECK_THROWS_WITH(specdec::cost_keeper(target, {.max_age_seconds = 1.0,
                                                  .calibration = {.max_n = 0}}),
                    "calibrate_options.max_n: must be >= 1");
  CHECK(target.size() == 0);
}
