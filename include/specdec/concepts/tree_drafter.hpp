// specdec/concepts/tree_drafter.hpp - a drafter that proposes token trees (multi-candidate).
#pragma once

#include <cstddef>
#include <span>

#include "specdec/concepts/drafter.hpp"
#include "specdec/tree/tree_draft.hpp"

namespace specdec {

/**
 * A Drafter that can also propose a token tree: several candidates per position.
 *
 * @code
 *   D& d; std::span<const token_id> history; std::span<const std::size_t> branching;
 *   const sampling_params& sp; rng& g; candidate_draw draw; tree_draft& out;
 *   d.propose_tree(history, branching, sp, g, draw, out)
 * @endcode
 *
 * - `branching` = k1 x k2 x ... x kd: up to k1 children of the root, k2 of each of those, ...
 *   A drafter may propose fewer nodes, never more: no node at depth j (the root: 0) has more
 *   than branching[j] children and no node is deeper than d, so the tree has at most the full
 *   shape's nodes (the decoder sizes a step, near a full context too, by that count).
 * - The root of `out.tree` is history.back(). `out.draw` must say truthfully how candidates were
 *   drawn: `draw` is a request (iid or without_replacement) that a sampling drafter honours;
 *   deterministic drafters (n-gram tries, greedy top-k) answer candidate_draw::deterministic.
 * - `out.q`: no rows when deterministic; otherwise tree.size() rows of vocab_size
 *   probabilities, row i the distribution node i's children were drawn from (so each child's
 *   token has q > 0 there; leaves' rows are not read), and children drawn without replacement
 *   are distinct.
 * - The decoder checks all of the above before the target is called and refuses a draft that
 *   breaks it with std::invalid_argument (decode/draft_phase.hpp, check_tree_draft).
 * - `accept` and `reset` are as for Drafter.
 */
template <class D>
concept TreeDrafter =
    Drafter<D> && requires(D& d, std::span<const token_id> history,
                           std::span<const std::size_t> branching, const sampling_params& sp,
                           rng& g, candidate_draw draw, tree_draft& out) {
      d.propose_tree(history, branching, sp, g, draw, out);
    };

}  // namespace specdec
