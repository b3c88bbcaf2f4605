// specdec/draft/min_length_drafter.hpp - a minimum draft length: a proposal shorter than the
// minimum is not verified (the decoder takes one plain step instead).
#pragma once

#include <cstddef>
#include <span>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * A Drafter that proposes what `Inner` proposes, or nothing when that is 1 to min_length - 1
 * tokens (llama.cpp's --draft-min, speculative.n_min). A target call for a 1-token draft costs
 * t(2) for at most 2 tokens, which on engines whose t(2) is well above t(1) loses to a plain
 * step; dropping short drafts keeps those steps plain. It matters for drafters whose proposals
 * vary in length (prompt lookup, a model drafter with model_drafter_options::p_min); min_length
 * 0 or 1 changes nothing. Lossless: the decision reads only the draft.
 *
 * Trees pass through unchanged. The optional Drafter members the decoders and calibrate look
 * for (vocab_size, model, model_calls, rehearse) are forwarded when Inner has them, and
 * for_each_part shows Inner to the decoders' drafter checks. Holds a reference: `inner` must outlive it.
 * Allocates nothing of its own. Thread-safety: as Inner.
 */
template <class Inner>
class min_length_drafter {
 public:
  min_length_drafter(Inner& inner, std::size_t min_length) : inner_(inner), min_(min_length) {}

  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp, rng& g,
               draft& out) {
    inner_.propose(history, k, sp, g, out);
    if (!out.tokens.empty() && out.size() < min_) {
      out.clear();
      ++dropped_;
    }
  }
  void accept(std::span<const token_id> committed) { inner_.accept(committed); }
  void reset() { inner_.reset(); }
  /// TreeDrafter when Inner is one: Inner's tree, unchanged.
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params& sp, rng& g, candidate_draw draw, tree_draft& out)
    requires TreeDrafter<Inner>
  {
    inner_.propose_tree(history, branching, sp, g, draw, out);
  }

  auto vocab_size() const
    requires requires(const Inner& i) { i.vocab_size(); }
  {
    return inner_.vocab_size();
  }
  decltype(auto) model() const
    requires requires(Inner& i) { i.model(); }
  {
    return inner_.model();
  }
  /// Drafter's optional reserve, forwarded when Inner has it.
  void reserve(std::size_t n)
    requires requires(Inner& i) { i.reserve(n); }
  {
    inner_.reserve(n);
  }
  /// Drafter's optional rehearse (calibrate's drafting cost), forwarded when Inner has it.
  void rehearse(std::size_t n)
    requires requires(Inner& i) { i.rehearse(n); }
  {
    inner_.rehearse(n);
  }
  std::size_t model_calls() const
    requires requires(const Inner& i) { i.model_calls(); }
  {
    return inner_.model_calls();
  }
  /// The decoders' drafter checks reach Inner and, through it, any parts Inner has.
  template <class F>
  void for_each_part(F&& f) {
    f(inner_);
  }

  std::size_t min_length() const noexcept { return min_; }
  /// Proposals of 1..min_length - 1 tokens emptied so far (empty proposals are not counted).
  std::size_t dropped() const noexcept { return dropped_; }

 private:
  Inner& inner_;
  std::size_t min_;
  std::size_t dropped_ = 0;
};

}  // namespace specdec
