// specdec/draft/no_drafter.hpp - the drafter that never drafts: plain autoregressive decoding.
#pragma once

#include <cstddef>
#include <span>

#include "specdec/concepts/drafter.hpp"

namespace specdec {

/// Proposes nothing, so a speculative_decoder using it decodes one token per target call.
struct no_drafter {
  void propose(std::span<const token_id>, std::size_t, const sampling_params&, rng&,
               draft& out) noexcept {
    out.clear();
  }
  void accept(std::span<const token_id>) noexcept {}
  void reset() noexcept {}
};

}  // namespace specdec
