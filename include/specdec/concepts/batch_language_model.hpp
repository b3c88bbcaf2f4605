// specdec/concepts/batch_language_model.hpp - what specdec needs from an engine that serves many
// sequences: a ragged batch scored in one call.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/types.hpp"

namespace specdec {

/// A sequence of a batch model, as the model hands it out.
using sequence_id = std::uint64_t;

/**
 * One entry of a batched call: a sequence, the tokens to add after its context (a chain, or a
 * token tree when `parents` is not empty) and where its rows of logits go.
 */
struct batch_entry {
  sequence_id sequence = 0;
  std::span<const token_id> tokens;
  /// Empty: a chain, appended. Otherwise one parent per token, as TreeLanguageModel::append_tree
  /// takes them (-1 for a node that follows the context, else an earlier index).
  std::span<const std::int32_t> parents;
  std::span<float> logits;  ///< tokens.size() rows of vocab_size() logits, row-major
};

/**
 * An engine that holds many sequences (each with its own context, e.g. its KV cache) and scores a
 * ragged batch of them in one call.
 *
 * @code
 *   const M& cm; M& m; sequence_id id; std::span<const batch_entry> batch; std::size_t n;
 *   cm.vocab_size()         // -> std::size_t: V
 *   m.create_sequence()     // -> sequence_id: a new, empty sequence
 *   m.release_sequence(id)  // frees it; the id is unknown from then on
 *   cm.size(id)             // -> std::size_t: tokens in that sequence's context
 *   m.score(batch)          // one call for every entry
 *   m.truncate(id, n)       // that sequence keeps its first n tokens
 * @endcode
 *
 * Contract:
 * - `score(batch)`: every entry names a different live sequence. A chain entry does what
 *   LanguageModel::append does for that sequence alone: its context grows by the entry's tokens
 *   and row i of its logits is the next-token logits after the context and tokens[0..i]. A tree
 *   entry (parents not empty; only for models that also have `commit`, see
 *   BatchTreeLanguageModel) does what TreeLanguageModel::append_tree does and leaves the tree
 *   pending until `commit(id, path)`.
 * - Row independence: an entry's rows do not depend on the other entries of the call, nor on
 *   their order. The batch decoder's promise that each sequence decodes exactly as it would
 *   alone rests on this; floating-point results must be the same bits as scoring that entry
 *   alone (the testing kit's check_batch_rows_independent measures it).
 * - `truncate(id, n)` (n <= size(id)) is LanguageModel::truncate for that sequence; the others
 *   are not touched.
 * - `create_sequence()` throws (e.g. std::length_error) when no more sequences fit; an id is
 *   never handed out twice, so a released id stays unknown.
 * - Bad input throws and changes nothing in any sequence: an unknown or released id, a sequence
 *   twice in one call, an empty entry, a token outside [0, V), a wrong logits size, a context
 *   past max_size(), more rows than max_batch_tokens().
 * - Optional: `cm.max_size()` (the largest context of one sequence), `cm.max_batch_tokens()`
 *   (the most rows one call scores), `cm.max_sequences()` (the most live sequences). The batch
 *   decoder plans its steps within them.
 * - Optional: `cm.tokens(id)` -> std::span<const token_id>, the size(id) tokens sequence `id`
 *   holds, in order; sequence_view forwards it as tokens(), so a decoder on one sequence reuses a
 *   prompt prefix only as far as the sequence provably holds it (generate_options::reuse_prefix).
 * - Optional: `m.prefill(id, tokens)` (BatchPrefillLanguageModel) does what a chain entry
 *   {id, tokens} does to sequence `id` and writes no logits (LanguageModel's prefill for that
 *   sequence), within the same limits (at most max_batch_tokens() tokens, max_size()); bad input
 *   throws and changes nothing. sequence_view forwards it as prefill(tokens), in calls of at
 *   most max_batch_tokens() tokens, so the batch decoder's add() feeds a prompt without rows.
 *
 * specdec never calls a model from two threads at once.
 */
template <class M>
concept BatchLanguageModel =
    requires(M& m, const M& cm, sequence_id id, std::span<const batch_entry> batch, std::size_t n) {
      { cm.vocab_size() } -> std::convertible_to<std::size_t>;
      { m.create_sequence() } -> std::convertible_to<sequence_id>;
      m.release_sequence(id);
      { cm.size(id) } -> std::convertible_to<std::size_t>;
      m.score(batch);
      m.truncate(id, n);
    };

/**
 * A BatchLanguageModel whose entries may be token trees.
 *
 * @code
 *   M& m; sequence_id id; std::span<const std::int32_t> path;
 *   m.commit(id, path)   // TreeLanguageModel::commit for that sequence's pending tree
 * @endcode
 */
template <class M>
concept BatchTreeLanguageModel = BatchLanguageModel<M> &&
                                 requires(M& m, sequence_id id, std::span<const std::int32_t> path) {
                                   m.commit(id, path);
                                 };

/**
 * A BatchLanguageModel with the optional `prefill(id, tokens)`: a chain entry without logits.
 *
 * @code
 *   M& m; sequence_id id; std::span<const token_id> tokens;
 *   m.prefill(id, tokens)   // as score({{id, tokens, {}, logits}}), writing no logits
 * @endcode
 */
template <class M>
concept BatchPrefillLanguageModel =
    BatchLanguageModel<M> &&
    requires(M& m, sequence_id id, std::span<const token_id> tokens) { m.prefill(id, tokens); };

/// The most rows one call of `m` scores: m.max_batch_tokens() when it has one, else unbounded.
template <BatchLanguageModel M>
std::size_t max_batch_tokens_of(const M& m) {
  if constexpr (requires { { m.max_batch_tokens() } -> std::convertible_to<std::size_t>; }) {
    return static_cast<std::size_t>(m.max_batch_tokens());
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}

/// The most live sequences of `m`: m.max_sequences() when it has one, else unbounded.
template <BatchLanguageModel M>
std::size_t max_sequences_of(const M& m) {
  if constexpr (requires { { m.max_sequences() } -> std::convertible_to<std::size_t>; }) {
    return static_cast<std::size_t>(m.max_sequences());
  } else {
    return std::numeric_limits<std::size_t>::max();
  }
}

namespace detail {
/// Used by class templates to give one readable error instead of a wall of constraint notes:
/// one check per member, so that the message names the member that is missing or mistyped.
template <class M>
constexpr bool check_batch_language_model() {
  static_assert(requires(const M& cm) { { cm.vocab_size() } -> std::convertible_to<std::size_t>; },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`vocab_size() const` returning a std::size_t (missing, or not const?); see "
                "specdec/concepts/batch_language_model.hpp");
  static_assert(requires(M& m) { { m.create_sequence() } -> std::convertible_to<sequence_id>; },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`create_sequence()` returning a sequence_id; see "
                "specdec/concepts/batch_language_model.hpp");
  static_assert(requires(M& m, sequence_id id) { m.release_sequence(id); },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`release_sequence(sequence_id)`; see specdec/concepts/batch_language_model.hpp");
  static_assert(requires(const M& cm, sequence_id id) { { cm.size(id) } -> std::convertible_to<std::size_t>; },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`size(sequence_id) const` returning a std::size_t (missing, or not const?); see "
                "specdec/concepts/batch_language_model.hpp");
  static_assert(requires(M& m, std::span<const batch_entry> batch) { m.score(batch); },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`score(std::span<const batch_entry>)`; see "
                "specdec/concepts/batch_language_model.hpp");
  static_assert(requires(M& m, sequence_id id, std::size_t n) { m.truncate(id, n); },
                "specdec: the model type does not model specdec::BatchLanguageModel: it has no "
                "`truncate(sequence_id, std::size_t)`; see "
                "specdec/concepts/batch_language_model.hpp");
  return true;  // (a failed static_assert above is the one error)
}
}  // namespace detail

}  // namespace specdec
