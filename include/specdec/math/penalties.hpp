// specdec/math/penalties.hpp - a ready-made row processor: the repetition, frequency and
// presence penalties engines apply to the last tokens of the context.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/types.hpp"

namespace specdec {

/// What penalties does to the tokens of the last `last_n` of a prefix (all values off by default).
struct penalty_options {
  std::size_t last_n = 64;  ///< how many of the prefix's last tokens count; 0 = none
  /// Divides a positive logit, multiplies a negative one (> 1 discourages, 1 = off): once per
  /// distinct token of the window, however often it occurs.
  float repeat = 1.0f;
  float frequency = 0.0f;  ///< subtracted once per occurrence in the window
  float presence = 0.0f;   ///< subtracted once per distinct token of the window

  /// Throws std::invalid_argument naming the first field that is not finite, or repeat <= 0.
  void validate() const {
    if (!(std::isfinite(repeat) && repeat > 0.0f))
      throw std::invalid_argument("penalty_options.repeat: must be finite and > 0, got " +
                                  std::to_string(repeat));
    if (!std::isfinite(frequency))
      throw std::invalid_argument("penalty_options.frequency: must be finite");
    if (!std::isfinite(presence))
      throw std::invalid_argument("penalty_options.presence: must be finite");
  }
};

/**
 * A row_processor (row_processor.hpp) applying penalty_options to the tokens of the last
 * `last_n` of the prefix, the way llama.cpp's penalties sampler and Hugging Face's repetition
 * penalty do: for each distinct token t of the window, occurring c times,
 * logit[t] = (logit[t] > 0 ? logit[t] / repeat : logit[t] * repeat) - c * frequency - presence.
 * A deterministic function of the prefix, so speculative decoding with it stays lossless.
 *
 * @code
 *   sampling_params sp{.temperature = 0.8f};
 *   sp.processor = penalties({.last_n = 64, .repeat = 1.1f});
 * @endcode
 *
 * O(last_n log last_n) per row; keeps a scratch copy of the window (grows to last_n tokens once,
 * then allocates nothing), so one object must not run on two threads at once (copies may). A
 * token of the window outside the row throws std::out_of_range naming it.
 */
class penalties {
 public:
  /// Validates `options` (see penalty_options::validate).
  explicit penalties(penalty_options options) : o_(options) { o_.validate(); }

  void operator()(std::span<const token_id> prefix, std::span<float> logits) {
    const std::size_t n = std::min(o_.last_n, prefix.size());
    window_.assign(prefix.end() - static_cast<std::ptrdiff_t>(n), prefix.end());
    std::sort(window_.begin(), window_.end());
    for (std::size_t i = 0; i < window_.size();) {
      std::size_t j = i;
      while (j < window_.size() && window_[j] == window_[i]) ++j;
      const token_id t = window_[i];
      if (t < 0 || static_cast<std::size_t>(t) >= logits.size())
        throw std::out_of_range("penalties: token " + std::to_string(t) +
                                " of the prefix is outside a row of " +
                                std::to_string(logits.size()) + " logits");
      float& x = logits[static_cast<std::size_t>(t)];
      x = x > 0.0f ? x / o_.repeat : x * o_.repeat;
      x -= static_cast<float>(j - i) * o_.frequency + o_.presence;
      i = j;
    }
  }

  const penalty_options& options() const noexcept { return o_; }

 private:
  penalty_options o_;
  std::vector<token_id> window_;
};

}  // namespace specdec
