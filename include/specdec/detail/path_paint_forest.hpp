// specdec/detail/path_paint_forest.hpp - a rooted forest whose root-to-node paths can be painted
// (a link-cut tree): the occurrence bookkeeping behind detail::suffix_automaton.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "specdec/detail/ngram_index.hpp"  // ngram_vector: huge-page-advised storage

namespace specdec::detail {

/// What path_paint_forest keeps per node: the latest painted value (or nil) and the paint count.
struct path_values {
  std::uint32_t last;
  std::uint32_t count;
};

/// No payload: a path_paint_forest<> node is 20 bytes.
struct no_payload {};

/**
 * A rooted forest over node ids 0, 1, 2, ... in which every node carries (last, count), and
 * paint(x, v) sets last = v and adds 1 to count on every node of the path from x's root to x.
 *
 * The suffix automaton keeps its suffix-link tree here: a new position is an end position of its
 * state and of every ancestor, so painting the path of the state that ends at position i with i
 * keeps, per state, its latest end position (last) and its number of end positions (count). The
 * path is unbounded (a stream of one repeated token makes it as long as the stream), so a plain
 * walk would be quadratic; a link-cut tree (Sleator and Tarjan 1983, splay-based) paints it in
 * amortised O(log n).
 *
 * Representation: each preferred path is a splay tree keyed by depth; `parent` of a splay root is
 * the path-parent pointer. No lazy tags, so a splay never pushes anything down (nor touches the
 * siblings of its path):
 * - count is stored as a difference: a splay root holds its count, any other node its count minus
 *   its splay parent's; a paint adds 1 at the root of the painted path's splay tree.
 * - last is the same on every node of one splay tree, and is kept at its root only. Paths are
 *   joined only by the access that precedes a paint, which then gives the joined path one value;
 *   splits (a path cut in two by an access or by `cut`) keep each part uniform.
 * Each node also holds a `Payload` for the user, next to the forest's 20 bytes: the suffix
 * automaton keeps its states there, so that the walks over suffix links, its own and the
 * paint's, load one cache line per state instead of two.
 * Not thread-safe, reads included (they splay).
 */
template <class Payload = no_payload>
class path_paint_forest {
 public:
  static constexpr std::uint32_t nil = std::numeric_limits<std::uint32_t>::max();
  using values = path_values;

  void clear() noexcept { nodes_.clear(); }
  void reserve(std::size_t n) { nodes_.reserve(n); }
  std::size_t size() const noexcept { return nodes_.size(); }
  /// Bytes held (capacity).
  std::size_t memory_bytes() const noexcept { return nodes_.capacity() * sizeof(node); }

  /// Adds a node without a parent carrying `v` and `payload`; returns its id. Amortised O(1).
  std::uint32_t add(values v, const Payload& payload = {}) {
    nodes_.push_back(node{{nil, nil}, nil, v.count, v.last, payload});
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }

  /// The payload of node x.
  Payload& payload(std::uint32_t x) noexcept { return nodes_[x].payload; }
  const Payload& payload(std::uint32_t x) const noexcept { return nodes_[x].payload; }

  /// Makes `parent` the parent of `x`, which must have no parent (a fresh node or one just cut).
  void link(std::uint32_t x, std::uint32_t parent) noexcept { nodes_[x].parent = parent; }

  /// Detaches x from its parent (x keeps its subtree). Amortised O(log n).
  void cut(std::uint32_t x) noexcept {
    splay(x);
    node& n = nodes_[x];
    const std::uint32_t above = n.child[0];  // the part of x's path above x
    if (above != nil) {
      node& a = nodes_[above];
      a.parent = n.parent;  // the path-parent pointer belongs to the upper part
      a.count += n.count;
      a.last = n.last;
      n.child[0] = nil;
    }
    n.parent = nil;
  }

