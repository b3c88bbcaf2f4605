// llama2c/engine/tree_rows.hpp - the token-tree bookkeeping both engines share (model.hpp for its one
// sequence, batch_model.hpp for each tree entry of a batch): the node bound and the parents
// checked, each node's depth and ancestor list for tree attention (attention_args::ancestors),
// the deepest node checked against the context, the caches grown for a wide tree, a commit path
// checked, and its K/V rows moved into place. One definition, so that both engines accept and refuse the
// same trees with the same words and lay them out the same way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <specdec/types.hpp>

namespace specdec::llama2c {

/// The most nodes one token tree may have in either engine. Memory and time grow with nodes x
/// (context + depth): the score rows, the scratch rows (nodes x hidden_dim) and the cache rows.
inline constexpr std::size_t tree_node_limit = 4096;

/// Throws std::invalid_argument, its message starting with where(), for a tree of more than
/// tree_node_limit nodes. O(1).
template <class Where>
void check_node_count(std::size_t n, const Where& where) {
  if (n > tree_node_limit)
    throw std::invalid_argument(where() + "a tree of " + std::to_string(n) +
                                " nodes exceeds the engine's bound of max_tree_nodes = " +
                                std::to_string(tree_node_limit));
}

/**
 * Throws std::invalid_argument, its message starting with where(), unless `parents` has n
 * entries and each parents[i] is -1 or in [0, i) (parents come before their children). O(n).
 */
template <class Where>
void check_parents(std::span<const std::int32_t> parents, std::size_t n, const Where& where) {
  if (parents.size() != n)
    throw std::invalid_argument(where() + "parents.size() = " + std::to_string(parents.size()) +
                                " differs from tokens.size() = " + std::to_string(n));
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t p = parents[i];
    if (p < -1 || p >= static_cast<std::int32_t>(i))
      throw std::invalid_argument(where() + "parents[" + std::to_string(i) + "] = " +
                                  std::to_string(p) + " must be -1 or in [0, " +
                                  std::to_string(i) + ")");
  }
}

/**
 * The attention layout of one token tree: node i sits at depth(i) after the context and sees the
 * context and the tree's rows ancestors()[ancestor_begin()[i] .. ancestor_begin()[i + 1])
 * (ascending, ending with i itself), as attention_args takes them. Built in O(nodes x depth),
 * never nodes x nodes; the storage is kept between trees, so a warmed-up layout does not
 * allocate.
 */
class tree_layout {
 public:
  /// Lays out the tree `parents` (valid: see check_parents).
  void assign(std::span<const std::int32_t> parents) {
    const std::size_t n = parents.size();
    depth_.resize(n);
    begin_.resize(n + 1);
    ancestors_.clear();
    begin_[0] = 0;
    deepest_ = 0;
    // Node i's list is its parent's plus i; parents come first, so each list is ascending.
    for (std::size_t i = 0; i < n; ++i) {
      if (parents[i] >= 0) {
        const auto p = static_cast<std::size_t>(parents[i]);
        depth_[i] = depth_[p] + 1;
        for (std::ptrdiff_t a = begin_[p]; a < begin_[p + 1]; ++a) {
          const std::int32_t ancestor = ancestors_[static_cast<std::size_t>(a)];
          ancestors_.push_back(ancestor);
        }
      } else {
        depth_[i] = 0;
      }
      deepest_ = std::max(deepest_, depth_[i]);
      ancestors_.push_back(static_cast<std::int32_t>(i));
      begin_[i + 1] = static_cast<std::ptrdiff_t>(ancestors_.size());
    }
  }

  std::size_t nodes() const noexcept { return depth_.size(); }
  std::size_t depth(std::size_t i) const { return depth_[i]; }
  /// The deepest node's depth + 1: the positions the tree takes, and its longest ancestor list.
  std::size_t width() const noexcept { return depth_.empty() ? 0 : deepest_ + 1; }
  const std::int32_t* ancestors() const noexcept { return ancestors_.data(); }
  const std::ptrdiff_t* ancestor_begin() const noexcept { return begin_.data(); }

