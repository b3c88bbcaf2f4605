// specdec/verify/result.hpp - what a chain verifier decides.
#pragma once

#include <cstddef>

#include "specdec/types.hpp"

namespace specdec {

/// The verdict on a chain of drafts: the first `accepted` drafts are kept, then `next`, the
/// target's own token (a correction after a rejection, or the bonus token when all were
/// accepted). A verification step therefore always yields accepted + 1 tokens.
struct verify_result {
  std::size_t accepted = 0;
  token_id next = 0;
};

}  // namespace specdec
