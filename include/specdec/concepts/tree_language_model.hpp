// specdec/concepts/tree_language_model.hpp - a model that scores a whole token tree in one call.
#pragma once

#include <cstddef>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/concepts/language_model.hpp"

namespace specdec {

/**
 * A LanguageModel that can evaluate a token tree in one call (tree attention) and then keep a
 * single root-to-node path of it.
 *
 * @code
 *   M& m; std::span<const token_id> tokens; std::span<const std::int32_t> parents;
 *   std::span<float> logits; std::span<const std::int32_t> path;
 *   m.append_tree(tokens, parents, logits)
 *   m.commit(path)
 * @endcode
 *
 * Contract:
 * - `append_tree(tokens, parents, logits)`: n nodes in topological order; `parents[i]` is -1 for a
 *   node that follows the current context directly, else an index in [0, i). Node i sits at
 *   position `size() + depth(i)` (depth 0 for a root) and attends to the whole context, its
 *   ancestors and itself, nothing else. Writes n rows of V logits (row i: next-token logits after
 *   node i). The tree is then pending: `size()` still reports the committed context, and the next
 *   call on the model must be `commit`.
 * - `commit(path)`: `path` lists node indices of the pending tree from a root down, each node's
 *   parent being the previous entry (may be empty). The context becomes the old context plus
 *   those tokens, exactly as if they had been `append`ed; every other node is dropped.
 * - Capacity: `max_size()`, when the model has one (see LanguageModel), bounds the committed
 *   context plus every node of a pending tree: `append_tree` of n nodes is within it when
 *   `size() + n <= max_size()`, so an engine that keeps each node in a cache cell of its own
 *   (llama.cpp's n_ctx) never has to refuse a call the decoder makes. The decoder keeps every call
 *   within that bound: near a full context it drafts a smaller tree (the levels of the shape
 *   whose nodes all fit), and a generation that reaches max_size() ends with
 *   stop_reason::context_full. An engine may accept more (one that bounds only positions needs
 *   `size() + depth + 1 <= max_size()` for its deepest node, as examples/llama2c does).
 * - Optional limits of one call: `max_tree_size()`, the most nodes (root included) one
 *   `append_tree` accepts (an engine's batch size), and `max_tree_leaves()`, the most leaves
 *   (an engine that gives each root-to-leaf path a sequence of its own). The decoders draft
 *   trees within both (they cut the shape's depth), so a model never sees a tree it must refuse.
 * - Bad input (token outside [0, V), a parent that is not earlier, a path that is not a chain,
 *   a tree beyond the capacity) throws and leaves the context as it was before the call.
 *
 * Models that only model LanguageModel still work in every decoder through a slower fallback
 * that evaluates each root-to-leaf path with append/truncate.
 */
template <class M>
concept TreeLanguageModel =
    LanguageModel<M> && requires(M& m, std::span<const token_id> tokens,
                                 std::span<const std::int32_t> parents, std::span<float> logits,
                                 std::span<const std::int32_t> path) {
      m.append_tree(tokens, parents, logits);
      m.commit(path);
    };

/// The most nodes (root included) one tree call of `m` accepts: m.max_tree_size() when it has
/// one, else unbounded.
template <class M>
std::size_t max_tree_size_of(const M& m) {
  if constexpr (requires {
                  { m.max_tree_size() } -> std::convertible_to<std::size_t>;
                }) {
    return static_cast<std::size_t>(m.max_tree_size());
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}

/// The most leaves one tree of `m` may have: m.max_tree_leaves() when it has one, else unbounded.
template <class M>
std::size_t max_tree_leaves_of(const M& m) {
  if constexpr (requires {
                  { m.max_tree_leaves() } -> std::convertible_to<std::size_t>;
                }) {
    return static_cast<std::size_t>(m.max_tree_leaves());
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}

}  // namespace specdec
