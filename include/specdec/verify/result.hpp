// specdec/verify/result.hpp - what a chain verifier and a tree verifier decide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "specdec/types.hpp"

namespace specdec {

/// The verdict on a chain of drafts: the first `accepted` drafts are kept, then `next`, the
/// target's own token (a correction after a rejection, or the bonus token when all were
/// accepted). A verification step therefore always yields accepted + 1 tokens.
struct verify_result {
  std::size_t accepted = 0;
  token_id next = 0;
};

/// The verdict on a tree. `accepted` lists the accepted nodes from the root's child downwards
/// (each a child of the previous one; the root itself is not listed), then `next` is the target's
/// own token: a correction drawn from the residual at the node where verification stopped, or the
/// bonus token when it reached a node without children. A step therefore emits
/// accepted.size() + 1 tokens; the path to commit is {0, accepted...}.
struct tree_verify_result {
  std::vector<std::int32_t> accepted;
  token_id next = 0;

  /// The node `next` follows: the last accepted node, or the root (0). O(1).
  std::int32_t stop_node() const noexcept { return accepted.empty() ? 0 : accepted.back(); }
};

}  // namespace specdec