  /// last = v and count += 1 on every node from x's root down to x. O(walk_budget) + amortised
  /// O(log n): the nodes of the path that are alone in their splay trees, walking up from x, are
  /// painted directly and the rest of the path, if any, through an access; when more than
  /// walk_budget of them are alone, the whole path goes through the access instead, which joins
  /// it into one splay tree for the next paints. (Suffix-link paths are short on most text, 3-4
  /// states on ngram_bench's stream, and consecutive paints share little more than the root: an
  /// access would splice nearly every edge of the path anew. On a long run of one token the
  /// path is as long as the run, and each paint extends the previous one by a node: there the
  /// joined path is what keeps a paint cheap.)
  void paint(std::uint32_t x, std::uint32_t v) noexcept {
    std::uint32_t alone[walk_budget];
    std::size_t walked = 0;
    std::uint32_t y = x;
    for (; y != nil && walked < walk_budget; ++walked) {
      const node& n = nodes_[y];
      if (n.child[0] != nil || n.child[1] != nil || !is_splay_root(y)) break;
      alone[walked] = y;
      y = n.parent;  // a node alone in its splay tree: the path-parent is the parent
    }
    if (y != nil && walked == walk_budget) {
      y = x;  // a long path: all of it by the access
    } else {
      for (std::size_t j = 0; j < walked; ++j) {
        nodes_[alone[j]].count += 1;
        nodes_[alone[j]].last = v;
      }
    }
    if (y == nil) return;
    access(y);
    nodes_[y].count += 1;
    nodes_[y].last = v;
  }

  /// Most nodes paint() paints directly; beyond, the whole path goes through an access.
  static constexpr std::size_t walk_budget = 16;

  /// The current values of x. Amortised O(log n) (splays x within its path).
  values read(std::uint32_t x) noexcept {
    splay(x);
    return {nodes_[x].last, nodes_[x].count};
  }

 private:
  struct node {
    std::uint32_t child[2];
    std::uint32_t parent;
    std::uint32_t count;  // splay root: the count; else the count minus the splay parent's
    std::uint32_t last;   // valid at a splay root only
    [[no_unique_address]] Payload payload;
  };

  bool is_splay_root(std::uint32_t x) const noexcept {
    const std::uint32_t p = nodes_[x].parent;
    return p == nil || (nodes_[p].child[0] != x && nodes_[p].child[1] != x);
  }

  // x takes the place of its splay parent y; counts stay what they were.
  void rotate(std::uint32_t x) noexcept {
    node& nx = nodes_[x];
    const std::uint32_t y = nx.parent;
    node& ny = nodes_[y];
    const std::uint32_t z = ny.parent;
    const int dx = ny.child[1] == x ? 1 : 0;
    if (is_splay_root(y))
      nx.last = ny.last;
    else
      nodes_[z].child[nodes_[z].child[1] == y ? 1 : 0] = x;
    nx.parent = z;
    const std::uint32_t moved = nx.child[1 - dx];
    ny.child[dx] = moved;
    if (moved != nil) {
      nodes_[moved].parent = y;
      nodes_[moved].count += nx.count;
    }
    nx.child[1 - dx] = y;
    ny.parent = x;
    const std::uint32_t x_delta = nx.count;
    nx.count += ny.count;
    ny.count = 0u - x_delta;
  }

  void splay(std::uint32_t x) noexcept {
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

  // Makes the root-to-x path preferred, ending at x, and x the root of its splay tree. The
  // joined path's `last` is left to the caller (paint sets it).
  void access(std::uint32_t x) noexcept {
    std::uint32_t below = nil;
    for (std::uint32_t y = x; y != nil; y = nodes_[y].parent) {
      splay(y);
      node& n = nodes_[y];
      const std::uint32_t split = n.child[1];  // becomes a splay root of its own
      if (split != nil) {
        nodes_[split].count += n.count;
        nodes_[split].last = n.last;
      }
      if (below != nil) nodes_[below].count -= n.count;
      n.child[1] = below;
      below = y;
    }
    splay(x);
  }

  ngram_vector<node> nodes_;
};

}  // namespace specdec::detail
