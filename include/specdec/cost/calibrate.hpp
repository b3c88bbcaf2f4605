// specdec/cost/calibrate.hpp - what a step costs on the user's own models, measured: the target's
// t(n) (seconds to score n tokens in one call) and the drafting cost per level and per node,
// as the step_cost_model that plan_chain, plan_tree and generate_options::policy read.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// How calibrate measures; checked by calibrate, which names the field it refuses.
struct calibrate_options {
  /// t(n) is measured for n = 1..max_n (>= 1): chains of K <= max_n - 1 drafts and trees of
  /// max_n - 1 nodes can be planned. Every n up to 8 is timed, larger n on a grid about 25%
  /// apart (max_n included) with t(n) interpolated linearly between.
  std::size_t max_n = 9;
  std::size_t min_rounds = 3;  ///< rounds that always run (>= 1); a round times each n once
  std::size_t max_rounds = 7;  ///< rounds at most (>= min_rounds)
  /// After min_rounds, another round runs only while the model time spent so far plus one more
  /// round stays within this many seconds (>= 0).
  double budget_seconds = 0.3;
  /// Also time the target's append_tree (a tree of n nodes, node i the child of node (i - 1) /
  /// 2), when it models TreeLanguageModel: calibrate puts that curve in
  /// step_cost_model::tree_target, which plans that branch read (a chain is scored with append),
  /// at twice the calibration time; measure_cost_curve times it instead of append. For tree
  /// plans on an engine whose tree attention costs more than its causal attention.
  bool trees = false;
  /// The draft model (a drafter's d.model()) is timed at 1 and draft_width tokens (>= 2).
  std::size_t draft_width = 8;
};

