// specdec/tree/tree_fallback.hpp - evaluating a token tree with any LanguageModel: the model's own
// append_tree/commit when it models TreeLanguageModel, else root-to-leaf paths with append/truncate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Scratch memory for the path-by-path fallback, reused across calls. Not thread-safe.
struct tree_eval_workspace {
  std::vector<token_id> tokens;
  std::vector<float> logits;
  std::vector<std::int32_t> path;
  std::vector<std::int32_t> stack;
};

namespace detail {

inline void check_tree_logits(const token_tree& tree, std::size_t v, std::size_t size,
                              const char* who) {
  if (size != tree.size() * v)
    throw std::invalid_argument(std::string(who) + ": logits.size() = " + std::to_string(size) +
                                " must be tree.size() * vocab_size() = " +
                                std::to_string(tree.size() * v));
}

// A commit path is empty or starts at the root (0) and steps from parent to child.
inline void check_commit_path(const token_tree& tree, std::span<const std::int32_t> path,
                              const char* who) {
  for (std::size_t k = 0; k < path.size(); ++k) {
    const std::int32_t node = path[k];
    if (node < 0 || static_cast<std::size_t>(node) >= tree.size())
      throw std::invalid_argument(std::string(who) + ": path[" + std::to_string(k) + "] = " +
                                  std::to_string(node) + " is not a node of the tree");
    const std::int32_t expected_parent = k == 0 ? -1 : path[k - 1];
    if (tree.parent(static_cast<std::size_t>(node)) != expected_parent)
      throw std::invalid_argument(
          std::string(who) + ": path[" + std::to_string(k) + "] = " + std::to_string(node) +
          (k == 0 ? " is not the root" : " is not a child of path[" + std::to_string(k - 1) + "]"));
  }
}

}  // namespace detail

/**
 * Evaluates `tree` on a model that only has append/truncate. The tree is walked depth first;
 * at each leaf the model is truncated to the part of the current root-to-leaf path it already
 * holds and the rest of the path is appended (a node's logits depend only on the context and
 * its ancestors, so rows already written stay valid). Correct for any model honouring the
 * LanguageModel contract (append after truncate equals a fresh context). Cost: one append call
 * per leaf and every node fed exactly once, tree.size() tokens in all. Afterwards the context is
 * unchanged (the tree is "pending" as with append_tree); on an exception it is truncated back to
 * where it was. `logits.size()` must be tree.size() * V. Returns the number of append calls made
 * (the tree's leaves), for callers that count model calls.
 */
template <LanguageModel M>
std::size_t evaluate_tree_by_paths(M& model, const token_tree& tree, std::span<float> logits,
                            tree_eval_workspace& ws) {
  const std::size_t v = static_cast<std::size_t>(model.vocab_size());
  detail::check_tree_logits(tree, v, logits.size(), "evaluate_tree_by_paths");
  const std::size_t base = static_cast<std::size_t>(model.size());
  std::vector<std::int32_t>& path = ws.path;  // the current root-to-node path
  std::vector<std::int32_t>& pending = ws.stack;
  path.clear();
  pending.assign(1, 0);
  std::size_t held = 0;  // leading entries of `path` the model holds after `base`
  std::size_t calls = 0;
  try {
    while (!pending.empty()) {
      const auto node = static_cast<std::size_t>(pending.back());
      pending.pop_back();
      const auto depth = static_cast<std::size_t>(tree.depth(node));
      path.resize(depth);
      path.push_back(static_cast<std::int32_t>(node));
      held = std::min(held, depth);
      const auto kids = tree.children(node);
      for (std::int32_t c = kids.last; c-- > kids.first;) pending.push_back(c);  // visit in order
      if (!kids.empty()) continue;
      model.truncate(base + held);
      const std::size_t n = path.size() - held;
      ws.tokens.resize(n);
      for (std::size_t k = 0; k < n; ++k)
        ws.tokens[k] = tree.token(static_cast<std::size_t>(path[held + k]));
      ws.logits.resize(n * v);
      model.append(std::span<const token_id>(ws.tokens), std::span<float>(ws.logits));
      ++calls;
      for (std::size_t k = 0; k < n; ++k)
        std::copy_n(ws.logits.begin() + static_cast<std::ptrdiff_t>(k * v), v,
                    logits.begin() + static_cast<std::ptrdiff_t>(
                                         static_cast<std::size_t>(path[held + k]) * v));
      held = path.size();
    }
    model.truncate(base);
  } catch (...) {
    if (static_cast<std::size_t>(model.size()) > base) model.truncate(base);
    throw;
  }
  return calls;
}

