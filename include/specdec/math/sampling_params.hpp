// specdec/math/sampling_params.hpp - how a row of logits becomes a sampling distribution.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "specdec/math/row_processor.hpp"

namespace specdec {

/**
 * Sampling settings, applied identically to the target and to a draft model.
 * The pipeline (see warp.hpp): temperature -> softmax -> top-k -> top-p -> min-p -> renormalise.
 * temperature == 0 means greedy (argmax, ties to the lowest id); the filters are then unused.
 */
struct sampling_params {
  /// 0 = greedy, else at least min_temperature.
  float temperature = 1.0f;
  std::size_t top_k = 0;   ///< keep the k most probable tokens; 0 = off.
  float top_p = 1.0f;      ///< (0, 1]; keep the smallest most-probable set with mass >= top_p.
  float min_p = 0.0f;      ///< [0, 1); drop tokens with p < min_p * max p.
  /// Seeds the generation's rng. The default policy is a fixed seed, reseeded at every start:
  /// the same prompt and options give the same tokens on every run, whatever ran before on that
  /// decoder, and a sequence of the batch decoder draws from its own generator, so its tokens do
  /// not depend on the other sequences or on when it joined. A library never draws entropy
  /// behind the caller's back (a run that cannot be repeated cannot be debugged or tested); a
  /// caller wanting different samples per request passes a different seed (e.g. from
  /// std::random_device). Draft models draw from the same generator, so the seed fixes the
  /// whole speculative run, not only the target's draws.
  std::uint64_t seed = 0;
  /// Applied to each row before the pipeline above, given the tokens the row follows (see
  /// row_processor.hpp: logit biases, penalties, grammar masks); empty = none. The decoders
  /// apply it to the target's rows and the model and head drafters to theirs; speculative
  /// output is then distributed exactly as plain decoding with the same processor.
  row_processor processor = nullptr;
  /// Coupled sampling (generate_options::verification = coupled, which sets it for the
  /// drafters): draws use noise keyed by (seed, position, token) instead of the generator
  /// (math/coupled.hpp), so that a drafter's sample is the target's own draw wherever their rows
  /// agree. Any draw stays an exact sample of its row either way.
  bool coupled = false;

  /// The smallest temperature other than 0: the least float whose reciprocal is finite
  /// (about 2.94e-39; warping multiplies logits by 1 / temperature). Any temperature this
  /// small already samples the argmax, so a caller wanting that should pass 0.
  static constexpr float min_temperature = 0x1.000008p-128f;

  bool greedy() const noexcept { return temperature == 0.0f; }

  /// Throws std::invalid_argument naming the first bad field and its bound.
  void validate() const {
    if (!(std::isfinite(temperature) && temperature >= 0.0f))
      throw std::invalid_argument("sampling_params.temperature: must be finite and >= 0, got " +
                                  std::to_string(temperature));
    if (temperature != 0.0f && temperature < min_temperature) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%.9g", static_cast<double>(temperature));
      throw std::invalid_argument(
          std::string("sampling_params.temperature: must be 0 (greedy) or >= min_temperature ") +
          "(about 2.94e-39, where 1 / temperature stays finite), got " + shown);
    }
    if (!(top_p > 0.0f && top_p <= 1.0f))
      throw std::invalid_argument("sampling_params.top_p: must be in (0, 1], got " +
                                  std::to_string(top_p));
    if (!(min_p >= 0.0f && min_p < 1.0f))
      throw std::invalid_argument("sampling_params.min_p: must be in [0, 1), got " +
                                  std::to_string(min_p));
  }
};

}  // namespace specdec
