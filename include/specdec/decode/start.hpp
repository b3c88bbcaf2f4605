// specdec/decode/start.hpp - the start of a generation: validate the prompt and options, reset
// the sequence's generator, statistics and drafter, keep the prefix the model already holds (when
// asked to and it can be trusted) and feed it the rest of the prompt (all but its last token).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/abandon.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/replan.hpp"
#include "specdec/decode/adapter_checks.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/types.hpp"

namespace specdec {

namespace detail {

/// The tokens `model` says its context holds (the optional member tokens(), see
/// generate_options::reuse_prefix), or nothing when it cannot say: no such member, or one whose
/// length is not size().
template <class Model>
std::span<const token_id> readback_of(const Model& model) {
  if constexpr (requires {
                  { model.tokens() } -> std::convertible_to<std::span<const token_id>>;
                }) {
    const std::span<const token_id> held = model.tokens();
    if (held.size() == static_cast<std::size_t>(model.size())) return held;
  }
  return {};
}

/// How much of the target's context a generation of `prompt` keeps (generate_options::
/// reuse_prefix): with a readback, the longest prefix the context and the prompt share; without
/// one, the prefix the prompt shares with s's history while the model's size says it still
/// holds that history minus its last token. Always short of the prompt's last token.
template <class Model>
std::size_t reusable_prefix(const sequence_state& s, const Model& model,
                            std::span<const token_id> prompt) {
  std::size_t keep = 0;
  if constexpr (requires {
                  { model.tokens() } -> std::convertible_to<std::span<const token_id>>;
                }) {
    const std::span<const token_id> held = readback_of(model);
    const std::size_t limit = std::min(held.size(), prompt.size() - 1);
    while (keep < limit && held[keep] == prompt[keep]) ++keep;
  } else {
    if (s.history.empty() || static_cast<std::size_t>(model.size()) + 1 != s.history.size())
      return 0;
    const std::size_t limit = std::min(s.history.size() - 1, prompt.size() - 1);
    while (keep < limit && s.history[keep] == prompt[keep]) ++keep;
  }
  return keep;
}

}  // namespace detail

/**
 * Starts a generation of `prompt` on `model` (the sequence's context). Validates `prompt` and
 * `options` first: on std::invalid_argument naming the bad argument (or anything the drafter's
 * reset() throws) a generation in progress ends where it stands (s.done, stop_reason::callback;
 * its history, statistics and the model's context are kept, consistent with each other) and
 * nothing else changes. If the model's truncate, prefill or append throws, its context is
 * emptied, s is done with an empty history and the exception propagates.
 *
 * The prompt goes to the model through specdec::prefill: no row of it is read, so a model with
 * prefill() computes none, and any other model is fed in appends of prefill_chunk_tokens(V)
 * tokens into a scratch freed on return. Nothing proportional to the prompt stays allocated
 * (s.logits is sized by the steps, not by the prompt).
 *
 * `can_tree`: whether the pipeline can run a tree step (a TreeDrafter and a model that scores
 * trees; trees_possible). A step in flight (verified, or whose verification threw) is abandoned
 * first; a step only drafted needs nothing undone (its rows, if the engine scored them, are
 * dropped with the rest of the context past the kept prefix).
 */
template <class Model, class Draft>
void start_sequence(sequence_state& s, Model& model, Draft& drafter,
                    std::span<const token_id> prompt, const generate_options& options,
                    bool can_tree = TreeDrafter<Draft>) {
  const auto vocab = static_cast<std::size_t>(model.vocab_size());
  const std::size_t capacity = max_size_of(model);
  auto end_in_progress = [&s] {  // history and context stay as they are, consistent
    if (!s.done) {
      s.done = true;
      s.reason = stop_reason::callback;
    }
  };
  try {
    validate_options(prompt, options, vocab, capacity, can_tree);
    drafter.reset();
  } catch (...) {
    end_in_progress();
    throw;
  }
  if (s.expects == step_phase::commit || s.expects == step_phase::abandon) abandon_step(s, model);
  s.expects = step_phase::draft;
  end_in_progress();  // from here on, an exception leaves s done
  const auto t0 = detail::decode_clock::now();
  const std::size_t keep = options.reuse_prefix ? detail::reusable_prefix(s, model, prompt) : 0;
  std::vector<token_id> fresh(prompt.begin(), prompt.end());  // `prompt` may view history
  s.vocab = vocab;
  s.capacity = capacity;
  s.can_tree = can_tree;
  s.trees_in_one_call = TreeLanguageModel<Model>;
  s.tree_rows = max_tree_size_of(model);
  s.tree_leaves = max_tree_leaves_of(model);
  s.options = options;
  s.draft_sampling = options.sampling;
  if (options.draft_temperature && !options.sampling.greedy())
    s.draft_sampling.temperature = *options.draft_temperature;
  s.draft_sampling.coupled = options.verification == verification_rule::coupled;
  if (options.verification == verification_rule::sample_match && !options.draft_temperature)
    s.draft_sampling.temperature = 0.0f;  // llama.cpp's rule: greedy drafts
  s.gen.reseed(options.sampling.seed);
  s.stats = decode_stats{};
  s.plan = tree_plan{};
  if (s.options.policy.every > 0 && !s.measured.offered_at_rank.empty()) detail::replan(s);
  s.history.swap(fresh);
  s.prompt_size = s.history.size();
  if constexpr (requires { drafter.model_calls(); }) s.draft_calls_at_start = drafter.model_calls();
  try {
    detail::truncate_checked(model, keep, "start", "target");
    if (s.history.size() - 1 > keep) {
      const std::span<const token_id> rest(s.history.data() + keep, s.history.size() - 1 - keep);
      specdec::prefill(model, rest);  // no row is read: the model's prefill(), else bounded appends
    }
    detail::check_model_size(model, s.history.size() - 1, "start", "target", "the prompt's prefill");
  } catch (...) {
    s.history.clear();  // nothing to reuse: the context no longer matches any history
    try {
      model.truncate(0);
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
  s.stats.reused_prompt_tokens = keep;
  s.done = false;
  s.reason = stop_reason::max_new_tokens;
  s.update_done();
  s.stats.prefill_seconds = detail::seconds_between(t0, detail::decode_clock::now());
  s.stats.total_seconds = s.stats.prefill_seconds;
}

}  // namespace specdec
