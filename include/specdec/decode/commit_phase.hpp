// specdec/decode/commit_phase.hpp - phase 4 of a step: keep what was accepted. The model's
// context keeps the accepted path (a truncate for a chain, a commit for a tree), the accepted
// drafts and the target's token are emitted up to a stop condition (stop token, max_new_tokens,
// full context, the callback), the context is rolled back to the history minus its last token,
// the drafter is told, and the statistics count the step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/decode/abandon.hpp"
#include "specdec/decode/adapter_checks.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/tree_fallback.hpp"
#include "specdec/types.hpp"

namespace specdec {

namespace detail {

/// Adds a committed step of s (`accepted` drafts kept) to s.stats; t0: when the commit began.
template <class Draft>
void count_step(sequence_state& s, Draft& drafter, std::size_t accepted,
                decode_clock::time_point t0) {
  decode_stats& st = s.stats;
  st.target_calls += s.calls;
  st.steps += 1;
  st.draft_calls += s.positions > 0;
  st.drafted_tokens += s.positions;
  st.drafted_nodes += s.nodes;
  st.accepted_tokens += accepted;
  if (st.drafted_at.size() < s.positions) {
    st.drafted_at.resize(s.positions);
    st.accepted_at.resize(s.positions);
  }
  for (std::size_t i = 0; i < s.positions; ++i) st.drafted_at[i] += 1;
  for (std::size_t i = 0; i < accepted; ++i) st.accepted_at[i] += 1;
  st.generated_tokens = s.generated();
  if constexpr (requires { drafter.model_calls(); })
    st.draft_model_calls = drafter.model_calls() - s.draft_calls_at_start;
  st.draft_seconds += s.draft_seconds;
  st.target_seconds += s.target_seconds;
  st.verify_seconds += s.verify_seconds;
  st.total_seconds += s.draft_seconds + s.target_seconds + s.verify_seconds +
                      seconds_between(t0, decode_clock::now());
}

}  // namespace detail

/**
 * Commits s's verdict to `model` and emits the tokens (see the header comment). Returns what the
 * step emitted. If the callback throws, the model is rolled back to the tokens emitted so far,
 * the run ends (stop_reason::callback), the step is counted in the statistics and the exception
 * propagates. If the drafter's accept throws, the step is committed and counted and the
 * exception propagates. s must expect commit_phase (after a verify_phase that succeeded), else
 * std::logic_error and nothing changes; afterwards it expects draft_phase (if not done). Two
 * adapter faults are caught here, each a std::logic_error: a chain step whose target does not
 * hold the step's feed (verified without being scored; the step is abandoned, nothing emitted),
 * and a truncate() that leaves size() above the history (the sequence ends, done).
 */
template <LanguageModel Model, class Draft>
step_result commit_phase(sequence_state& s, Model& model, Draft& drafter) {
  s.require_phase(step_phase::commit, "commit_phase");
  const auto t0 = detail::decode_clock::now();
  const std::size_t h = s.history_before;
  if (!s.tree_step) {
    // The rows verified were the target's only if it holds the step's feed: a scoring call
    // forgotten (or an engine's own call that wrote no cache) shows here, before anything is
    // emitted.
    const std::size_t want = h - 1 + s.feed.size();
    if (static_cast<std::size_t>(model.size()) != want) {
      const std::size_t held = static_cast<std::size_t>(model.size());
      abandon_step(s, model);
      throw std::logic_error("commit_phase: the target holds " + std::to_string(held) +
                             " tokens, not the " + std::to_string(want) +
                             " of the history and this step's drafts: the step was verified "
                             "without being scored (call score_phase, or the engine's own "
                             "append, between draft_phase and verify_phase)");
    }
  }
  if (s.tree_step) {
    try {
      commit_tree_path(model, s.tree.tree, s.path, s.tree_eval_ws);
      if constexpr (!TreeLanguageModel<Model>) s.calls += s.path.size() > 0;  // the commit's append
    } catch (...) {
      abandon_step(s, model);
      throw;
    }
    // By depth and rank: the children of each node on the accepted path were offered.
    const token_tree& tree = s.tree.tree;
    const auto& kept_nodes = s.tree_verdict.accepted;
    std::size_t parent = 0;
    for (std::size_t d = 0; !tree.is_leaf(parent); ++d) {
      const auto kids = tree.children(parent);
      const bool kept = d < kept_nodes.size();
      const auto node = kept ? static_cast<std::size_t>(kept_nodes[d]) : 0;
      s.count_rank(d, kept ? node - static_cast<std::size_t>(kids.first) : 0, kids.size(), kept);
      if (!kept) break;
      parent = node;
    }
  } else {
    // The context holds the history and every draft: the commit is the truncate below. By
    // depth: position d was judged when every draft before it was kept.
    for (std::size_t d = 0; d < s.positions && d <= s.accepted.size(); ++d)
      s.count_rank(d, 0, 1, d < s.accepted.size());
  }
  const std::size_t accepted = s.accepted.size();
  try {
    for (std::size_t i = 0; i <= accepted && !s.done; ++i) {
      const token_id t = i < accepted ? s.accepted[i] : s.next;
      s.history.push_back(t);
      s.update_done(t);
      if (s.options.on_token && !s.options.on_token(t) && !s.done) {
        s.done = true;
        s.reason = stop_reason::callback;
      }
    }
  } catch (...) {
    model.truncate(s.history.size() - 1);
    s.expects = step_phase::draft;
    s.done = true;
    s.reason = stop_reason::callback;
    detail::count_step(s, drafter, accepted, t0);
    throw;
  }
  s.expects = step_phase::draft;
  try {
    detail::truncate_checked(model, s.history.size() - 1, "commit_phase", "target");
  } catch (const std::logic_error&) {
    s.done = true;  // a model that keeps what it was told to drop: nothing further is right
    s.reason = stop_reason::callback;
    detail::count_step(s, drafter, accepted, t0);
    throw;
  }
  const std::span<const token_id> emitted(s.history.data() + h, s.history.size() - h);

  detail::count_step(s, drafter, accepted, t0);
  // Last: if the drafter throws, the step is committed and counted all the same (a drafter
  // re-synchronises from the history on its next propose).
  drafter.accept(emitted);
  return {emitted, s.positions, accepted, s.done};
}

}  // namespace specdec
