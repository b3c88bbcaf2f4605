// specdec/math/row_processor.hpp - what an engine does to a row of logits before sampling
// (logit biases, repetition penalties, grammar masks), and the one piece that applies it to a
// row given the tokens that row follows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <vector>

#include "specdec/types.hpp"

namespace specdec {

/**
 * A row processor: rewrites one row of logits (V floats) for the token that follows `prefix`
 * (the prompt, the tokens emitted since, and the drafts before this row), before warping.
 *
 * @code
 *   sampling_params sp;
 *   sp.processor = [](std::span<const token_id> prefix, std::span<float> logits) {
 *     if (!prefix.empty()) logits[prefix.back()] -= 1.5f;  // discourage an immediate repeat
 *   };
 * @endcode
 *
 * Contract, for speculative decoding to stay exactly as lossless as plain decoding with the same
 * processor: the result is a deterministic function of `prefix` and the row (the decoders call it
 * on rows whose prefixes are drafts that may be rejected, in any order and possibly more than
 * once per prefix). It may set logits to -infinity (a mask) but must leave at least one finite
 * logit and no NaN or +infinity (the verifiers throw std::domain_error on those). `prefix` is
 * valid during the call only. A processor with state of its own (a grammar's parser stack) keeps
 * what it needs keyed by the prefix; sampling_params holds the processor by value, so wrap one
 * that must not be copied in std::ref. An exception from it propagates out of the step, which is
 * abandoned as for a failed model call.
 *
 * Who applies it: the decoders, to each row of the target when a verifier first reads it (and
 * so to plain decoding, which runs the same pipeline; rows past a rejection are never
 * processed); the drafters that sample from rows of their own (model_drafter, medusa_drafter,
 * eagle_drafter), to those rows, where an exception derived from std::exception ends the draft
 * at that prefix instead of the step (detail::draft_row). Functions that take rows alone (warp,
 * sample, verify_rejection, verify_block, verify_tree) do not apply it: they are given rows
 * already processed (a verifier's row hook, verify/row_hook.hpp, is where the decoders do).
 */
using row_processor =
    std::function<void(std::span<const token_id> prefix, std::span<float> logits)>;

namespace detail {

/**
 * The prefixes given to a row processor, built in one buffer reused across rows and steps:
 * begin(history) once per step (O(history)), then the tokens a row follows after the history.
 * Grows to the longest prefix seen and keeps its storage (reserve() sizes it at the start of a
 * generation). Not thread-safe.
 */
class prefix_buffer {
 public:
  void reserve(std::size_t n) { tokens_.reserve(n); }

  /// The history every prefix of this step starts with.
  void begin(std::span<const token_id> history) {
    tokens_.assign(history.begin(), history.end());
    base_ = tokens_.size();
  }

  /// History + `tail` (a chain's drafts so far).
  std::span<const token_id> then(std::span<const token_id> tail) {
    tokens_.resize(base_);
    tokens_.insert(tokens_.end(), tail.begin(), tail.end());
    return tokens_;
  }

  /// History + one more token (a chain drafted token by token): O(1) amortised.
  void push(token_id t) { tokens_.push_back(t); }
  /// The prefix built so far.
  std::span<const token_id> view() const noexcept { return tokens_; }

  /**
   * History + the tokens on the path from the root's child to `node` in a tree given as tokens
   * and parents (parents[0] = -1, parents[i] < i): the root stands for the history's last token
   * and is not repeated. O(depth of node).
   */
  std::span<const token_id> then_path(std::span<const token_id> tokens,
                                      std::span<const std::int32_t> parents, std::size_t node) {
    return then_walk(
        node, [&](std::size_t at) { return tokens[at]; },
        [&](std::size_t at) { return parents[at]; });
  }

  /// then_path for a tree held any other way: token_of(i) and parent_of(i) give node i's token
  /// and parent (node 0 is the root). O(depth of node).
  template <class TokenOf, class ParentOf>
  std::span<const token_id> then_walk(std::size_t node, TokenOf&& token_of,
                                      ParentOf&& parent_of) {
    std::size_t depth = 0;
    for (std::size_t at = node; at != 0; at = static_cast<std::size_t>(parent_of(at))) ++depth;
    tokens_.resize(base_ + depth);
    std::size_t i = tokens_.size();
    for (std::size_t at = node; at != 0; at = static_cast<std::size_t>(parent_of(at)))
      tokens_[--i] = token_of(at);
    return tokens_;
  }

 private:
  std::vector<token_id> tokens_;
  std::size_t base_ = 0;
};

/**
 * The row a drafter samples from: `row` itself when there is no processor, else a copy of it in
 * `scratch` rewritten by `processor` for `prefix` (the drafter's own rows may be cached or read
 * again, so they are never processed in place). No allocation once `scratch` has held a row.
 */
inline std::span<const float> processed_row(const row_processor& processor,
                                            std::span<const token_id> prefix,
                                            std::span<const float> row,
                                            std::vector<float>& scratch) {
  if (!processor) return row;
  scratch.assign(row.begin(), row.end());
  processor(prefix, std::span<float>(scratch));
  return scratch;
}

/**
 * processed_row for a row a drafter drafts from: that row, or an empty span when the processor
 * throws a std::exception for this prefix (a dead end, such as a grammar that allows nothing
 * after it). The drafter then drafts nothing past the prefix: no verifier reads the target's
 * row for a prefix that was not drafted, except the history's own, where the processor runs
 * again and its error surfaces exactly as in plain decoding. Any other exception (an engine's
 * cancellation) propagates.
 */
inline std::span<const float> draft_row(const row_processor& processor,
                                        std::span<const token_id> prefix,
                                        std::span<const float> row, std::vector<float>& scratch) {
  try {
    return processed_row(processor, prefix, row, scratch);
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace detail

}  // namespace specdec
