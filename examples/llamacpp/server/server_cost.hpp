// examples/llamacpp/server/server_cost.hpp - what a llama-server step costs, fitted while the server
// serves: each step's wall time (one update_slots: drafting, the target's decode, the draft's
// catch-up, sampling and verification, replies) regressed on what it held, starting from the
// start-up calibration. The speed policy (server_plan.hpp) plans with the fit. Needs no
// llama.cpp header, so that tests fit it on recorded steps.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <specdec/cost/step_fit.hpp>
#include <specdec/tree/tree_plan.hpp>

namespace specdec::llama_server {

/// What one llama-server step held, as the cost fit reads it.
struct step_shape {
  std::size_t generating = 0;      ///< slots that sampled a token this step
  std::size_t target_tokens = 0;   ///< tokens the target decoded: drafts and prompt chunks included
  std::size_t rows = 0;            ///< the generating slots' rows read: 1 + its draft each
  std::size_t ubatches = 0;        ///< the passes llama_decode split the step's batches into (split_passes)
  std::size_t catch_up = 0;        ///< tokens the draft model caught up before drafting
  std::size_t draft_calls = 0;     ///< the draft model's calls while drafting (its levels)
  /// The draft model's calls while drafting, in calibrated seconds: the sum over its levels of
  /// d(slots drafting at that level) (draft_level_seconds computes it).
  double draft_calibrated = 0.0;
};

/**
 * The passes (ubatches) llama_decode splits a batch into when sequence i holds counts[i] of its
 * tokens, at most `n_ubatch` tokens a pass. With a unified KV cache (one stream) a pass takes any
 * tokens: ceil(total / n_ubatch). Otherwise llama.cpp's split_equal takes the same number of
 * tokens from every sequence that has some left, the fewest any of them has (and at most
 * n_ubatch / sequences): per-slot counts 3, 6, 2, 4 take four passes where four counts of 4 take
 * one. `counts` is used as scratch (left all 0).
 */
inline std::size_t split_passes(std::span<std::size_t> counts, std::size_t n_ubatch, bool unified) {
  n_ubatch = std::max<std::size_t>(n_ubatch, 1);
  std::size_t passes = 0;
  if (unified) {
    std::size_t total = 0;
    for (std::size_t& c : counts) total += std::exchange(c, 0);
    return (total + n_ubatch - 1) / n_ubatch;
  }
  for (;;) {
    std::size_t seqs = 0, fewest = 0;
    for (const std::size_t c : counts) {
      if (c == 0) continue;
      fewest = seqs == 0 ? c : std::min(fewest, c);
      ++seqs;
    }
    if (seqs == 0) return passes;
    const std::size_t take = std::min(fewest, std::max<std::size_t>(n_ubatch / seqs, 1));
    for (std::size_t& c : counts) c -= std::min(c, take);
    ++passes;
  }
}

/**
 * The fitted cost of llama-server's steps. A step's seconds are modelled as
 *
 *     a t(target_tokens) + b draft_calibrated + c + e generating + f rows
 *       + h catch_up + u (ubatches - 1) t(1)
 *
 * with t and d the calibrated curves (t(n): one target call of n tokens; d(n): one draft call
 * of n tokens). The prior is the calibration itself (a = b = 1, an extra ubatch one t(1), a
 * caught-up token the draft curve's slope, the rest 0); each step recorded moves the fit towards
 * what the server really pays: the CPU work per row (sampler chain, verification), the
 * per-slot overhead, the replies, a batch split into several passes, a machine slower or faster
 * than at start-up. The last two hundred steps or so weigh (step_fit's defaults).
 */
class step_cost {
 public:
  static constexpr std::size_t n_features = 7;
  using features = std::array<double, n_features>;

  /// Starts from calibrated curves: target[n] (n >= 1, target[1] present) and draft[n]
  /// (empty: no draft model). Forgets every step recorded before.
  void reset(std::vector<double> target, std::vector<double> draft) {
    target_ = std::move(target);
    draft_ = std::move(draft);
    const double t1 = target_.size() > 1 ? target_[1] : 1e-3;
    const double d1 = draft_.size() > 1 ? draft_[1] : t1;
    const double d_slope = draft_.size() > 2
                               ? std::max(0.0, (draft_.back() - draft_[1]) / static_cast<double>(draft_.size() - 2))
                               : 0.0;
    const features prior{1.0, 1.0, 0.0, 0.0, 0.0, d_slope, 1.0};
    // Typical magnitudes: a step of four slots drafting four tokens each.
    const features scale{4.0 * t1, 4.0 * d1, 1.0, 4.0, 16.0, 16.0, t1};
    fit_ = step_fit<n_features>(prior, scale);
  }

  /// Whether reset() gave it a target curve.
  bool ready() const noexcept { return target_.size() > 1; }

