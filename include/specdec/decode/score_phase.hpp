// specdec/decode/score_phase.hpp - phase 2 of a step on one model: the target scores the rows the
// draft phase laid out in one call (append for a chain; append_tree, or the path-by-path
// fallback, for a tree). The batch decoder replaces this phase with one call for all sequences.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/concepts/language_model.hpp"
#include "specdec/decode/abandon.hpp"
#include "specdec/decode/adapter_checks.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/tree_fallback.hpp"

namespace specdec {

/// Writes s's rows with `model`. s must expect the verify phase (std::logic_error otherwise,
/// nothing done). The model contract: a throwing call changes nothing, and the exception
/// propagates with s back at the start of the step, expecting draft_phase (the drafter
/// re-synchronises). A chain's append must grow the model's size() by the tokens fed, else
/// std::logic_error naming what it reported, the step abandoned.
template <LanguageModel Model>
void score_phase(sequence_state& s, Model& model) {
  s.require_phase(step_phase::verify, "score_phase");
  const auto t0 = detail::decode_clock::now();
  try {
    if (s.tree_step) {
      s.calls = evaluate_tree(model, s.tree.tree, s.score_logits(), s.tree_eval_ws);
    } else {
      model.append(std::span<const token_id>(s.feed), s.score_logits());
    }
  } catch (...) {
    s.expects = step_phase::draft;
    throw;
  }
  if (!s.tree_step) {
    const std::size_t want = s.history_before - 1 + s.feed.size();
    if (static_cast<std::size_t>(model.size()) != want) {
      abandon_step(s, model);
      detail::check_model_size(model, want, "score_phase", "target",
                               "append of " + std::to_string(s.feed.size()) + " tokens");
    }
  }
  s.target_seconds = detail::seconds_between(t0, detail::decode_clock::now());
}

}  // namespace specdec
