// specdec/concepts/language_model.hpp - what specdec needs from a model.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

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
 *   m.prefill(tokens)      // optional: append without logits
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
 * - Optional: `m.prefill(tokens)` (PrefillLanguageModel) feeds `tokens` (n >= 1) after the
 *   context in one call and writes no logits: the context afterwards is exactly what
 *   `append(tokens, logits)` leaves (the next append's logits are the same), and size() grows
 *   by n. Bad input throws and leaves the context unchanged, as append. It lets an engine skip
 *   the classifier (and its n x V output) for rows nobody reads: specdec feeds prompts and
 *   re-fed history through specdec::prefill, which calls it when it exists.
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

/**
 * A LanguageModel with the optional `prefill(tokens)`: append without logits.
 *
 * @code
 *   M& m; std::span<const token_id> tokens;
 *   m.prefill(tokens)   // as append(tokens, logits), writing no logits
 * @endcode
 */
template <class M>
concept PrefillLanguageModel =
    LanguageModel<M> && requires(M& m, std::span<const token_id> tokens) { m.prefill(tokens); };

/// The most floats of scratch logits specdec::prefill uses for a model without prefill():
/// 4 MiB, 32 rows at a 32k vocabulary.
inline constexpr std::size_t prefill_scratch_floats = std::size_t{1} << 20;

/// Tokens per append when specdec::prefill feeds a model without prefill() at vocabulary `vocab`:
/// as many rows as prefill_scratch_floats holds, at least 1.
constexpr std::size_t prefill_chunk_tokens(std::size_t vocab) noexcept {
  return vocab == 0 ? prefill_scratch_floats : std::max<std::size_t>(1, prefill_scratch_floats / vocab);
}

/**
 * Feeds `tokens` after `m`'s context when no row of logits is wanted: the one mechanism the
 * decoders, the drafters and the hidden-state capture use for prompts and re-fed history.
 * A PrefillLanguageModel gets one m.prefill(tokens). Any other model gets appends of at most
 * prefill_chunk_tokens(V) tokens into `scratch` (grown to at most that many rows and kept, so a
 * caller that passes the same scratch again allocates nothing): memory stays bounded by
 * prefill_scratch_floats whatever the length, at the price of ceil(n / chunk) calls. Nothing to
 * do for empty `tokens`. Returns the number of model calls made.
 *
 * If a chunk throws, the context keeps the chunks fed before it and the exception propagates
 * (callers that need all-or-nothing truncate back; the decoders empty the context).
 */
template <LanguageModel M>
std::size_t prefill(M& m, std::span<const token_id> tokens, std::vector<float>& scratch) {
  if (tokens.empty()) return 0;
  if constexpr (PrefillLanguageModel<M>) {
    m.prefill(tokens);
    return 1;
  } else {
    const auto v = static_cast<std::size_t>(m.vocab_size());
    const std::size_t chunk = prefill_chunk_tokens(v);
    const std::size_t rows = std::min(chunk, tokens.size());
    if (scratch.size() < rows * v) scratch.resize(rows * v);
    std::size_t calls = 0;
    for (std::size_t at = 0; at < tokens.size(); at += chunk, ++calls) {
      const std::size_t n = std::min(chunk, tokens.size() - at);
      m.append(tokens.subspan(at, n), std::span<float>(scratch.data(), n * v));
    }
    return calls;
  }
}

/// specdec::prefill with a scratch of its own (allocated per call for a model without prefill()).
template <LanguageModel M>
std::size_t prefill(M& m, std::span<const token_id> tokens) {
  std::vector<float> scratch;
  return prefill(m, tokens, scratch);
}

namespace detail {
/// Used by class templates to give readable errors instead of a wall of constraint notes: one
/// check per member, so the message names the member that is missing or has the wrong shape (a
/// missing `const` is the usual one).
template <class M>
constexpr bool check_language_model() {
  static_assert(requires(const M& cm) { { cm.vocab_size() } -> std::convertible_to<std::size_t>; },
                "specdec: the model type does not model specdec::LanguageModel: it has no "
                "`vocab_size() const` returning a std::size_t (missing, or not const?); see "
                "specdec/concepts/language_model.hpp");
  static_assert(requires(const M& cm) { { cm.size() } -> std::convertible_to<std::size_t>; },
                "specdec: the model type does not model specdec::LanguageModel: it has no "
                "`size() const` returning a std::size_t (missing, or not const?); see "
                "specdec/concepts/language_model.hpp");
  static_assert(requires(M& m, std::span<const token_id> tokens, std::span<float> logits) {
                  m.append(tokens, logits);
                },
                "specdec: the model type does not model specdec::LanguageModel: it has no "
                "`append(std::span<const token_id>, std::span<float>)`; see "
                "specdec/concepts/language_model.hpp");
  static_assert(requires(M& m, std::size_t n) { m.truncate(n); },
                "specdec: the model type does not model specdec::LanguageModel: it has no "
                "`truncate(std::size_t)`; see specdec/concepts/language_model.hpp");
  return true;
}
}  // namespace detail

}  // namespace specdec
