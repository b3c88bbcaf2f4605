// specdec/decoder.hpp - the single-sequence decoder (speculative_decoder) and plain decoding.
// The step itself lives in decode/, one file per phase: draft_phase, score_phase, verify_phase,
// commit_phase, run in order by decode/pipeline.hpp (shared with batch_decoder.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/pipeline.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * Speculative decoding of a Target with a Drafter: each step the drafter proposes up to K tokens,
 * the target scores [last token, drafts...] in one append, the verifier keeps a prefix and adds
 * one token of the target's own, and both caches are rolled back to what was kept.
 *
 * Guarantees: with temperature 0 the output equals greedy decoding of the target as the decoder
 * evaluates it (token for token); with temperature > 0 each token is distributed exactly as
 * sampling the warped target alone. Given the same seed, the same tokens come out.
 *
 * Cache invariant between calls: the target's context holds the prompt and every emitted token
 * except the last one (whose logits nobody needed yet). Stop tokens and max_new_tokens that fall
 * inside an accepted block cut it there and roll the caches back accordingly. Any exception
 * leaves the target's context consistent with history() and the decoder usable.
 *
 * Use generate() for a whole run, or start() then step() until done() to drive it from an
 * engine's own scheduler. The decoder holds references: the models and the drafter must outlive
 * it. Not thread-safe. (Target must model LanguageModel and Draft must model Drafter; otherwise
 * the class is one that only says, in a static_assert, what is missing.)
 */
template <class Target, class Draft = no_drafter>
class speculative_decoder {
  // Chosen only when Target or Draft does not model its concept: the static_asserts name what is
  // missing, and the members below do nothing, so that no further errors follow.
  static_assert(detail::check_language_model<Target>());
  static_assert(detail::check_drafter<Draft>());

 public:
  speculative_decoder(Target&, Draft&) {}
  generate_result generate(std::span<const token_id>, const generate_options&) { return {}; }
  void start(std::span<const token_id>, const generate_options&) {}
  step_result step() { return {}; }
  bool done() const noexcept { return true; }
  stop_reason reason() const noexcept { return {}; }
  std::span<const token_id> history() const noexcept { return {}; }
  const decode_stats& stats() const noexcept { return stats_; }
  void forget_measurements() noexcept {}

 private:
  decode_stats stats_;
};

template <class Target, class Draft>
  requires LanguageModel<Target> && Drafter<Draft> && detail::drafts_with_a_language_model<Draft>
class speculative_decoder<Target, Draft> {
 public:
  /// Throws std::invalid_argument, naming the drafter or its part (composed drafters are checked
  /// part by part), if one has a vocabulary that differs from the target's, drafts with the
  /// target's own context (they would overwrite each other's cache), or shares its draft model
  /// with another part. Touches neither model.
  speculative_decoder(Target& target, Draft& drafter) : pipe_(target, drafter) {
    detail::check_drafter_for(target, drafter);
  }

  /// Runs a whole generation: start(prompt, options) then step() until done().
  generate_result generate(std::span<const token_id> prompt, const generate_options& options) {
    start(prompt, options);
    while (!done()) step();
    return pipe_.state().result();
  }

  /**
   * Validates prompt and options, resets the statistics, the rng (options.sampling.seed) and the
   * drafter, and feeds the prompt (all but its last token) to the target, keeping the prefix
   * the target already holds when options.reuse_prefix allows it.
   * Throws std::invalid_argument naming the bad argument: empty prompt, a token outside the
   * vocabulary, a prompt longer than the target's max_size, bad options. The decoder is then
   * idle (done()): a generation in progress has ended where it stood (reason() is
   * stop_reason::callback; history(), stats() and the target's context are kept, consistent
   * with each other), and the models are untouched. The same holds when the drafter's reset()
   * throws. If the target's truncate or append throws, its context is emptied, the decoder is
   * idle with an empty history and the exception propagates.
   */
  void start(std::span<const token_id> prompt, const generate_options& options) {
    pipe_.start(prompt, options);
  }

  /// One draft -> target -> verify -> commit iteration (decode/pipeline.hpp); emits between 1
  /// and K + 1 tokens (for a tree, 1 to depth + 1). Throws std::logic_error if called when done().
  step_result step() {
    if (done()) throw std::logic_error("speculative_decoder::step: no generation in progress");
    return pipe_.step();
  }

  /// True when no generation is in progress or the current one has finished.
  bool done() const noexcept { return pipe_.state().done; }
  /// Why the last generation ended (meaningful once done()).
  stop_reason reason() const noexcept { return pipe_.state().reason; }
  /// Prompt + emitted tokens of the current generation.
  std::span<const token_id> history() const noexcept { return pipe_.state().history; }
  const decode_stats& stats() const noexcept { return pipe_.state().stats; }
  /// Drops the acceptance measured for re-planning (generate_options::policy): the next
  /// generation starts from the shape its options give.
  void forget_measurements() noexcept { pipe_.state().measured = decode_stats{}; }
  /// The last re-planned shape (generate_options::policy), empty before the first plan.
  const tree_plan& plan() const noexcept { return pipe_.state().plan; }
  Target& target() noexcept { return pipe_.model(); }
  Draft& drafter() noexcept { return pipe_.drafter(); }

 private:
  sequence_pipeline<Target, Draft> pipe_;
};

/// Plain autoregressive decoding with the same sampler: one target call per token.
template <LanguageModel Model>
generate_result generate_autoregressive(Model& model, std::span<const token_id> prompt,
                                        generate_options options) {
  no_drafter none;
  options.draft_length = 0;
  options.tree.clear();
  speculative_decoder<Model, no_drafter> decoder(model, none);
  return decoder.generate(prompt, options);
}

}  // namespace specdec
