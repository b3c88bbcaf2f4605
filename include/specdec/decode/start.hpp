// specdec/decode/start.hpp - the start of a generation: validate the prompt and options, reset
// the sequence's generator, statistics and drafter, keep the prefix the model already holds and
// feed it the rest of the prompt (all but its last token).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/replan.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

/**
 * Starts a generation of `prompt` on `model` (the sequence's context). Throws
 * std::invalid_argument naming the bad argument before anything changes (s is then done and the
 * model untouched); if the model's append throws, its context is emptied, s is done and the
 * exception propagates.
 */
template <class Model, class Draft>
void start_sequence(sequence_state& s, Model& model, Draft& drafter,
                    std::span<const token_id> prompt, const generate_options& options,
                    bool can_tree) {
  s.vocab = static_cast<std::size_t>(model.vocab_size());
  s.capacity = max_size_of(model);
  validate_options(prompt, options, s.vocab, s.capacity, can_tree);
  const auto t0 = decode_clock::now();
  // The model holds history minus its last token while the invariant stands.
  std::size_t keep = 0;
  if (options.reuse_prefix && !s.history.empty() &&
      static_cast<std::size_t>(model.size()) + 1 == s.history.size()) {
    const std::size_t limit = std::min(s.history.size() - 1, prompt.size() - 1);
    while (keep < limit && s.history[keep] == prompt[keep]) ++keep;
  }
  std::vector<token_id> fresh(prompt.begin(), prompt.end());  // `prompt` may view history
  s.options = options;
  s.gen.reseed(options.sampling.seed);
  s.stats = decode_stats{};
  s.plan = tree_plan{};
  if (s.options.replan.every > 0 && !s.measured.offered_at_rank.empty()) replan(s, can_tree);
  s.done = true;
  s.history.swap(fresh);
  s.prompt_size = s.history.size();
  drafter.reset();
  if constexpr (requires { drafter.model_calls(); }) s.draft_calls_at_start = drafter.model_calls();
  model.truncate(keep);
  if (s.history.size() - 1 > keep) {
    const std::span<const token_id> rest(s.history.data() + keep, s.history.size() - 1 - keep);
    s.logits.resize(rest.size() * s.vocab);
    try {
      model.append(rest, std::span<float>(s.logits));
    } catch (...) {
      model.truncate(0);
      s.history.clear();
      throw;
    }
  }
  s.stats.reused_prompt_tokens = keep;
  s.done = false;
  s.reason = stop_reason::max_new_tokens;
  s.update_done();
  s.stats.prefill_seconds = seconds_between(t0, decode_clock::now());
  s.stats.total_seconds = s.stats.prefill_seconds;
}

}  // namespace specdec::detail
