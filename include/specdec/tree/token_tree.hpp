// specdec/tree/token_tree.hpp - a token tree flattened in breadth-first order (nodes, positions,
// ancestor attention mask) for tree drafting and multi-candidate verification.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "specdec/tree/tree_shape.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// A dense attention mask over the nodes of a tree: mask(i, j) is true when node i may attend to
/// node j (j is i itself or one of its ancestors). Row-major, n x n.
using tree_mask = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A contiguous range of node indices [first, last), usable in range-for and with iterator
/// algorithms. (Not std::views::iota, which some Clang + libstdc++ pairs reject.) O(1) to copy.
struct node_range {
  struct iterator {
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::int32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::int32_t*;
    using reference = std::int32_t;
    std::int32_t at = 0;
    std::int32_t operator*() const noexcept { return at; }
    iterator& operator++() noexcept {
      ++at;
      return *this;
    }
    iterator operator++(int) noexcept { return {at++}; }
    friend bool operator==(iterator a, iterator b) noexcept { return a.at == b.at; }
  };
  std::int32_t first = 0, last = 0;
  iterator begin() const noexcept { return {first}; }
  iterator end() const noexcept { return {last}; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(last - first); }
  bool empty() const noexcept { return first == last; }
  std::int32_t operator[](std::size_t k) const noexcept {
    return first + static_cast<std::int32_t>(k);
  }
};

struct trie_workspace;  // tree/token_trie.hpp

/**
 * A token tree flattened in breadth-first order.
 *
 * Node 0 is the root: the last committed token, which the decoder feeds to the target first.
 * Every other node i has a parent in [0, i); the nodes are ordered by depth, and the children of
 * a node are contiguous and ordered as the candidates are (the order a verifier tries them in).
 * A target evaluating the tree returns one logits row per node, row i being the next-token
 * logits after node i and its ancestors.
 *
 * Built as a shape from a branching config (tokens to be filled in by a drafter with
 * set_token) or as a trie of candidate continuations. Copyable value type; const member
 * functions are safe to call from several threads, mutation is not.
 */
class token_tree {
 public:
  /// A tree with the root only.
  explicit token_tree(token_id root = 0) : tokens_{root}, parents_{-1}, depths_{0} { index(); }

