// specdec/tree/tree_draft.hpp - a drafted token tree and how its candidates were drawn.
#pragma once

#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// How the children of each tree node were proposed. The verifier is lossless only if this
/// tells the truth.
enum class candidate_draw {
  /// Algorithm 1: the k children of a node were drawn i.i.d. (with replacement) from the q row
  /// of that node. Duplicates are allowed.
  iid,
  /// Algorithm 2: the children were drawn one after another from q without replacement (q
  /// renormalised after removing each drawn token). Duplicates are invalid.
  without_replacement,
  /// No q: each child is its own one-hot proposal (n-gram tries, greedy or top-k drafts).
  deterministic,
};
/**
 * What a tree drafter proposes: a token tree whose root (node 0) is the last token of the
 * history, the q rows its candidates were drawn from (row i: the distribution of node i's
 * children; leaves' rows unused; no rows when deterministic) and how they were drawn.
 */
struct tree_draft {
  token_tree tree;
  row_matrix q;
  candidate_draw draw = candidate_draw::deterministic;

  /// Nodes besides the root.
  std::size_t drafted_nodes() const noexcept { return tree.size() - 1; }
};

}  // namespace specdec
