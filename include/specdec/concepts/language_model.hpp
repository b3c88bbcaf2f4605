// specdec/concepts/language_model.hpp - what specdec needs from a model.
#pragma once

#include <concepts>
#include <cstddef>
#include <limits>
#include <span>

#include "specdec/types.hpp"

namespace specdec {

/**
 * A causal language model with a rollback-able context (its KV cache).
 *
 * @code
 *   const M& cm; M& m; std::span<const token_id> tokens; std::span<float> logits; std::size_t n;
 *   cm.vocab_size()        // -> std::size_t: V, the number of logits per position
 *   cm.size()              // -> std::size_t: tokens currently in the context
 *   m.append(tokens, logits)
 *   m.truncate(n)
 * @endcode
 *
 * Contract:
 * - `append(tokens, logits)` feeds `tokens` (n >= 1) after the current context, in one call, and
 *   writes n rows of V logits, row-major, into `logits` (`logits.size() == n * V`). Row i is the
 *   model's next-token logits after seeing the context plus tokens[0..i]. Afterwards
 *   `size()` has grown by n.
 * - `truncate(n)` (n <= size()) rolls the context back to its first n tokens. An `append` after
 *   `truncate(n)` must produce the same logits as if the dropped tokens had never been appended:
 *   nothing of them may remain in the cache. `truncate(size())` is a no-op.
 * - Bad input throws and leaves the context unchanged: a token outside [0, V), a wrong logits
 *   size, or a context that would exceed the model's capacity.
 * - Optional: `cm.max_size()` -> std::size_t, the largest context the model can hold. When it
 *   exists the decoder checks prompts and drafts against it before calling the model.
 * - Optional: `cm.tokens()` -> std::span<const token_id>, the size() tokens the context holds,
 *   in order. With it, generate_options::reuse_prefix keeps exactly the prefix the target still
 *   holds, whoever used it in between.
 *
 * specdec never calls a model from two threads at once.
 */
template <class M>
concept LanguageModel = requires(M& m, const M& cm, std::span<const token_id> tokens,
                                 std::span<float> logits, std::size_t n) {
  { cm.vocab_size() } -> std::convertible_to<std::size_t>;
  { cm.size() } -> std::convertible_to<std::size_t>;
  m.append(tokens, logits);
  m.truncate(n);
};

/// The model's capacity: `m.max_size()` when it has one, otherwise unbounded.
template <LanguageModel M>
std::size_t max_size_of(const M& m) {
  if constexpr (requires { { m.max_size() } -> std::convertible_to<std::size_t>; }) {
    return static_cast<std::size_t>(m.max_size());
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}

namespace detail {
/// Used by class templates to give one readable error instead of a wall of constraint notes.
template <class M>
constexpr bool check_language_model() {
  static_assert(LanguageModel<M>,
                "specdec: the model type does not model specdec::LanguageModel. It needs "
                "vocab_size() const, size() const, append(std::span<const token_id>, "
                "std::span<float>) and truncate(std::size_t); see "
                "specdec/concepts/language_model.hpp");
  return true;
}
}  // namespace detail

}  // namespace specdec
