// specdec/decode/abandon.hpp - the roll-back of a step that failed between its draft and its
// commit: the model goes back to the history minus its last token, and the sequence expects a
// new draft.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/decode/sequence_state.hpp"

namespace specdec {

/**
 * After a step of s failed once drafted (its scoring, its verification or its tree commit
 * threw), or when an engine drops a drafted step: puts `model` back at the history minus its
 * last token, as before the step (a pending tree is committed empty first), and s expects
 * draft_phase again. Nothing to undo, and nothing done, when s expects draft_phase already.
 */
template <LanguageModel Model>
void abandon_step(sequence_state& s, Model& model) {
  if (s.expects == step_phase::draft) return;
  const std::size_t before = s.history_before - 1;
  if constexpr (TreeLanguageModel<Model>) {
    if (s.tree_step && static_cast<std::size_t>(model.size()) == before)
      model.commit(std::span<const std::int32_t>());  // drop the pending tree
  }
  if (static_cast<std::size_t>(model.size()) > before) model.truncate(before);
  s.expects = step_phase::draft;
}

}  // namespace specdec
