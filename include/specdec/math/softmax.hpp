// specdec/math/softmax.hpp - numerically safe softmax, log-softmax and log-sum-exp over one row.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

namespace specdec {

namespace detail {
// exp() of a very negative number in Eigen's vectorised path is clamped to about 1e-38, not 0:
// masked (-inf) tokens are therefore zeroed explicitly so that they can never be drawn.
inline void zero_masked(std::span<const float> logits, std::span<float> out) {
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (logits[i] == -std::numeric_limits<float>::infinity()) out[i] = 0.0f;
}

inline Eigen::Map<const Eigen::ArrayXf> as_array(std::span<const float> x) {
  return {x.data(), static_cast<Eigen::Index>(x.size())};
}
inline Eigen::Map<Eigen::ArrayXf> as_array(std::span<float> x) {
  return {x.data(), static_cast<Eigen::Index>(x.size())};
}
}  // namespace detail

/**
 * The largest logit of a row, after checking that the row can define a distribution: no NaN,
 * no +inf, not empty, not all -inf (-inf marks a masked token and is allowed; `*masked`, when
 * given, tells whether the row has one). Throws std::domain_error naming `name`, the position
 * and the value. One pass, O(V).
 */
inline float checked_max(std::span<const float> logits, bool* masked = nullptr,
                         const char* name = "logits") {
  if (logits.empty()) throw std::invalid_argument(std::string(name) + ": empty row");
  constexpr float inf = std::numeric_limits<float>::infinity();
  float m = -inf;
  bool bad = false, neg_inf = false;
  for (float x : logits) {
    bad |= (x != x) | (x == inf);
    neg_inf |= x == -inf;
    m = x > m ? x : m;
  }
  if (masked) *masked = neg_inf;
  if (bad) {
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const float x = logits[i];
      if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
        throw std::domain_error(std::string(name) + ": " + (std::isnan(x) ? "NaN" : "+inf") +
                                " at token " + std::to_string(i));
    }
  }
  if (m == -inf)
    throw std::domain_error(std::string(name) + ": every token is -inf");
  return m;
}

/// log(sum(exp(logits))), computed stably. Throws like checked_max. O(V).
inline double log_sum_exp(std::span<const float> logits) {
  const float m = checked_max(logits);
  const double s = (detail::as_array(logits) - m).exp().sum();
  return static_cast<double>(m) + std::log(s);
}

/// probs = softmax(logits / temperature) (temperature > 0). Returns nothing; probs sums to 1.
inline void softmax(std::span<const float> logits, std::span<float> probs,
                    float temperature = 1.0f) {
  if (probs.size() != logits.size())
    throw std::invalid_argument("softmax: probs.size() must equal logits.size()");
  if (!(temperature > 0.0f)) throw std::invalid_argument("softmax: temperature must be > 0");
  bool masked = false;
  const float m = checked_max(logits, &masked);
  auto p = detail::as_array(probs);
  p = ((detail::as_array(logits) - m) * (1.0f / temperature)).exp();
  if (masked) detail::zero_masked(logits, probs);
  p *= static_cast<float>(1.0 / static_cast<double>(p.sum()));
}

/// out = log_softmax(logits / temperature) (temperature > 0).
inline void log_softmax(std::span<const float> logits, std::span<float> out,
                        float temperature = 1.0f) {
  if (out.size() != logits.size())
    throw std::invalid_argument("log_softmax: out.size() must equal logits.size()");
  if (!(temperature > 0.0f)) throw std::invalid_argument("log_softmax: temperature must be > 0");
  const float m = checked_max(logits);
  auto o = detail::as_array(out);
  o = (detail::as_array(logits) - m) * (1.0f / temperature);
  o -= static_cast<float>(std::log(static_cast<double>(o.exp().sum())));
}

}  // namespace specdec
