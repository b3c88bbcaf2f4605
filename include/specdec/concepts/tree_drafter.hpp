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
 *   A drafter may propose fewer nodes (never more, never deeper).
 * - The root of `out.tree` is history.back(). `out.draw` must say truthfully how candidates were
 *   drawn: `draw` is a request (iid or without_replacement) that a sampling drafter honours;
 *   deterministic drafters (n-gram tries, greedy top-k) answer candidate_draw::deterministic.
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
