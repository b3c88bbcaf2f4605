// specdec/tree/tree_draft.hpp - a drafted token tree and how its candidates were drawn.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "specdec/math/coupled.hpp"
#include "specdec/math/prob_rows.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
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
 * The children of one tree node, drawn from its q row as `draw` says, into `out` (cleared
 * first): iid, `count` draws with sample() (duplicates possible); without_replacement, up to
 * `count` distinct tokens, each drawn with sample() from q with the earlier ones removed (fewer
 * when q has fewer than `count` positive entries). The rng is used once per child, so a drafter
 * calling this draws exactly what multi_candidate verification assumes. `scratch` holds the
 * shrinking row (without_replacement); nothing is allocated once it and `out` have capacity.
 * Throws std::invalid_argument for deterministic (there is nothing to draw). O(count x V).
 */
inline void draw_candidates(std::span<const float> q, std::size_t count, candidate_draw draw,
                            rng& gen, std::vector<token_id>& out, std::vector<float>& scratch) {
  out.clear();
  if (draw == candidate_draw::iid) {
    for (std::size_t c = 0; c < count; ++c) out.push_back(sample(q, gen));
    return;
  }
  if (draw != candidate_draw::without_replacement)
    throw std::invalid_argument("draw_candidates: draw must be iid or without_replacement");
  scratch.assign(q.begin(), q.end());
  const auto support = static_cast<std::size_t>(
      std::count_if(q.begin(), q.end(), [](float x) { return x > 0.0f; }));
  for (std::size_t c = 0; c < std::min(count, support); ++c) {
    const token_id t = sample(scratch, gen);
    out.push_back(t);
    scratch[static_cast<std::size_t>(t)] = 0.0f;
  }
}

/**
 * The children of a tree node whose tokens sit at `position` of the sequence, as a drafter draws
 * them: under sp.coupled, the first `count` tokens of the exponential race over q under
 * coupled_key(sp.seed, position) (coupled_top: distinct, the first being the target's own draw
 * there wherever its row agrees with q, so a wider node covers the target's token more often);
 * otherwise draw_candidates(q, count, draw, gen, out, scratch). Either is a valid `draw` of
 * `count` children from q (the race's first count are a draw without replacement).
 */
inline void draft_candidates(std::span<const float> q, std::size_t count, candidate_draw draw,
                             const sampling_params& sp, std::size_t position, rng& gen,
                             std::vector<token_id>& out, std::vector<float>& scratch,
                             coupled_workspace& ws) {
  if (sp.coupled)  // q is a warped row: it sums to 1
    return detail::top_normalised(q, coupled_key(sp.seed, position), count, out, ws);
  draw_candidates(q, count, draw, gen, out, scratch);
}

/**
 * What a tree drafter proposes: a token tree whose root (node 0) is the last token of the
 * history, the q rows its candidates were drawn from (row i: the distribution of node i's
 * children; leaves' rows unused; no rows when deterministic) and how they were drawn.
 * The decoder keeps one per sequence: a drafter that rebuilds `tree` in place (token_tree::assign,
 * reset) and resizes `q` (a prob_rows, whose storage only grows) allocates nothing once a tree of
 * that size was seen; assigning a new token_tree allocates every step.
 */
struct tree_draft {
  token_tree tree;
  prob_rows q;
  candidate_draw draw = candidate_draw::deterministic;

  /// Nodes besides the root.
  std::size_t drafted_nodes() const noexcept { return tree.size() - 1; }
};

}  // namespace specdec
