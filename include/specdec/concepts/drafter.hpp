// specdec/concepts/drafter.hpp - what proposes draft tokens for the target to verify.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/math/prob_rows.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * A chain of draft tokens and the distributions they were drawn from.
 *
 * `q` has one row per token (row i is the full distribution tokens[i] was sampled from, after the
 * same warping as the target) or no rows at all, which means the draft is deterministic: each
 * token is its own one-hot proposal (n-gram lookup, greedy drafts). A verifier is lossless only
 * if `q` is truly the distribution the token was drawn from.
 *
 * Storage is kept across steps: clear() empties both members without freeing, and `q` is a
 * prob_rows, whose resize(k, V) reuses its memory, so a drafter that writes `out.q.resize(k, V)`
 * and pushes k tokens allocates nothing once a step of that size was seen. (`q` was a row_matrix;
 * prob_rows keeps the calls drafters make on it: rows(), cols(), data(), row(i), (i, j), resize,
 * conservativeResize, setConstant, assignment from an Eigen expression; matrix() gives an Eigen
 * map for anything else.)
 */
struct draft {
  std::vector<token_id> tokens;
  prob_rows q;

  bool deterministic() const noexcept { return q.rows() == 0; }
  std::size_t size() const noexcept { return tokens.size(); }
  /// No tokens and no q rows; keeps the storage of both. O(1).
  void clear() noexcept {
    tokens.clear();
    q.resize(0, q.cols());
  }
};

/**
 * Proposes up to k tokens to follow a history; never judges them.
 *
 * @code
 *   D& d; std::span<const token_id> history, committed; std::size_t k;
 *   const sampling_params& sp; rng& g; draft& out;
 *   d.propose(history, k, sp, g, out)   // out <- at most k tokens (0 = nothing worth verifying)
 *   d.accept(committed)                 // tokens that joined the history since the last propose
 *   d.reset()                           // forget everything: a new sequence starts
 * @endcode
 *
 * - `history` is the whole committed sequence (prompt + generated tokens), owned by the caller
 *   and valid during the call. After `accept(c)` the next history equals the previous one plus c.
 * - A stochastic drafter draws with `g` and fills `out.q`; a deterministic one leaves `out.q`
 *   with no rows. `sp` is the warping the target uses; model drafters must apply the same.
 * - `propose` with k == 0 returns an empty draft. An exception leaves the drafter usable
 *   (at worst it re-synchronises on the next call).
 * - `out` is the decoder's, reused every step: write it with clear(), tokens.push_back and
 *   q.resize(k, V) (all keep their storage), not by assigning new objects, and a warm step
 *   allocates nothing on the drafter's side (the decoder reserves room for k tokens first).
 * - Optional, `d.reserve(n)`: called at the first step of each generation with the longest
 *   history it can reach (prompt + max_new_tokens within the target's max_size), so that a
 *   drafter whose state grows with the history (ngram_drafter's index) sizes it once; a
 *   std::length_error from it is ignored.
 * - Optional, `d.rehearse(n)`: does the work of one drafting level of n nodes (a chain's level
 *   is one token) on placeholder inputs, changing nothing a later propose reads, so that
 *   calibrate(target, d) can time the drafting cost of a drafter without a draft model (the
 *   draft heads have it; a model drafter is timed through d.model() instead).
 * - Optional, read by the decoders' checks when a drafter joins: `d.vocab_size()` (must equal
 *   the target's), `d.model()` (the draft model: neither the target itself nor another part's),
 *   and `d.for_each_part(f)`, by which a drafter built of others (composed_drafter) calls
 *   f(part) for each part so that the checks reach every part, at any depth.
 */
template <class D>
concept Drafter = requires(D& d, std::span<const token_id> history, std::size_t k,
                           const sampling_params& sp, rng& g, draft& out,
                           std::span<const token_id> committed) {
  d.propose(history, k, sp, g, out);
  d.accept(committed);
  d.reset();
};

namespace detail {
/// One check per member, so that the message names the member that is missing or mistyped.
template <class D>
constexpr bool check_drafter() {
  static_assert(requires(D& d, std::span<const token_id> history, std::size_t k,
                         const sampling_params& sp, rng& g, draft& out) {
                  d.propose(history, k, sp, g, out);
                },
                "specdec: the drafter type does not model specdec::Drafter: it has no "
                "`propose(std::span<const token_id> history, std::size_t k, const "
                "sampling_params&, rng&, draft&)`; see specdec/concepts/drafter.hpp");
  static_assert(requires(D& d, std::span<const token_id> committed) { d.accept(committed); },
                "specdec: the drafter type does not model specdec::Drafter: it has no "
                "`accept(std::span<const token_id>)`; see specdec/concepts/drafter.hpp");
  static_assert(requires(D& d) { d.reset(); },
                "specdec: the drafter type does not model specdec::Drafter: it has no `reset()`; "
                "see specdec/concepts/drafter.hpp");
  return true;
}
/// A drafter that drafts with a model of its own (`d.model()`, as model_drafter) has one that
/// models LanguageModel; a drafter without one passes. The decoders require it, so that a
/// drafter over a broken model (reported by the drafter's own static_assert) is not used.
template <class D>
concept drafts_with_a_language_model =
    !requires(D& d) { d.model(); } ||
    LanguageModel<std::remove_cvref_t<decltype(std::declval<D&>().model())>>;
}  // namespace detail

}  // namespace specdec
