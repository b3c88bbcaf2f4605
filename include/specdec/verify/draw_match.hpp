// specdec/verify/draw_match.hpp - draw-and-match: each row the verifier reads gives a token by
// a rule of the caller's, and drafts are kept while they equal it. The one walk of greedy
// verification (the argmax), coupled verification (the position-keyed race) and sample-and-match
// (the generator's sample), over a chain and down a token tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/result.hpp"

namespace specdec::detail {

/// Row i's token is draw(i, row); drafts are kept while they equal it, and the first draw that
/// differs (or the draw after the last draft) is `next`. Calls on_read(i) before row i is read.
/// The caller checks the shapes: `target` has drafts.size() + 1 rows.
template <class Draw, class RowHook>
verify_result match_draws(logits_view target, std::span<const token_id> drafts, Draw&& draw,
                          RowHook&& on_read) {
  const auto v = static_cast<std::size_t>(target.cols());
  for (std::size_t i = 0;; ++i) {
    on_read(i);
    const std::span<const float> row(target.row(static_cast<Eigen::Index>(i)).data(), v);
    const token_id y = draw(i, row);
    if (i == drafts.size() || drafts[i] != y) return {i, y};
  }
}

/// The same walk down a token tree: at a node of depth d, y = draw(d, row); the walk moves to
/// the first child with token y, or stops and emits y. The caller checks that `target` has
/// tree.size() rows.
template <class Draw, class RowHook>
void match_tree_draws(const token_tree& tree, logits_view target, Draw&& draw,
                      tree_verify_result& out, RowHook&& on_read) {
  const auto v = static_cast<std::size_t>(target.cols());
  out.accepted.clear();
  out.accepted.reserve(tree.max_depth());
  std::size_t node = 0;
  for (std::size_t depth = 0;; ++depth) {
    on_read(node);
    const token_id y =
        draw(depth, std::span<const float>(target.row(static_cast<Eigen::Index>(node)).data(), v));
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

}  // namespace specdec::detail
