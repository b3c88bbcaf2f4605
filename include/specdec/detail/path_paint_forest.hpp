// specdec/detail/path_paint_forest.hpp - a rooted forest whose root-to-node paths can be painted
// (a link-cut tree): the occurrence bookkeeping behind detail::suffix_automaton.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace specdec::detail {

/**
 * A rooted forest over node ids 0, 1, 2, ... in which every node carries (last, count), and
 * paint(x, v) sets last = v and adds 1 to count on every node of the path from x's root to x.
 *
 * The suffix automaton keeps its suffix-link tree here: a new position is an end position of its
 * state and of every ancestor, so painting the path of the state that ends at position i with i
 * keeps, per state, its latest end position (last) and its number of end positions (count). The
 * path is unbounded (a stream of one repeated token makes it as long as the stream), so a plain
 * walk would be quadratic; a link-cut tree (Sleator and Tarjan 1983, splay-based) paints it in
 * amortised O(log n) through lazy tags.
 *
 * Representation: each preferred path is a splay tree keyed by depth; `parent` of a splay root is
 * the path-parent pointer. A pending tag on a node applies to its splay subtree below it (its own
 * values are already current). 28 bytes per node. Not thread-safe, reads included (they splay).
 */
class path_paint_forest {
 public:
  static constexpr std::uint32_t nil = std::numeric_limits<std::uint32_t>::max();

  struct values {
    std::uint32_t last;   ///< latest painted value, or nil
    std::uint32_t count;  ///< number of paints
  };

  void clear() noexcept { nodes_.clear(); }
  void reserve(std::size_t n) { nodes_.reserve(n); }
  std::size_t size() const noexcept { return nodes_.size(); }

  /// Adds a node without a parent carrying `v`; returns its id. Amortised O(1).
  std::uint32_t add(values v) {
    nodes_.push_back(node{{nil, nil}, nil, v.last, v.count, nil, 0});
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }

  /// Makes `parent` the parent of `x`, which must have no parent (a fresh node or one just cut).
  void link(std::uint32_t x, std::uint32_t parent) noexcept { nodes_[x].parent = parent; }

  /// Detaches x from its parent (x keeps its subtree). Amortised O(log n).
  void cut(std::uint32_t x) noexcept {
    access(x);
    const std::uint32_t above = nodes_[x].child[0];
    if (above != nil) {
      nodes_[above].parent = nil;
      nodes_[x].child[0] = nil;
    }
  }

  /// last = v and count += 1 on every node from x's root down to x. Amortised O(log n).
  void paint(std::uint32_t x, std::uint32_t v) noexcept {
    access(x);
    apply(x, v, 1);
  }

  /// The current values of x. Amortised O(log n) (splays x within its path).
  values read(std::uint32_t x) noexcept {
    splay(x);
    return {nodes_[x].last, nodes_[x].count};
  }

 private:
  struct node {
    std::uint32_t child[2];
    std::uint32_t parent;
    std::uint32_t last, count;
    std::uint32_t tag_last;  // nil: no pending assignment
    std::uint32_t tag_add;
  };

  bool is_splay_root(std::uint32_t x) const noexcept {
    const std::uint32_t p = nodes_[x].parent;
    return p == nil || (nodes_[p].child[0] != x && nodes_[p].child[1] != x);
  }

  void apply(std::uint32_t x, std::uint32_t set, std::uint32_t add) noexcept {
    node& n = nodes_[x];
    if (set != nil) n.last = n.tag_last = set;
    n.count += add;
    n.tag_add += add;
  }

  void push(std::uint32_t x) noexcept {
    node& n = nodes_[x];
    if (n.tag_last == nil && n.tag_add == 0) return;
    for (const std::uint32_t c : n.child)
      if (c != nil) apply(c, n.tag_last, n.tag_add);
    n.tag_last = nil;
    n.tag_add = 0;
  }

  void rotate(std::uint32_t x) noexcept {
    const std::uint32_t y = nodes_[x].parent, z = nodes_[y].parent;
    const int dx = nodes_[y].child[1] == x ? 1 : 0;
    if (!is_splay_root(y)) nodes_[z].child[nodes_[z].child[1] == y ? 1 : 0] = x;
    nodes_[x].parent = z;
    const std::uint32_t moved = nodes_[x].child[1 - dx];
    nodes_[y].child[dx] = moved;
    if (moved != nil) nodes_[moved].parent = y;
    nodes_[x].child[1 - dx] = y;
    nodes_[y].parent = x;
  }

  void splay(std::uint32_t x) noexcept {
    stack_.clear();
    for (std::uint32_t y = x;; y = nodes_[y].parent) {
      stack_.push_back(y);
      if (is_splay_root(y)) break;
    }
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) push(*it);
    while (!is_splay_root(x)) {
      const std::uint32_t y = nodes_[x].parent;
      if (!is_splay_root(y)) {
        const std::uint32_t z = nodes_[y].parent;
        const bool zigzig = (nodes_[y].child[0] == x) == (nodes_[z].child[0] == y);
        rotate(zigzig ? y : x);
      }
      rotate(x);
    }
  }

  // Makes the root-to-x path preferred, ending at x, and x the root of its splay tree.
  void access(std::uint32_t x) noexcept {
    std::uint32_t below = nil;
    for (std::uint32_t y = x; y != nil; y = nodes_[y].parent) {
      splay(y);
      nodes_[y].child[1] = below;
      below = y;
    }
    splay(x);
  }

  std::vector<node> nodes_;
  std::vector<std::uint32_t> stack_;  // splay's path to the splay root, reused
};

}  // namespace specdec::detail
