// specdec/cost/cost_keeper.hpp - a step_cost_model kept fresh for a decoder that serves many
// requests: calibrate() once, then again whenever the curve in hand is older than a set age, on a
// host whose cost curve drifts while the process runs.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/cost/calibrate.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/tree/tree_plan.hpp"

namespace specdec {

/// How a cost_keeper keeps its curve; checked by its constructor, which names the field it
/// refuses.
struct cost_keeper_options {
  /// current() measures the curve again once the one in hand is older than this many seconds of
  /// the clock (> 0; infinity: only the first current() and refresh() measure).
  double max_age_seconds = 60.0;
  calibrate_options calibration;  ///< how each calibration measures (checked as calibrate does)
};

/**
 * Holds the step_cost_model of `target` (and of `drafter`'s model, as calibrate(target, drafter)
 * measures it) and measures it again when it is stale. A curve measured once at start-up goes
 * stale on a shared machine: on the 2-core host of docs/results.md the ratios t(n) / t(1) move by
 * tens of percent within a minute, and the speed policy then plans for a machine that is no
 * longer there. Typical use, in a server, between requests:
 *
 *     specdec::cost_keeper costs(target, drafter);              // nothing is measured yet
 *     ...
 *     options.policy = specdec::speed_policy(costs.current());  // measures when stale
 *     decoder.generate(prompt, options);
 *
 * Call current() and refresh() only where calibrate may run: the target (and the drafter's
 * model) idle, no tree pending, no other thread using them; they are left as found. Each
 * calibration costs what calibrate costs (by default under half a second on a memory-bound
 * target); calibration_seconds() sums them. The clock (steady_seconds by default; any callable
 * returning seconds) both times the calibration and dates the curve.
 */
template <LanguageModel Target, Drafter Draft = no_drafter, class Clock = steady_seconds>
class cost_keeper {
 public:
  /// Keeps the curve of `target` alone (no drafting cost). Measures nothing yet. Throws
  /// std::invalid_argument naming the field for bad options.
  explicit cost_keeper(Target& target, cost_keeper_options options = {}, Clock clock = {})
    requires std::is_same_v<Draft, no_drafter>
      : cost_keeper(target, nullptr, options, std::move(clock)) {}

  /// Keeps the curve of `target` and the drafting cost of `drafter` (calibrate(target,
  /// drafter)). Measures nothing yet. Throws std::invalid_argument naming the field for bad
  /// options.
  cost_keeper(Target& target, Draft& drafter, cost_keeper_options options = {}, Clock clock = {})
      : cost_keeper(target, &drafter, options, std::move(clock)) {}

  /// The curve, measured first when none was measured yet or the one in hand is older than
  /// max_age_seconds. What calibrate throws propagates, and the keeper is then as before.
  const step_cost_model& current() {
    if (!cost_ || clock_() - measured_at_ > options_.max_age_seconds) return refresh();
    return *cost_;
  }

  /// Measures the curve now, whatever its age. What calibrate throws propagates, and the keeper
  /// is then as before (the old curve, if any, is kept).
  const step_cost_model& refresh() {
    const double start = clock_();
    step_cost_model fresh = drafter_ ? calibrate(target_, *drafter_, options_.calibration, clock_)
                                     : calibrate(target_, options_.calibration, clock_);
    const double end = clock_();
    cost_ = std::move(fresh);
    measured_at_ = end;
    ++calibrations_;
    seconds_ += end - start;
    return *cost_;
  }

  /// Calibrations run so far.
  std::size_t calibrations() const noexcept { return calibrations_; }
  /// Clock seconds spent in them (model time the requests did not get).
  double calibration_seconds() const noexcept { return seconds_; }
  const cost_keeper_options& options() const noexcept { return options_; }

 private:
  cost_keeper(Target& target, Draft* drafter, const cost_keeper_options& options, Clock clock)
      : target_(target), drafter_(drafter), options_(options), clock_(std::move(clock)) {
    if (!(options.max_age_seconds > 0.0))
      throw std::invalid_argument("cost_keeper_options.max_age_seconds: must be > 0");
    detail::check_calibrate_options(options.calibration);
  }

  Target& target_;
  Draft* drafter_;
  cost_keeper_options options_;
  Clock clock_;
  std::optional<step_cost_model> cost_;
  double measured_at_ = 0.0;
  std::size_t calibrations_ = 0;
  double seconds_ = 0.0;
};

template <LanguageModel Target>
cost_keeper(Target&) -> cost_keeper<Target>;
template <LanguageModel Target>
cost_keeper(Target&, cost_keeper_options) -> cost_keeper<Target>;
template <LanguageModel Target, class Clock>
cost_keeper(Target&, cost_keeper_options, Clock) -> cost_keeper<Target, no_drafter, Clock>;
template <LanguageModel Target, Drafter Draft>
cost_keeper(Target&, Draft&) -> cost_keeper<Target, Draft>;
template <LanguageModel Target, Drafter Draft>
cost_keeper(Target&, Draft&, cost_keeper_options) -> cost_keeper<Target, Draft>;
template <LanguageModel Target, Drafter Draft, class Clock>
cost_keeper(Target&, Draft&, cost_keeper_options, Clock) -> cost_keeper<Target, Draft, Clock>;

}  // namespace specdec
