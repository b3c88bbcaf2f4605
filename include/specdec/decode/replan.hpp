// specdec/decode/replan.hpp - re-planning (generate_options::policy): replaces the shape in force
// (draft_length, or a tree) with the best plan for the acceptance a sequence has measured; with
// policy.explore, the speed policy: optimistic about what was not measured (or not lately), so
// it explores deeper shapes and plain decoding is probed again, and forgetting old evidence.
#pragma once

#include <algorithm>
#include <cstddef>

#include "specdec/decode/sequence_state.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/tree_plan.hpp"

namespace specdec::detail {

/// Halves every rank count of `m` (rounding down, so accepted <= offered still holds): the
/// speed policy's forgetting, once per policy.half_life steps.
inline void halve_rank_counts(decode_stats& m) noexcept {
  for (auto& row : m.offered_at_rank)
    for (auto& c : row) c /= 2;
  for (auto& row : m.accepted_at_rank)
    for (auto& c : row) c /= 2;
}

/**
 * Replaces s.options' shape with plan_chain's or plan_tree's choice for s.measured. Without
 * policy.explore it keeps the shape while too few steps were measured and plans only measured
 * cells; with it, it first counts the steps since the last plan toward policy.half_life
 * (halving the counts once per half-life) and plans from acceptance_profile::optimistic. Either
 * way a drafting plan must be predicted policy.min_gain faster than plain decoding.
 * Reads only committed steps' counts, never the step about to be drafted. Plans trees only
 * where replan_may_tree(s.options, s.can_tree) says the pipeline can run them and the model
 * scores a tree in one call (s.trees_in_one_call), of at most the model's max_tree_size() nodes. O(plan_tree's search) for trees, O(max_depth) for chains.
 */
inline void replan(sequence_state& s) {
  constexpr std::size_t max_width = 8;  // children per tree node a plan may give (plan_tree's)
  const auto& r = s.options.policy;
  // A tree is planned only where one call scores it: elsewhere it costs an append per leaf and
  // another to commit, which the cost model (one call a step) does not see.
  const bool chains = !replan_may_tree(s.options, s.can_tree) || !s.trees_in_one_call;
  acceptance_profile profile;
  if (r.explore) {
    if (s.stats.steps > 0) s.measured_calls += r.every;  // a due plan: `every` steps on
    while (r.half_life > 0 && s.measured_calls >= r.half_life) {
      halve_rank_counts(s.measured);
      s.measured_calls -= r.half_life;
    }
    profile = acceptance_profile::optimistic(s.measured, r.optimism, r.max_depth,
                                             chains ? 1 : std::min(r.max_nodes, max_width),
                                             r.expected, r.expected_samples);
  } else {
    profile = acceptance_profile::from_stats(s.measured, r.min_samples);
    if (profile.rate.empty()) return;  // too few steps measured yet: keep the shape in force
  }
  s.plan = chains ? plan_chain(profile, r.cost, std::min(r.max_nodes, r.max_depth), r.min_gain)
                  : plan_tree(profile, r.cost,
                              std::min(r.max_nodes, s.tree_rows > 0 ? s.tree_rows - 1 : 0),
                              r.max_depth, max_width, r.min_gain);
  const bool chain = std::all_of(s.plan.branching.begin(), s.plan.branching.end(),
                                 [](std::size_t k) { return k == 1; });
  if (chain) {
    s.options.tree.clear();
    s.options.draft_length = s.plan.branching.size();
  } else {
    s.options.tree = s.plan.branching;
  }
}

/// True when a step of s is due to re-plan first: every `policy.every` steps, and with
/// policy.explore also the first step of a generation (so that its first shape is planned too).
inline bool replan_due(const sequence_state& s) noexcept {
  const auto& r = s.options.policy;
  if (r.every == 0) return false;
  if (s.stats.steps == 0) return r.explore;
  return s.stats.steps % r.every == 0;
}

}  // namespace specdec::detail