/**
 * The fallback's commit: appends the tokens of `path` (node indices from the root down, each the
 * child of the previous; may be empty) to the context, exactly as TreeLanguageModel::commit
 * would leave it. One append of path.size() tokens; the logits it writes are discarded.
 * Throws std::invalid_argument for a path that is not a chain from the root.
 */
template <LanguageModel M>
void commit_tree_path_by_append(M& model, const token_tree& tree,
                                std::span<const std::int32_t> path, tree_eval_workspace& ws) {
  detail::check_commit_path(tree, path, "commit_tree_path");
  if (path.empty()) return;
  const std::size_t v = static_cast<std::size_t>(model.vocab_size());
  ws.tokens.resize(path.size());
  for (std::size_t k = 0; k < path.size(); ++k)
    ws.tokens[k] = tree.token(static_cast<std::size_t>(path[k]));
  ws.logits.resize(path.size() * v);
  model.append(std::span<const token_id>(ws.tokens), std::span<float>(ws.logits));
}

/**
 * Writes one row of next-token logits per tree node into `logits` (tree.size() * V floats),
 * with the model's own append_tree when it models TreeLanguageModel (one call, tree attention),
 * else with evaluate_tree_by_paths. Either way the tree is then pending: follow with
 * commit_tree_path on the same tree. Returns the number of model calls made: 1 with
 * append_tree, one append per leaf path by path.
 */
template <LanguageModel M>
std::size_t evaluate_tree(M& model, const token_tree& tree, std::span<float> logits,
                          tree_eval_workspace& ws) {
  if constexpr (TreeLanguageModel<M>) {
    detail::check_tree_logits(tree, static_cast<std::size_t>(model.vocab_size()), logits.size(),
                              "evaluate_tree");
    model.append_tree(tree.tokens(), tree.parents(), logits);
    return 1;
  } else {
    return evaluate_tree_by_paths(model, tree, logits, ws);
  }
}

/// evaluate_tree with a temporary workspace.
template <LanguageModel M>
std::size_t evaluate_tree(M& model, const token_tree& tree, std::span<float> logits) {
  tree_eval_workspace ws;
  return evaluate_tree(model, tree, logits, ws);
}

/**
 * Keeps the root-to-node `path` of the pending tree (typically {0, accepted...}, see
 * tree_verify_result): the model's own commit when it models TreeLanguageModel, else
 * commit_tree_path_by_append. The context grows by path.size() tokens. Throws
 * std::invalid_argument, before touching the model, for a path that is not a chain from the root.
 */
template <LanguageModel M>
void commit_tree_path(M& model, const token_tree& tree, std::span<const std::int32_t> path,
                      tree_eval_workspace& ws) {
  if constexpr (TreeLanguageModel<M>) {
    detail::check_commit_path(tree, path, "commit_tree_path");
    model.commit(path);
  } else {
    commit_tree_path_by_append(model, tree, path, ws);
  }
}

/// commit_tree_path with a temporary workspace.
template <LanguageModel M>
void commit_tree_path(M& model, const token_tree& tree, std::span<const std::int32_t> path) {
  tree_eval_workspace ws;
  commit_tree_path(model, tree, path, ws);
}

}  // namespace specdec
