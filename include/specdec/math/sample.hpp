// specdec/math/sample.hpp - drawing tokens: argmax, sampling from a distribution, residuals.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/math/rng.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// The index of the largest value; ties go to the lowest index, everywhere in specdec, so greedy
/// paths computed by different components agree. Throws std::domain_error on NaN. O(V).
inline token_id argmax(std::span<const float> row) {
  if (row.empty()) throw std::invalid_argument("argmax: empty row");
  std::size_t best = 0;
  float best_value = row[0];
  bool nan = row[0] != row[0];
  for (std::size_t i = 1; i < row.size(); ++i) {
    const float x = row[i];
    nan |= x != x;
    if (x > best_value) {
      best_value = x;
      best = i;
    }
  }
  if (nan) {
    for (std::size_t i = 0; i < row.size(); ++i)
      if (std::isnan(row[i]))
        throw std::domain_error("logits: NaN at token " + std::to_string(i));
  }
  return static_cast<token_id>(best);
}

/**
 * Draws a token from `probs` (non-negative, any positive total: it need not be normalised).
 * Inverse CDF with a double running sum in index order, so the result depends only on the
 * values and the rng state, on every platform. A token of probability 0 is never drawn.
 * Throws std::domain_error if the total is not positive and finite. O(V).
 */
inline token_id sample(std::span<const float> probs, rng& gen) {
  double total = 0.0;
  for (float x : probs) total += x;
  if (!(total > 0.0) || !std::isfinite(total))
    throw std::domain_error("sample: probabilities must have a positive, finite total");
  const double target = gen.uniform_open() * total;
  double cumulative = 0.0;
  std::size_t last_positive = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    cumulative += probs[i];
    last_positive = i;
    if (cumulative > target) return static_cast<token_id>(i);
  }
  return static_cast<token_id>(last_positive);  // unreachable unless rounding: stay in support
}

/// Below this mass a residual max(0, p - q) is rounding noise. The rejection that needs the
/// residual happens with probability equal to its mass, so the fallback to p costs at most
/// about residual_noise_floor of total variation.
inline constexpr double residual_noise_floor = 1e-6;

/**
 * out = max(0, p - q), the distribution a rejected draft token is corrected from (unnormalised;
 * sample() accepts that). If its mass rounds to zero (p and q equal up to float noise), out = p.
 * Returns the mass used. O(V).
 */
inline double residual(std::span<const float> p, std::span<const float> q, std::span<float> out) {
  if (p.size() != q.size() || out.size() != p.size())
    throw std::invalid_argument("residual: p, q and out must have the same size");
  double mass = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const float d = p[i] - q[i];
    out[i] = d > 0.0f ? d : 0.0f;
    mass += out[i];
  }
  if (mass > residual_noise_floor) return mass;
  mass = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    out[i] = p[i];
    mass += p[i];
  }
  return mass;
}

/// residual() for a one-hot q at `token`: p with that token removed (falls back to p likewise).
inline double residual_one_hot(std::span<const float> p, token_id token, std::span<float> out) {
  if (out.size() != p.size()) throw std::invalid_argument("residual: p and out sizes differ");
  double mass = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    out[i] = static_cast<token_id>(i) == token ? 0.0f : p[i];
    mass += out[i];
  }
  if (mass > residual_noise_floor) return mass;
  std::copy(p.begin(), p.end(), out.begin());
  mass = 0.0;
  for (float x : p) mass += x;
  return mass;
}

}  // namespace specdec