  /// The calibrated seconds of the draft model's calls while the slots drafting this step drafted
  /// `lengths` (one each): level l's call holds the slots whose draft continues past l tokens
  /// (all of them at level 0, where each decodes its last sampled token, whatever its length).
  template <class Lengths>
  double draft_level_seconds(const Lengths& lengths) const {
    std::size_t levels = 0;
    for (const auto k : lengths) levels = std::max<std::size_t>({levels, static_cast<std::size_t>(k), 1});
    double s = 0.0;
    for (std::size_t l = 0; l < levels; ++l) {
      std::size_t n = 0;
      for (const auto k : lengths) n += (l == 0 || static_cast<std::size_t>(k) > l) ? 1 : 0;
      s += at(draft_, n);
    }
    return s;
  }

  /// Records one step and the seconds it took (steps with nothing generated are not recorded:
  /// the plans are for generating slots). Returns whether it was recorded.
  bool record(const step_shape& step, double seconds) {
    if (!ready() || step.generating == 0) return false;
    return fit_.record(features_of(step), seconds);
  }

  /// Predicted seconds of a step in which `generating` slots each decode 1 + k tokens, k drafted
  /// over k draft calls, in one pass.
  double predict(std::size_t generating, std::size_t k) const {
    return fit_.predict(features_of(plan_shape(generating, k)));
  }

  /// The cost model a slot plans with when `generating` slots share each step and each drafts
  /// the same K (one pass: one K for all keeps llama_decode's split to one ubatch): per slot,
  /// target[n] = predict(generating, n - 1) without the drafting, / generating, and the draft
  /// calls' fitted cost per level / generating. Built from the calibration alone while the fit
  /// predicts a step of no cost or less (a fit gone wrong).
  step_cost_model cost_for(std::size_t generating, std::size_t max_k) const {
    const std::size_t g = std::max<std::size_t>(generating, 1);
    const double per = 1.0 / static_cast<double>(g);
    step_cost_model c;
    c.target.assign(max_k + 2, 0.0);
    const features coef = fit_.coefficients();
    bool fitted_ok = true;
    for (std::size_t n = 1; n < c.target.size(); ++n) {
      step_shape s = plan_shape(g, n - 1);
      s.draft_calibrated = 0.0;
      s.draft_calls = 0;
      c.target[n] = dot(coef, features_of(s)) * per;
      fitted_ok = fitted_ok && c.target[n] > 0.0;
    }
    c.draft_per_level = std::max(0.0, coef[1]) * (draft_.empty() ? 0.0 : at(draft_, g)) * per;
    if (fitted_ok) return c;
    for (std::size_t n = 1; n < c.target.size(); ++n) c.target[n] = at(target_, g * n) * per;
    c.draft_per_level = (draft_.empty() ? 0.0 : at(draft_, g)) * per;
    return c;
  }

  /// The fitted coefficients (in the order of the model above) and how many steps they rest on.
  features coefficients() const { return fit_.coefficients(); }
  double steps() const noexcept { return fit_.steps(); }

 private:
  static step_shape plan_shape(std::size_t g, std::size_t k) {
    step_shape s;
    s.ubatches = 1;
    s.generating = g;
    s.target_tokens = g * (k + 1);
    s.rows = g * (k + 1);
    s.draft_calls = k;
    return s;
  }

  features features_of(const step_shape& s) const {
    const double t1 = at(target_, 1);
    double draft = s.draft_calibrated;
    if (s.draft_calls > 0 && draft == 0.0 && !draft_.empty())
      draft = static_cast<double>(s.draft_calls) * at(draft_, s.generating);
    return {at(target_, s.target_tokens),
            draft,
            1.0,
            static_cast<double>(s.generating),
            static_cast<double>(s.rows),
            static_cast<double>(s.catch_up),
            static_cast<double>(std::max<std::size_t>(s.ubatches, 1) - 1) * t1};
  }

  static double dot(const features& a, const features& b) {
    double s = 0.0;
    for (std::size_t j = 0; j < n_features; ++j) s += a[j] * b[j];
    return s;
  }

  // curve[n], linearly extrapolated past its end from its last two points; 0 for n = 0 or an
  // empty curve.
  static double at(const std::vector<double>& curve, std::size_t n) {
    if (n == 0 || curve.size() < 2) return 0.0;
    const std::size_t last = curve.size() - 1;
    if (n <= last) return curve[n];
    const double slope = last >= 2 ? curve[last] - curve[last - 1] : curve[last];
    return curve[last] + slope * static_cast<double>(n - last);
  }

  std::vector<double> target_;
  std::vector<double> draft_;
  step_fit<n_features> fit_{features{}, features{1, 1, 1, 1, 1, 1, 1}};
};

}  // namespace specdec::llama_server
