// specdec/verify/coupled.hpp - verification of coupled sampling: the target draws each position
// as plain decoding in that mode does (the exponential race under noise keyed by seed, position
// and token, math/coupled.hpp), and a draft is kept while it equals that draw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/math/coupled.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/result.hpp"
#include "specdec/verify/row_hook.hpp"

namespace specdec {

/**
 * Coupled verification of a chain. `target` has drafts.size() + 1 rows (row i after the
 * context and drafts[0..i)); row i's token is at `position` + i of the sequence. Each row's
 * token is coupled_sample(row, sp, coupled_key(sp.seed, position + i)), exactly what plain
 * decoding in coupled mode draws there; drafts are kept while they equal it, and the first
 * draw that differs (or the draw after the last draft) is `next`. So the emitted tokens are plain
 * decoding's, token for token, whatever was drafted, and distributed as sampling the warped
 * target (each draw is exact, under noise independent across positions). No q is read: a draft
 * drawn with the same noise from a close distribution is kept about as often as rejection
 * sampling keeps one. Greedy: verify_greedy's verdict. Reads rows 0..accepted, calling
 * `on_read(i)` first (row_hook.hpp). Throws std::invalid_argument for mismatched shapes or a
 * draft outside [0, V), std::domain_error for NaN or +inf in a row read. O(V) per row read.
 */
template <class RowHook = no_row_hook>
verify_result verify_coupled(logits_view target, std::span<const token_id> drafts,
                             const sampling_params& sp, std::size_t position,
                             coupled_workspace& ws, RowHook&& on_read = {}) {
  const std::size_t n = drafts.size();
  const auto v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n + 1)
    throw std::invalid_argument("verify_coupled: target must have drafts.size() + 1 = " +
                                std::to_string(n + 1) + " rows, has " +
                                std::to_string(target.rows()));
  for (std::size_t i = 0; i < n; ++i)
    if (drafts[i] < 0 || static_cast<std::size_t>(drafts[i]) >= v)
      throw std::invalid_argument("verify_coupled: drafts[" + std::to_string(i) + "] = " +
                                  std::to_string(drafts[i]) + " is outside the vocabulary [0, " +
                                  std::to_string(v) + ")");
  ws.reserve(v);
  for (std::size_t i = 0;; ++i) {
    on_read(i);
    const std::span<const float> row(target.row(static_cast<Eigen::Index>(i)).data(), v);
    const token_id y = coupled_sample(row, sp, coupled_key(sp.seed, position + i), ws);
    if (i == n || drafts[i] != y) return {i, y};
  }
}

/**
 * Coupled verification of a token tree (rows as verify_tree's; the root's row draws the token
 * at `position`, a node at depth d the token at position + d): from the root, the node's row is
 * drawn as plain decoding in coupled mode draws it, and the walk moves to the first child with
 * that token, or stops and emits it. Candidates' draws and q are not read. Same guarantees and
 * errors as verify_coupled; reads the rows of the path and its stop node, calling `on_read`
 * first.
 */
template <class RowHook = no_row_hook>
void verify_tree_coupled(const token_tree& tree, logits_view target, const sampling_params& sp,
                         std::size_t position, coupled_workspace& ws, tree_verify_result& out,
                         RowHook&& on_read = {}) {
  const std::size_t n = tree.size();
  const auto v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n)
    throw std::invalid_argument("verify_tree_coupled: target must have tree.size() = " +
                                std::to_string(n) + " rows, has " +
                                std::to_string(target.rows()));
  ws.reserve(v);
  out.accepted.clear();
  out.accepted.reserve(tree.max_depth());
  std::size_t node = 0;
  for (std::size_t depth = 0;; ++depth) {
    on_read(node);
    const std::span<const float> row(target.row(static_cast<Eigen::Index>(node)).data(), v);
    const token_id y = coupled_sample(row, sp, coupled_key(sp.seed, position + depth), ws);
    std::int32_t next = -1;
    for (const std::int32_t child : tree.children(node))
      if (tree.token(static_cast<std::size_t>(child)) == y) {
        next = child;
        break;
      }
    if (next < 0) {
      out.next = y;
      return;
    }
    out.accepted.push_back(next);
    node = static_cast<std::size_t>(next);
  }
}

}  // namespace specdec