/// Seconds on std::chrono::steady_clock: calibrate's default clock. Any callable returning
/// seconds as a double serves (a test passes a counter).
struct steady_seconds {
  double operator()() const noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

namespace detail {

inline void check_calibrate_options(const calibrate_options& o) {
  if (o.max_n == 0) throw std::invalid_argument("calibrate_options.max_n: must be >= 1");
  if (o.min_rounds == 0) throw std::invalid_argument("calibrate_options.min_rounds: must be >= 1");
  if (o.max_rounds < o.min_rounds)
    throw std::invalid_argument("calibrate_options.max_rounds: must be >= min_rounds (" +
                                std::to_string(o.min_rounds) + "), is " +
                                std::to_string(o.max_rounds));
  if (!(o.budget_seconds >= 0.0))
    throw std::invalid_argument("calibrate_options.budget_seconds: must be >= 0");
  if (o.draft_width < 2) throw std::invalid_argument("calibrate_options.draft_width: must be >= 2");
}

/// The n that calibrate times for a curve up to max_n: 1..min(8, max_n), then about 25% apart,
/// max_n last. O(log max_n) entries past 8.
inline std::vector<std::size_t> calibration_points(std::size_t max_n) {
  std::vector<std::size_t> n;
  for (std::size_t i = 1; i <= std::min<std::size_t>(8, max_n); ++i) n.push_back(i);
  while (n.back() < max_n)
    n.push_back(std::min(max_n, n.back() + std::max<std::size_t>(1, n.back() / 4)));
  return n;
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// The non-decreasing sequence nearest to `v` in least squares (pool adjacent violators): a
/// value above a later one is averaged with it, so one slow point raises its neighbours by its
/// share instead of lifting every later point to itself. O(n); allocates two vectors of n.
inline void isotonic_fit(std::vector<double>& v) {
  std::vector<double> sum;
  std::vector<std::size_t> count;
  for (double x : v) {
    sum.push_back(x);
    count.push_back(1);
    while (sum.size() > 1 && sum[sum.size() - 2] * static_cast<double>(count.back()) >
                                 sum.back() * static_cast<double>(count[count.size() - 2])) {
      sum[sum.size() - 2] += sum.back();
      count[count.size() - 2] += count.back();
      sum.pop_back();
      count.pop_back();
    }
  }
  std::size_t i = 0;
  for (std::size_t b = 0; b < sum.size(); ++b)
    for (std::size_t c = 0; c < count[b]; ++c) v[i++] = sum[b] / static_cast<double>(count[b]);
}

/// Times calls of n tokens after `model`'s context and puts the context back after each.
template <LanguageModel Model, class Clock>
class call_timer {
 public:
  call_timer(Model& model, std::size_t max_n, bool trees, Clock& clock, const std::string& who)
      : model_(model), clock_(clock), base_(static_cast<std::size_t>(model.size())), trees_(trees) {
    const auto v = static_cast<std::size_t>(model.vocab_size());
    const std::size_t cap = max_size_of(model);
    if (base_ > cap || max_n > cap - base_)
      throw std::invalid_argument(who + ": " + std::to_string(max_n) + " tokens after its " +
                                  std::to_string(base_) + " exceed its max_size " +
                                  std::to_string(cap) + " (lower calibrate_options.max_n or " +
                                  "draft_width, or calibrate on a shorter context)");
    logits_.resize(max_n * v);
    tokens_.resize(max_n);
    parents_.resize(max_n);
    for (std::size_t i = 0; i < max_n; ++i) {
      tokens_[i] = static_cast<token_id>((i + 1) % v);
      parents_[i] = i == 0 ? -1 : static_cast<std::int32_t>((i - 1) / 2);
    }
  }

  /// Seconds of one call of n tokens; the context is back to what it was afterwards, also when
  /// the call throws.
  double operator()(std::size_t n) {
    const std::span<const token_id> tokens(tokens_.data(), n);
    const std::span<float> logits(logits_.data(), n * logits_.size() / tokens_.size());
    double start = 0.0, seconds = 0.0;
    try {
      if constexpr (TreeLanguageModel<Model>) {
        if (trees_) {
          start = clock_();
          model_.append_tree(tokens, std::span<const std::int32_t>(parents_.data(), n), logits);
          seconds = clock_() - start;
          model_.commit(std::span<const std::int32_t>());  // drops the pending tree
          return seconds;
        }
      }
      start = clock_();
      model_.append(tokens, logits);
      seconds = clock_() - start;
    } catch (...) {
      if (static_cast<std::size_t>(model_.size()) > base_) model_.truncate(base_);
      throw;
    }
    model_.truncate(base_);
    return seconds;
  }

 private:
  Model& model_;
  Clock& clock_;
  std::size_t base_;
  bool trees_;
  std::vector<float> logits_;
  std::vector<token_id> tokens_;
  std::vector<std::int32_t> parents_;
};

}  // namespace detail

/**
 * The seconds `model` takes to score n tokens in one call after the context it holds, for n =
 * 1..options.max_n: element n of the result (element 0 is 0), as step_cost_model::target wants it.
 * One warm-up call of max_n tokens, then rounds that each time every measured n once
 * (calibration_points), so that a change of machine speed lands on all n alike, and n = 1 also at
 * the round's end: whether a shape pays is decided by t(n) / t(1), and a t(1) timed high by a
 * burst on the machine would make every shape look cheap, so t(1) gets twice the samples; t(n) is
 * the median over its samples, made non-decreasing by the nearest such curve in least squares
 * (detail::isotonic_fit: more tokens never do less work, a dip is noise a planner would chase, and
 * one slow point is averaged with the later ones it exceeds rather than lifting them all), then
 * interpolated between measured n.
 *
 * Cost: the warm-up plus min_rounds to max_rounds rounds of t(1) plus the sum over measured n of
 * t(n), the budget deciding how many past min_rounds (the default, 9 points: about 3 x 12 t(1) on
 * a memory-bound target). Leaves the model's context exactly as found: every call is truncated
 * back (a tree's pending nodes dropped with commit of an empty path), also when it throws. The
 * appended tokens are ids 1, 2, ... (mod V); the cost is measured at the current context length,
 * so calibrate after a typical prompt for long-context costs. Throws std::invalid_argument naming
 * the field for bad options or a max_n that does not fit the model's max_size() after its context;
 * what the model throws propagates. `clock()` returns seconds (steady_seconds by default). Not
 * thread-safe: it uses the model.
 */
template <LanguageModel Model, class Clock = steady_seconds>
std::vector<double> measure_cost_curve(Model& model, const calibrate_options& options = {},
                                       Clock clock = {}) {
  detail::check_calibrate_options(options);
  const std::size_t max_n = options.max_n;
  detail::call_timer<Model, Clock> timer(model, max_n, options.trees, clock, "the model");
  const std::vector<std::size_t> points = detail::calibration_points(max_n);
  double spent = timer(max_n);  // warm-up: weights and cache touched, scratch grown
  std::vector<std::vector<double>> samples(points.size());
  for (std::size_t round = 0; round < options.max_rounds; ++round) {
    double this_round = 0.0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      samples[i].push_back(timer(points[i]));
      this_round += samples[i].back();
    }
    if (points.size() > 1) {  // t(1) again at the round's end: every break-even is a ratio to it
      samples[0].push_back(timer(1));
      this_round += samples[0].back();
    }
    spent += this_round;
    if (round + 1 >= options.min_rounds && spent + this_round > options.budget_seconds) break;
  }
  std::vector<double> medians(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) medians[i] = detail::median_of(samples[i]);
  detail::isotonic_fit(medians);
  std::vector<double> t(max_n + 1, 0.0);
  double prev_t = 0.0;
  std::size_t prev_n = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double here = medians[i];
    for (std::size_t n = prev_n + 1; n <= points[i]; ++n)  // linear between measured points
      t[n] = prev_n == 0 ? here
                         : prev_t + (here - prev_t) * static_cast<double>(n - prev_n) /
                                        static_cast<double>(points[i] - prev_n);
    prev_t = here;
    prev_n = points[i];
  }
  return t;
}

