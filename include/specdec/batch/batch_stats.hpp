// specdec/batch/batch_stats.hpp - what a batch decoder's step did, and its counters over all
// steps (the per-sequence statistics are each sequence's decode_stats).
#pragma once

#include <cstddef>

#include "specdec/batch/k_policy.hpp"

namespace specdec {

/// One step of batch_decoder::step().
struct batch_step_result {
  std::size_t sequences = 0;  ///< sequences verified this step
  std::size_t emitted = 0;    ///< tokens emitted over all sequences
  std::size_t rows = 0;       ///< rows the model scored
  std::size_t calls = 0;      ///< score calls (1 unless max_batch_tokens() split the step, or a
                              ///< refused call was retried entry by entry)
  std::size_t failed = 0;     ///< sequences that failed this step
  k_choice k_cap;             ///< the K policy's cap (k = max when off)
};

/// Counters and time of every step of a batch decoder. Thread-compatible.
struct batch_stats {
  std::size_t steps = 0;
  std::size_t sequence_steps = 0;  ///< sum over steps of the sequences verified
  std::size_t target_calls = 0;
  std::size_t rows_scored = 0;
  std::size_t generated_tokens = 0;
  double draft_seconds = 0.0;   ///< every sequence's draft phase
  double target_seconds = 0.0;  ///< inside the model's score calls
  double verify_seconds = 0.0;  ///< inside the verifiers
  double total_seconds = 0.0;   ///< the steps, end to end (prompts excluded: add() feeds them)

  /// Seconds of the library's own work (everything but drafting, scoring and verifying: the K
  /// policy, building the batch, commits, callbacks, statistics) per sequence-step.
  double overhead_per_sequence_step() const noexcept {
    if (sequence_steps == 0) return 0.0;
    return (total_seconds - draft_seconds - target_seconds - verify_seconds) /
           static_cast<double>(sequence_steps);
  }
  /// Tokens per second over all sequences.
  double tokens_per_second() const noexcept {
    return total_seconds > 0.0 ? static_cast<double>(generated_tokens) / total_seconds : 0.0;
  }
};

}  // namespace specdec
