// specdec/verify/row_hook.hpp - what a verifier calls before it reads a row of the target's
// logits, so that a caller can prepare rows only when they are read (the decoders apply the row
// processor there: a row no verifier reads is never processed).
#pragma once

#include <cstddef>

namespace specdec {

/**
 * The default row hook of the verifiers: does nothing. A row hook is any callable
 * `void(std::size_t row)`; verify_greedy, verify_rejection, verify_block and verify_tree call it
 * with a row's index just before they first read that row of `target`, at most once per row and
 * never for a row they do not read (a chain's rows past the first rejection, a tree's nodes off
 * the accepted path). It may rewrite that row in place (the view is read after it returns); an
 * exception from it propagates out of the verifier.
 */
struct no_row_hook {
  constexpr void operator()(std::size_t /*row*/) const noexcept {}
};

}  // namespace specdec
