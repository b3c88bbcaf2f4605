// specdec/verify/greedy.hpp - exact-match verification for a greedy (temperature 0) target.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/math/sample.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/draw_match.hpp"
#include "specdec/verify/row_hook.hpp"
#include "specdec/verify/result.hpp"

namespace specdec {

/**
 * Greedy verification. `target` has drafts.size() + 1 rows of logits (row i: the target's
 * logits after the context and drafts[0..i)). Accepts the longest prefix of drafts equal to the
 * row-wise argmax (ties to the lowest id) and returns the argmax after it. Reads only the rows
 * it needs: O((accepted + 1) * V), calling `on_read(i)` before it reads row i (row_hook.hpp).
 * Throws std::domain_error on NaN in a row it reads.
 */
template <class RowHook = no_row_hook>
verify_result verify_greedy(logits_view target, std::span<const token_id> drafts,
                            RowHook&& on_read = {}) {
  if (static_cast<std::size_t>(target.rows()) != drafts.size() + 1)
    throw std::invalid_argument("verify_greedy: target must have drafts.size() + 1 rows, has " +
                                std::to_string(target.rows()));
  return detail::match_draws(
      target, drafts, [](std::size_t, std::span<const float> row) { return argmax(row); },
      on_read);
}

}  // namespace specdec