/// calibrate without a drafter: the target's curve (measure_cost_curve of append), with
/// options.trees and a TreeLanguageModel also append_tree's (tree_target), and no drafting cost
/// (set draft_per_level / draft_per_node yourself when drafting is not free).
template <LanguageModel Target, class Clock = steady_seconds>
step_cost_model calibrate(Target& target, const calibrate_options& options = {}, Clock clock = {}) {
  step_cost_model cost;
  calibrate_options chains = options;
  chains.trees = false;
  cost.target = measure_cost_curve(target, chains, clock);
  if constexpr (TreeLanguageModel<Target>)
    if (options.trees) cost.tree_target = measure_cost_curve(target, options, clock);
  return cost;
}

namespace detail {

/// Fits step_cost_model's drafting terms (a level of k nodes costs draft_per_level + k x
/// draft_per_node) through the medians of time(1) and time(w) over `rounds` rounds after one
/// warm-up of time(w): draft_per_node = (time(w) - time(1)) / (w - 1), draft_per_level =
/// time(1) - draft_per_node (each at least 0), so a chain's level costs time(1), not time(1)
/// plus another node.
template <class Time>
void set_draft_cost(step_cost_model& cost, Time&& time, std::size_t w, std::size_t rounds) {
  time(w);  // warm-up
  std::vector<double> one, wide;
  for (std::size_t r = 0; r < rounds; ++r) {
    one.push_back(time(1));
    wide.push_back(time(w));
  }
  const double t1 = median_of(one), tw = median_of(wide);
  cost.draft_per_node = std::max(0.0, (tw - t1) / static_cast<double>(w - 1));
  cost.draft_per_level = std::max(0.0, t1 - cost.draft_per_node);
}

}  // namespace detail

/**
 * The step cost of decoding `target` with `drafter`: the target's curve (measure_cost_curve)
 * and the drafting cost, each the median over options.min_rounds rounds, w =
 * options.draft_width:
 * - a drafter that says which model it drafts with (d.model(), as model_drafter): that model's
 *   calls of 1 and w tokens (a level is one call), (t(w) - t(1)) / (w - 1) as draft_per_node
 *   and t(1) minus that as draft_per_level, so that a level of k nodes is predicted at t(1) +
 *   (k - 1) draft_per_node. Counts the model's calls only (not its sampling, nor the one call a
 *   step spends catching up on the accepted tokens);
 * - else a drafter with the optional member d.rehearse(n) (the draft heads: one level of n
 *   nodes on placeholder inputs, see the Drafter concept): the same two figures from the time of
 *   rehearse(1) and rehearse(w);
 * - else (n-gram lookup) no drafting cost: set it yourself if it matters.
 * Leaves both models' contexts as found (the drafter stays in sync). Throws as
 * measure_cost_curve; a draft model without room for draft_width tokens is refused naming it.
 * Not thread-safe.
 */
template <LanguageModel Target, Drafter Draft, class Clock = steady_seconds>
step_cost_model calibrate(Target& target, Draft& drafter, const calibrate_options& options = {},
                          Clock clock = {}) {
  step_cost_model cost = calibrate(target, options, clock);
  const std::size_t w = options.draft_width;
  if constexpr (requires { drafter.model(); }) {
    auto& draft_model = drafter.model();
    detail::call_timer<std::remove_reference_t<decltype(draft_model)>, Clock> timer(
        draft_model, w, false, clock, "drafter.model()");
    detail::set_draft_cost(cost, timer, w, options.min_rounds);
  } else if constexpr (requires { drafter.rehearse(w); }) {
    const auto time = [&](std::size_t n) {
      const double start = clock();
      drafter.rehearse(n);
      return clock() - start;
    };
    detail::set_draft_cost(cost, time, w, options.min_rounds);
  }
  return cost;
}

}  // namespace specdec
