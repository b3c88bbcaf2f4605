// specdec/detail/confidence_tree.hpp - the nodes a heads drafter grows level by level, each
// with the confidence of its path: cut to the most confident ones (EAGLE-2's re-ranking) and
// flattened into a tree_draft. eagle_drafter's tree store.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "specdec/tree/tree_draft.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

/**
 * A drafted tree as a list of nodes in breadth-first order (node 0 the root, every parent
 * before its children), each with its path's confidence and the row of a q matrix holding its
 * children's distribution. Keeps its storage across calls: nothing is allocated once a tree of
 * this size was seen. Not thread-safe.
 */
class confidence_tree {
 public:
  struct node {
    token_id token;
    std::int32_t parent;
    std::size_t depth;
    double score;        // product of draft probabilities along the path
    Eigen::Index q_row;  // row of the q matrix with its children's distribution (when it has any)
  };
  std::vector<node> nodes;

  /// The root alone.
  void reset(token_id root) { nodes.assign(1, {root, -1, 0, 1.0, 0}); }

  /// Keeps the root and the `budget` most confident other nodes (ties: shallower, then
  /// earlier); a child is never more confident than its parent, so the set is closed under
  /// ancestors and the order stays breadth first. O(n log n).
  void prune(std::size_t budget) {
    order_.resize(nodes.size() - 1);
    std::iota(order_.begin(), order_.end(), std::size_t{1});
    std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      if (nodes[a].score != nodes[b].score) return nodes[a].score > nodes[b].score;
      if (nodes[a].depth != nodes[b].depth) return nodes[a].depth < nodes[b].depth;
      return a < b;  // stable without std::stable_sort's buffer
    });
    keep_.assign(nodes.size(), false);
    keep_[0] = true;
    for (std::size_t i = 0; i < budget && i < order_.size(); ++i) keep_[order_[i]] = true;
    index_.assign(nodes.size(), -1);
    kept_.clear();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!keep_[i]) continue;
      node n = nodes[i];
      if (n.parent >= 0) {
        n.parent = index_[static_cast<std::size_t>(n.parent)];
        if (n.parent < 0) continue;  // (cannot happen: ancestors are kept first)
      }
      index_[i] = static_cast<std::int32_t>(kept_.size());
      kept_.push_back(n);
    }
    nodes.swap(kept_);
  }

  /// out.tree <- the nodes; with `sampled`, out.q <- for each node with children its row of
  /// `q_rows` (zero for leaves; `v` columns). In place: the tree keeps its storage.
  void write(tree_draft& out, const row_matrix& q_rows, bool sampled, std::size_t v) {
    tokens_.clear();
    parents_.clear();
    for (const node& n : nodes) {
      tokens_.push_back(n.token);
      parents_.push_back(n.parent);
    }
    out.tree.assign(tokens_, parents_);
    if (!sampled) return;
    out.q.setZero(static_cast<Eigen::Index>(nodes.size()), static_cast<Eigen::Index>(v));
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (!out.tree.is_leaf(i))
        out.q.row(static_cast<Eigen::Index>(i)) = q_rows.row(nodes[i].q_row);
  }

 private:
  std::vector<node> kept_;
  std::vector<std::size_t> order_;
  std::vector<bool> keep_;
  std::vector<std::int32_t> index_, parents_;
  std::vector<token_id> tokens_;
};

}  // namespace specdec::detail