 private:
  std::vector<std::size_t> depth_;
  std::vector<std::ptrdiff_t> begin_;
  std::vector<std::int32_t> ancestors_;
  std::size_t deepest_ = 0;
};

/// Throws std::length_error, its message starting with where(), when the deepest node of the
/// laid-out `tree` would sit past max_size after a context of `size` tokens. O(1).
template <class Where>
void check_tree_fits(const tree_layout& tree, std::size_t size, std::size_t max_size,
                     const Where& where) {
  const std::size_t deepest = tree.width() - 1;
  if (deepest + 1 > max_size - size)
    throw std::length_error(where() + "a node of depth " + std::to_string(deepest) + " after " +
                            std::to_string(size) + " tokens passes max_size() = " +
                            std::to_string(max_size));
}

/// Grows every layer's cache in `k` and `v` to at least `rows` rows of kv_dim, keeping their
/// contents (a tree's node i has its K/V at row size + i, so a wide tree can need more rows than
/// positions). O(rows x layers x kv_dim) when it grows, O(1) otherwise.
inline void grow_cache_rows(std::span<row_matrix> k, std::span<row_matrix> v, std::size_t rows,
                            std::size_t kv_dim) {
  const auto r = static_cast<Eigen::Index>(rows);
  if (k.empty() || k[0].rows() >= r) return;
  for (std::size_t l = 0; l < k.size(); ++l) {
    k[l].conservativeResize(r, static_cast<Eigen::Index>(kv_dim));
    v[l].conservativeResize(r, static_cast<Eigen::Index>(kv_dim));
  }
}

/**
 * Throws std::invalid_argument, its message starting with where(), unless `path` is a chain from
 * a root of the pending tree `parents`: path[0] a root, each next node a child of the one before
 * it. An empty path is a chain. O(path length).
 */
template <class Where>
void check_path(std::span<const std::int32_t> parents, std::span<const std::int32_t> path,
                const Where& where) {
  for (std::size_t k = 0; k < path.size(); ++k) {
    const std::int32_t node = path[k];
    const std::int32_t want_parent = k == 0 ? -1 : path[k - 1];
    if (node < 0 || static_cast<std::size_t>(node) >= parents.size())
      throw std::invalid_argument(where() + "path[" + std::to_string(k) + "] = " +
                                  std::to_string(node) + " is not a node of the pending tree of " +
                                  std::to_string(parents.size()));
    if (parents[static_cast<std::size_t>(node)] != want_parent)
      throw std::invalid_argument(
          where() + "path[" + std::to_string(k) + "] = " + std::to_string(node) + " has parent " +
          std::to_string(parents[static_cast<std::size_t>(node)]) + ", expected " +
          std::to_string(want_parent) + " (a chain from a root)");
  }
}

/**
 * Keeps a checked `path` of a tree whose node i has its K/V at row base + i of every layer's
 * cache in `k` and `v`: node path[j]'s rows move to row base + j. path[j] >= j and the path
 * ascends, so moving in order never overwrites a row still to be read. O(path length x layers x
 * kv_dim).
 */
inline void keep_path_rows(std::span<row_matrix> k, std::span<row_matrix> v, std::size_t base,
                           std::span<const std::int32_t> path) {
  for (std::size_t j = 0; j < path.size(); ++j) {
    const auto from = static_cast<Eigen::Index>(base + static_cast<std::size_t>(path[j]));
    const auto to = static_cast<Eigen::Index>(base + j);
    if (from == to) continue;
    for (std::size_t l = 0; l < k.size(); ++l) {
      k[l].row(to) = k[l].row(from);
      v[l].row(to) = v[l].row(from);
    }
  }
}

}  // namespace specdec::llama2c
