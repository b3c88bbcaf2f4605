// specdec/concepts/drafter.hpp - what proposes draft tokens for the target to verify.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

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
 */
struct draft {
  std::vector<token_id> tokens;
  row_matrix q;

  bool deterministic() const noexcept { return q.rows() == 0; }
  std::size_t size() const noexcept { return tokens.size(); }
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
template <class D>
constexpr bool check_drafter() {
  static_assert(Drafter<D>,
                "specdec: the drafter type does not model specdec::Drafter. It needs "
                "propose(history, k, sampling_params, rng&, draft&), accept(tokens) and reset(); "
                "see specdec/concepts/drafter.hpp");
  return true;
}
}  // namespace detail

}  // namespace specdec