  /**
   * A tree from its flattened arrays: parents[0] == -1 (the root), parents[i] in [0, i) and
   * non-decreasing for i >= 1 (breadth-first order with contiguous children), tokens >= 0.
   * Throws std::invalid_argument naming the offending entry. O(n).
   */
  token_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents) {
    assign(tokens, parents);
  }

  /**
   * Makes this tree the one the constructor from (tokens, parents) builds, reusing this tree's
   * storage: no allocation when it held as many nodes before (or reserve() said so). Throws like
   * that constructor, leaving the tree unchanged. O(n).
   */
  void assign(std::span<const token_id> tokens, std::span<const std::int32_t> parents) {
    if (tokens.empty()) throw std::invalid_argument("token_tree: tokens is empty (need a root)");
    if (parents.size() != tokens.size())
      throw std::invalid_argument("token_tree: parents.size() = " + std::to_string(parents.size()) +
                                  " must equal tokens.size() = " + std::to_string(tokens.size()));
    if (tokens.size() > max_tree_nodes)
      throw std::invalid_argument("token_tree: " + std::to_string(tokens.size()) +
                                  " nodes exceed max_tree_nodes = " +
                                  std::to_string(max_tree_nodes));
    if (parents[0] != -1) throw std::invalid_argument("token_tree: parents[0] must be -1 (root)");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0)
        throw std::invalid_argument("token_tree: tokens[" + std::to_string(i) +
                                    "] = " + std::to_string(tokens[i]) + " is negative");
      if (i == 0) continue;
      const std::int32_t p = parents[i];
      if (p < 0 || static_cast<std::size_t>(p) >= i)
        throw std::invalid_argument("token_tree: parents[" + std::to_string(i) + "] = " +
                                    std::to_string(p) + " must be in [0, " + std::to_string(i) +
                                    ")");
      if (i >= 2 && p < parents[i - 1])
        throw std::invalid_argument("token_tree: parents[" + std::to_string(i) + "] = " +
                                    std::to_string(p) + " < parents[" + std::to_string(i - 1) +
                                    "]: nodes must be in breadth-first order");
    }
    tokens_.assign(tokens.begin(), tokens.end());
    parents_.assign(parents.begin(), parents.end());
    depths_.resize(tokens_.size());
    depths_[0] = 0;
    for (std::size_t i = 1; i < tokens_.size(); ++i)
      depths_[i] = depths_[static_cast<std::size_t>(parents_[i])] + 1;
    index();
  }

  /// Makes this the root-only tree token_tree(root), keeping the storage. O(1).
  void reset(token_id root = 0) {
    tokens_.assign(1, root);
    parents_.assign(1, -1);
    depths_.assign(1, 0);
    index();
  }

  /// Room for `nodes` nodes: assign() and reset() up to that size allocate nothing.
  void reserve(std::size_t nodes) {
    tokens_.reserve(nodes);
    parents_.reserve(nodes);
    depths_.reserve(nodes);
    child_begin_.reserve(nodes + 1);
    level_begin_.reserve(nodes + 1);
  }

  /**
   * The full shape k1 x k2 x ... x kd: k1 children of the root, k2 children of each of those,
   * and so on. Every token is `root` until set_token fills it. An empty branching is the root
   * alone. Throws std::invalid_argument for a factor of 0 or more than max_tree_nodes nodes.
   * O(nodes).
   */
  static token_tree from_branching(std::span<const std::size_t> branching, token_id root = 0) {
    std::size_t width = 1, total = 1;
    for (std::size_t i = 0; i < branching.size(); ++i) {
      if (branching[i] == 0)
        throw std::invalid_argument("token_tree::from_branching: branching[" + std::to_string(i) +
                                    "] must be >= 1");
      if (branching[i] > max_tree_nodes || width * branching[i] > max_tree_nodes ||
          total + width * branching[i] > max_tree_nodes)
        throw std::invalid_argument("token_tree::from_branching: more than max_tree_nodes = " +
                                    std::to_string(max_tree_nodes) + " nodes");
      width *= branching[i];
      total += width;
    }
    std::vector<std::int32_t> parents{-1};
    parents.reserve(total);
    std::size_t level_begin = 0, level_end = 1;
    for (std::size_t k : branching) {
      for (std::size_t p = level_begin; p < level_end; ++p)
        for (std::size_t c = 0; c < k; ++c) parents.push_back(static_cast<std::int32_t>(p));
      level_begin = level_end;
      level_end = parents.size();
    }
    std::vector<token_id> tokens(parents.size(), root);
    return token_tree(tokens, parents);
  }

  /// from_branching(parse_branching(config), root): "4x2x2". Throws like parse_branching.
  static token_tree from_branching(std::string_view config, token_id root = 0) {
    const auto factors = parse_branching(config);
    return from_branching(std::span<const std::size_t>(factors), root);
  }

  /**
   * The trie of candidate continuations under `root`: shared prefixes become shared nodes and
   * identical candidates one path. Children keep the order in which the candidates first
   * introduce them, so candidate order is verification order. Empty candidates add nothing.
   * Throws std::invalid_argument for a negative token or too many nodes. O(total tokens x the
   * most children a node has). Defined in tree/token_trie.hpp, with the other two.
   */
  static token_tree from_candidates(token_id root,
                                    std::span<const std::vector<token_id>> candidates);

  /**
   * from_candidates within the shape `branching` (a TreeDrafter's k1 x k2 x ...): a node at
   * depth d keeps the first branching[d] children the candidates introduce, and no node is
   * deeper than branching.size(); a candidate that would pass either bound is cut there (its
   * prefix stays). The trie therefore has no more nodes than the full shape. Throws like
   * from_candidates. O(total tokens x max branching).
   */
  static token_tree from_candidates(token_id root,
                                    std::span<const std::vector<token_id>> candidates,
                                    std::span<const std::size_t> branching);

  /**
   * Makes this the trie from_candidates(root, candidates, branching) builds, reusing this tree's
   * storage and `ws`: no allocation once both have held a trie of that size. `Candidates` is a
   * range of token sequences. Throws like from_candidates. O(total tokens x max branching).
   */
  template <class Candidates>
  void assign_candidates(token_id root, const Candidates& candidates,
                         std::span<const std::size_t> branching, trie_workspace& ws);

  /// Number of nodes, root included. O(1).
  std::size_t size() const noexcept { return tokens_.size(); }
  /// The largest node depth (0 for a root-only tree). O(1).
  std::size_t max_depth() const noexcept { return static_cast<std::size_t>(depths_.back()); }

  token_id token(std::size_t node) const { return tokens_.at(node); }
  std::int32_t parent(std::size_t node) const { return parents_.at(node); }
  std::int32_t depth(std::size_t node) const { return depths_.at(node); }

  /// The flattened arrays (the layout TreeLanguageModel::append_tree takes). O(1).
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  /// The compact parent list: parents()[0] == -1, parents()[i] in [0, i).
  std::span<const std::int32_t> parents() const noexcept { return parents_; }
  std::span<const std::int32_t> depths() const noexcept { return depths_; }

  /// Sets the token of a node (drafters fill a shape this way). Throws std::out_of_range for a
  /// node outside the tree, std::invalid_argument for a negative token. O(1).
  void set_token(std::size_t node, token_id token) {
    if (node >= tokens_.size())
      throw std::out_of_range("token_tree::set_token: node " + std::to_string(node) +
                              " outside the tree of " + std::to_string(tokens_.size()) + " nodes");
    if (token < 0)
      throw std::invalid_argument("token_tree::set_token: token " + std::to_string(token) +
                                  " is negative");
    tokens_[node] = token;
  }

  /// The children of a node, in candidate order, as a range of node indices. O(1).
  node_range children(std::size_t node) const {
    check(node, "children");
    return {child_begin_[node], child_begin_[node + 1]};
  }
  std::size_t num_children(std::size_t node) const {
    check(node, "num_children");
    return static_cast<std::size_t>(child_begin_[node + 1] - child_begin_[node]);
  }
  bool is_leaf(std::size_t node) const { return num_children(node) == 0; }

  /// The leaves in breadth-first order. O(n).
  std::vector<std::int32_t> leaves() const {
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < size(); ++i)
      if (child_begin_[i] == child_begin_[i + 1]) out.push_back(static_cast<std::int32_t>(i));
    return out;
  }

  /// The nodes at depth d, a contiguous range of indices (empty past max_depth()). O(1).
  node_range level(std::size_t d) const {
    if (d + 1 >= level_begin_.size()) return {};
    return {level_begin_[d], level_begin_[d + 1]};
  }

  /// The node indices from the root (0) down to `node`, inclusive, into `out` (cleared first):
  /// the `path` TreeLanguageModel::commit takes. O(depth), no allocation once `out` has grown.
  void path_to(std::size_t node, std::vector<std::int32_t>& out) const {
    check(node, "path_to");
    out.resize(static_cast<std::size_t>(depths_[node]) + 1);
    auto at = static_cast<std::int32_t>(node);
    for (std::size_t k = out.size(); k-- > 0;) {
      out[k] = at;
      at = parents_[static_cast<std::size_t>(at)];
    }
  }
  std::vector<std::int32_t> path_to(std::size_t node) const {
    std::vector<std::int32_t> out;
    path_to(node, out);
    return out;
  }

  /// The tokens on the path from the root to `node`, inclusive. O(depth).
  std::vector<token_id> path_tokens(std::size_t node) const {
    std::vector<std::int32_t> path;
    path_to(node, path);
    std::vector<token_id> out(path.size());
    for (std::size_t k = 0; k < path.size(); ++k) out[k] = tokens_[static_cast<std::size_t>(path[k])];
    return out;
  }

  /// Position of each node when the root follows `context_length` committed tokens:
  /// context_length + depth(i). `out.size()` must equal size(). O(n).
  void positions(std::size_t context_length, std::span<std::size_t> out) const {
    if (out.size() != size())
      throw std::invalid_argument("token_tree::positions: out.size() = " +
                                  std::to_string(out.size()) + " must equal size() = " +
                                  std::to_string(size()));
    for (std::size_t i = 0; i < size(); ++i)
      out[i] = context_length + static_cast<std::size_t>(depths_[i]);
  }
  std::vector<std::size_t> positions(std::size_t context_length) const {
    std::vector<std::size_t> out(size());
    positions(context_length, out);
    return out;
  }

  /// True when node i attends to node j: j is i or an ancestor of i. O(depth).
  bool attends(std::size_t i, std::size_t j) const {
    check(i, "attends");
    check(j, "attends");
    if (depths_[j] > depths_[i]) return false;
    auto at = static_cast<std::int32_t>(i);
    while (depths_[static_cast<std::size_t>(at)] > depths_[j]) at = parents_[static_cast<std::size_t>(at)];
    return static_cast<std::size_t>(at) == j;
  }

  /// The dense ancestor mask (see tree_mask): row i is true at i and its ancestors. Lower
  /// triangular because parents precede children. O(n^2) memory, O(n * depth) to fill.
  tree_mask attention_mask() const {
    const auto n = static_cast<Eigen::Index>(size());
    tree_mask mask = tree_mask::Constant(n, n, false);
    for (Eigen::Index i = 0; i < n; ++i)
      for (std::int32_t at = static_cast<std::int32_t>(i); at >= 0;
           at = parents_[static_cast<std::size_t>(at)])
        mask(i, at) = true;
    return mask;
  }

  friend bool operator==(const token_tree& a, const token_tree& b) {
    return a.tokens_ == b.tokens_ && a.parents_ == b.parents_;
  }

 private:
  // The trie builder behind from_candidates and assign_candidates (tree/token_trie.hpp):
  // within `shape` when it is given.
  template <class Candidates>
  void assign_trie(token_id root, const Candidates& candidates,
                   const std::span<const std::size_t>* shape, trie_workspace& ws);

  void check(std::size_t node, const char* what) const {
    if (node >= tokens_.size())
      throw std::out_of_range(std::string("token_tree::") + what + ": node " +
                              std::to_string(node) + " outside the tree of " +
                              std::to_string(tokens_.size()) + " nodes");
  }

  // Children of node i are the nodes [child_begin_[i], child_begin_[i + 1]); nodes at depth d
  // are [level_begin_[d], level_begin_[d + 1]). Both follow from breadth-first order.
  void index() {
    const std::size_t n = tokens_.size();
    child_begin_.assign(n + 1, static_cast<std::int32_t>(n));
    std::size_t next = 1;  // the first node whose parent we have not passed yet
    for (std::size_t i = 0; i < n; ++i) {
      while (next < n && static_cast<std::size_t>(parents_[next]) < i) ++next;
      child_begin_[i] = static_cast<std::int32_t>(next);
    }
    level_begin_.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (i == 0 || depths_[i] != depths_[i - 1]) level_begin_.push_back(static_cast<std::int32_t>(i));
    level_begin_.push_back(static_cast<std::int32_t>(n));
  }

  std::vector<token_id> tokens_;
  std::vector<std::int32_t> parents_;
  std::vector<std::int32_t> depths_;
  std::vector<std::int32_t> child_begin_;
  std::vector<std::int32_t> level_begin_;
};

}  // namespace specdec

#include "specdec/tree/token_trie.hpp"  // the trie members' definitions
