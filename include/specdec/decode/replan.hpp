// specdec/decode/replan.hpp - re-planning (generate_options::replan): replaces the shape in force
// (draft_length, or a tree) with the best plan for the acceptance a sequence has measured.
#pragma once

#include <algorithm>
#include <cstddef>

#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/tree_plan.hpp"

namespace specdec::detail {

/// Replaces s.options' shape with plan_chain's or plan_tree's choice for s.measured. Keeps the
/// shape while too few steps were measured. `can_tree`: the drafter drafts trees.
inline void replan(sequence_state& s, bool can_tree) {
  const auto& r = s.options.replan;
  const auto profile = acceptance_profile::from_stats(s.measured, r.min_samples);
  if (profile.rate.empty()) return;  // too few steps measured yet: keep the shape in force
  const bool chains =
      r.chains_only || s.options.verification == chain_verification::block || !can_tree;
  s.plan = chains ? plan_chain(profile, r.cost, std::min(r.max_nodes, r.max_depth))
                  : plan_tree(profile, r.cost, r.max_nodes, r.max_depth);
  const bool chain = std::all_of(s.plan.branching.begin(), s.plan.branching.end(),
                                 [](std::size_t k) { return k == 1; });
  if (chain) {
    s.options.tree.clear();
    s.options.draft_length = s.plan.branching.size();
  } else {
    s.options.tree = s.plan.branching;
  }
}

/// True when a step of s is due to re-plan first (every `replan.every` target calls).
inline bool replan_due(const sequence_state& s) noexcept {
  return s.options.replan.every > 0 && s.stats.target_calls > 0 &&
         s.stats.target_calls % s.options.replan.every == 0;
}

}  // namespace specdec::detail
