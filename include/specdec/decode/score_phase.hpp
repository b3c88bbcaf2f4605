// specdec/decode/score_phase.hpp - phase 2 of a step on one model: the target scores the rows the
// draft phase laid out in one call (append for a chain; append_tree, or the path-by-path
// fallback, for a tree). The batch decoder replaces this phase with one call for all sequences.
#pragma once

#include <span>

#include "specdec/concepts/language_model.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/tree_fallback.hpp"

namespace specdec {

/// Writes s's rows with `model`. s must expect the verify phase (std::logic_error otherwise,
/// nothing done). The model contract: a throwing call changes nothing, and the exception
/// propagates with s back at the start of the step, expecting draft_phase (the drafter
/// re-synchronises).
template <LanguageModel Model>
void score_phase(sequence_state& s, Model& model) {
  s.require_phase(step_phase::verify, "score_phase");
  const auto t0 = detail::decode_clock::now();
  try {
    if (s.tree_step) {
      evaluate_tree(model, s.tree.tree, s.score_logits(), s.tree_eval_ws);
    } else {
      model.append(std::span<const token_id>(s.feed), s.score_logits());
    }
  } catch (...) {
    s.expects = step_phase::draft;
    throw;
  }
  s.target_seconds = detail::seconds_between(t0, detail::decode_clock::now());
}

}  // namespace specdec
