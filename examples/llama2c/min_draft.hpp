// llama2c/min_draft.hpp - --draft-min: drafts shorter than a minimum are not verified.
//
// llama.cpp's --draft-min (speculative.n_min) discards a draft with fewer tokens than the minimum
// and decodes one token plainly instead: a target call for a 1-token draft costs t(2) for at most
// 2 tokens, which on some engines is worse than t(1) for one. This wrapper does the same for any
// specdec::Drafter, in front of the decoder: it forwards propose() and empties a proposal that is
// too short (the decoder then does one plain step). Model drafters always propose K tokens away
// from the end of the context, so it matters for prompt lookup, whose matches vary in length.
#pragma once

#include <cstddef>
#include <span>
#include <specdec/concepts/drafter.hpp>
#include <specdec/concepts/tree_drafter.hpp>

namespace specdec::llama2c {

/// A Drafter that proposes what `Inner` proposes, or nothing when that is fewer than
/// `min_length` tokens. Holds a reference: `inner` must outlive it. Trees pass through
/// unchanged (the CLI refuses --draft-min with trees). Thread-safety: as Inner.
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
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params& sp, rng& g, candidate_draw draw,
                    tree_draft& out) requires TreeDrafter<Inner> {
    inner_.propose_tree(history, branching, sp, g, draw, out);
  }

  // The optional members the decoder looks for, forwarded when Inner has them.
  auto vocab_size() const requires requires(const Inner& i) { i.vocab_size(); }
  { return inner_.vocab_size(); }
  decltype(auto) model() const requires requires(Inner& i) { i.model(); }
  { return inner_.model(); }
  std::size_t model_calls() const requires requires(const Inner& i) { i.model_calls(); }
  { return inner_.model_calls(); }
  /// The decoder's drafter checks reach Inner and, through it, any parts Inner has.
  template <class F>
  void for_each_part(F&& f) {
    f(inner_);
  }

  /// Proposals of 1..min_length - 1 tokens that were emptied so far (empty ones not counted).
  std::size_t dropped() const noexcept { return dropped_; }

 private:
  Inner& inner_;
  std::size_t min_;
  std::size_t dropped_ = 0;
};

}  // namespace specdec::llama2c
