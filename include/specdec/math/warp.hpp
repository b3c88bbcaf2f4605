// specdec/math/warp.hpp - logits row -> the sampling distribution (temperature, top-k, top-p, min-p).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/softmax.hpp"

namespace specdec {

/// Scratch memory reused across warp calls, so the hot path allocates nothing. Not thread-safe.
struct warp_workspace {
  std::vector<float> values;
  std::vector<float> maxima;
};

namespace detail {

// The k-th largest of values[0..n) (1-based k), by selection: O(n) expected, no full sort.
inline float kth_largest(std::vector<float>& values, std::size_t k) {
  auto nth = values.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(values.begin(), nth, values.end(), std::greater<float>());
  return *nth;
}

// The nucleus threshold: the largest t such that the values >= t hold at least `target` mass.
// Quickselect by mass over values (all > 0): O(n) expected, no full sort.
inline float mass_threshold(std::vector<float>& values, double target) {
  std::size_t lo = 0, hi = values.size();
  double above = 0.0;  // mass of values already known to be above [lo, hi)
  float t = values.empty() ? 0.0f : values[0];
  while (lo < hi) {
    // median of three as pivot
    const float a = values[lo], b = values[lo + (hi - lo) / 2], c = values[hi - 1];
    const float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
    // three-way partition: [lo, gt_end) > pivot, [gt_end, eq_end) == pivot, rest < pivot
    auto first = values.begin() + static_cast<std::ptrdiff_t>(lo);
    auto last = values.begin() + static_cast<std::ptrdiff_t>(hi);
    auto gt_end = std::partition(first, last, [pivot](float v) { return v > pivot; });
    auto eq_end = std::partition(gt_end, last, [pivot](float v) { return v == pivot; });
    double mass_gt = 0.0;
    for (auto it = first; it != gt_end; ++it) mass_gt += *it;
    const double mass_eq = static_cast<double>(pivot) * static_cast<double>(eq_end - gt_end);
    if (above + mass_gt >= target && gt_end != first) {
      hi = static_cast<std::size_t>(gt_end - values.begin());
    } else if (above + mass_gt + mass_eq >= target || eq_end == last) {
      return pivot;
    } else {
      above += mass_gt + mass_eq;
      t = pivot;
      lo = static_cast<std::size_t>(eq_end - values.begin());
    }
  }
  return t;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// The maxima of consecutive groups of `group_width` values of x (the last group may be short).
inline constexpr std::size_t group_width = 4 * lanes;
SPECDEC_ROW_KERNEL void group_maxima(std::span<const float> x, std::vector<float>& out) {
  out.resize((x.size() + group_width - 1) / group_width);
  std::size_t i = 0, g = 0;
  for (; i + group_width <= x.size(); i += group_width, ++g) {
    const float* p = x.data() + i;
    const packet a = ei::pmax(ei::ploadu<packet>(p), ei::ploadu<packet>(p + lanes));
    const packet b = ei::pmax(ei::ploadu<packet>(p + 2 * lanes), ei::ploadu<packet>(p + 3 * lanes));
    out[g] = ei::predux_max(ei::pmax(a, b));
  }
  if (i < x.size()) out[g] = *std::max_element(x.begin() + static_cast<std::ptrdiff_t>(i), x.end());
}

// values <- every x[i] >= floor (floor > 0), in index order. Skips whole packets below the floor,
// so it costs one compare per value when few pass.
SPECDEC_ROW_KERNEL void collect_at_least(std::span<const float> x, float floor,
                                         std::vector<float>& values) {
  values.clear();
  const packet f = ei::pset1<packet>(floor);
  std::size_t i = 0;
  for (; i + 2 * lanes <= x.size(); i += 2 * lanes) {
    const packet a = ei::ploadu<packet>(x.data() + i), b = ei::ploadu<packet>(x.data() + i + lanes);
    if (!ei::predux_any(ei::por(ei::pcmp_le(f, a), ei::pcmp_le(f, b)))) continue;
    for (std::size_t j = i; j < i + 2 * lanes; ++j)
      if (x[j] >= floor) values.push_back(x[j]);
  }
  for (; i < x.size(); ++i)
    if (x[i] >= floor) values.push_back(x[i]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}  // namespace detail

/**
 * Turns one row of logits into the distribution the sampler draws from, in place of `probs`
 * (same size). The pipeline, one line per step:
 *   1. check: NaN or +inf anywhere throws std::domain_error naming the token; -inf is a masked token
 *   2. temperature: exp((logit - max) / T)   (T == 0: one-hot at the argmax, lowest id on ties)
 *   3. top-k: keep the k largest (ties at the boundary: lowest ids first), by selection, O(V)
 *   4. top-p: keep the smallest set of largest tokens whose mass reaches top_p (all tokens tied at
 *      the boundary are kept), by quickselect on mass, O(V) expected
 *   5. min-p: drop tokens whose probability is below min_p times the largest
 *   6. renormalise to sum 1
 * The same function is applied to the target and to draft models, so both are warped alike.
 * Allocates nothing once `ws` has grown to V. Not thread-safe per workspace.
 */
inline void warp(std::span<const float> logits, const sampling_params& sp, std::span<float> probs,
                 warp_workspace& ws) {
  if (probs.size() != logits.size())
    throw std::invalid_argument("warp: probs.size() must equal logits.size()");
  const std::size_t v = logits.size();
  bool masked = false;
  const float m = checked_max(logits, &masked);
  auto p = detail::as_array(probs);
  if (sp.greedy()) {
    p.setZero();
    probs[static_cast<std::size_t>(argmax(logits))] = 1.0f;
    return;
  }
  // max element is exactly 1
  double total = detail::exp_blocks(logits.data(), v, m, 1.0f / sp.temperature, masked,
                                    probs.data(), nullptr);

  if (sp.top_k > 0 && sp.top_k < v) {
    // The k-th largest of k group maxima is a lower bound of the k-th largest value: select
    // among the values at or above it only.
    float floor = 0.0f;
    detail::group_maxima(probs, ws.maxima);
    if (ws.maxima.size() >= sp.top_k) floor = detail::kth_largest(ws.maxima, sp.top_k);
    if (floor > 0.0f) {
      detail::collect_at_least(probs, floor, ws.values);
    } else {
      ws.values.assign(probs.begin(), probs.end());
    }
    const float t = detail::kth_largest(ws.values, sp.top_k);
    std::size_t above = 0, tied = 0;
    for (float x : ws.values) {
      above += x > t;
      tied += x == t;
    }
    if (above + tied == sp.top_k) {  // every tie fits: a plain threshold
      for (float& x : probs) x = x >= t ? x : 0.0f;
    } else {
      std::size_t ties_left = sp.top_k - above;
      for (float& x : probs) {
        if (x > t) continue;
        if (x == t && ties_left > 0) {
          --ties_left;
          continue;
        }
        x = 0.0f;
      }
    }
    total = detail::block_sums(probs, nullptr);
  }
  if (sp.top_p < 1.0f) {
    const double target = static_cast<double>(sp.top_p) * total;
    // Tokens below (1 - top_p) * total / V can never be in the nucleus. Nor can tokens below the
    // nucleus threshold of the group maxima alone: the values at or above it already hold the
    // target mass. Select by mass among the values at or above the larger floor only.
    float floor = static_cast<float>((1.0 - sp.top_p) * total / static_cast<double>(v));
    detail::group_maxima(probs, ws.maxima);
    double maxima_mass = 0.0;
    for (float x : ws.maxima) maxima_mass += x;
    if (maxima_mass >= target)
      floor = std::max(floor, detail::mass_threshold(ws.maxima, target));
    detail::collect_at_least(probs, std::max(floor, std::numeric_limits<float>::min()), ws.values);
    const float t = detail::mass_threshold(ws.values, target);
    for (float& x : probs) x = x < t ? 0.0f : x;
  }
  if (sp.min_p > 0.0f) {
    const float t = sp.min_p * p.maxCoeff();
    for (float& x : probs) x = x < t ? 0.0f : x;
  }
  if (sp.top_p < 1.0f || sp.min_p > 0.0f) total = detail::block_sums(probs, nullptr);
  p *= static_cast<float>(1.0 / total);
}

/// warp() with its own temporary workspace (allocates when top-k or top-p are on).
inline void warp(std::span<const float> logits, const sampling_params& sp,
                 std::span<float> probs) {
  warp_workspace ws;
  warp(logits, sp, probs, ws);
}

}  // namespace specdec
