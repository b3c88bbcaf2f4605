// specdec/math/sampling_params.hpp - how a row of logits becomes a sampling distribution.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace specdec {

/**
 * Sampling settings, applied identically to the target and to a draft model.
 * The pipeline (see warp.hpp): temperature -> softmax -> top-k -> top-p -> min-p -> renormalise.
 * temperature == 0 means greedy (argmax, ties to the lowest id); the filters are then unused.
 */
struct sampling_params {
  float temperature = 1.0f;  ///< >= 0; 0 = greedy.
  std::size_t top_k = 0;     ///< keep the k most probable tokens; 0 = off.
  float top_p = 1.0f;        ///< (0, 1]; keep the smallest most-probable set with mass >= top_p.
  float min_p = 0.0f;        ///< [0, 1); drop tokens with p < min_p * max p.
  std::uint64_t seed = 0;    ///< seeds the decoder's rng.

  bool greedy() const noexcept { return temperature == 0.0f; }

  /// Throws std::invalid_argument naming the first bad field and its bound.
  void validate() const {
    if (!(std::isfinite(temperature) && temperature >= 0.0f))
      throw std::invalid_argument("sampling_params.temperature: must be finite and >= 0, got " +
                                  std::to_string(temperature));
    if (!(top_p > 0.0f && top_p <= 1.0f))
      throw std::invalid_argument("sampling_params.top_p: must be in (0, 1], got " +
                                  std::to_string(top_p));
    if (!(min_p >= 0.0f && min_p < 1.0f))
      throw std::invalid_argument("sampling_params.min_p: must be in [0, 1), got " +
                                  std::to_string(min_p));
  }
};

}  // namespace specdec
