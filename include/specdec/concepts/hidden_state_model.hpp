// specdec/concepts/hidden_state_model.hpp - a model that can also hand out its last hidden states
// (the classifier's input), for drafters that run on them (Medusa heads, EAGLE-style drafters).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * A LanguageModel whose append can also write each position's last hidden state: the vector the
 * classifier turns into logits (after the final norm), hidden_size() floats per position.
 *
 * @code
 *   const M& cm; M& m; std::span<const token_id> tokens; std::span<float> logits, hidden;
 *   cm.hidden_size()                    // -> std::size_t: d, floats per hidden row
 *   m.append(tokens, logits, hidden)    // as append(tokens, logits), plus n rows of d floats
 *   m.prefill(tokens, hidden)           // optional: the same without logits
 * @endcode
 *
 * Contract:
 * - `append(tokens, logits, hidden)` is `append(tokens, logits)` (same logits, same context
 *   afterwards) that also writes n rows of d floats, row-major, into `hidden`
 *   (`hidden.size() == n * d`): row i is the classifier's input at the position of tokens[i],
 *   so that logits row i = classifier x hidden row i. It costs no extra model call.
 * - The same prefix gives the same hidden row (within the model's batched-vs-single tolerance),
 *   also after a truncate: nothing of dropped tokens may remain in it.
 * - Bad input (also a wrong `hidden` size) throws and leaves the context unchanged.
 * - Optional: `m.prefill(tokens, hidden)` is `append(tokens, logits, hidden)` writing no logits
 *   (the hidden rows and the context afterwards are the same). hidden_capture's prefill uses it
 *   when it exists, else appends in bounded chunks (see specdec::prefill).
 */
template <class M>
concept HiddenStateModel =
    LanguageModel<M> && requires(M& m, const M& cm, std::span<const token_id> tokens,
                                 std::span<float> logits, std::span<float> hidden) {
      { cm.hidden_size() } -> std::convertible_to<std::size_t>;
      m.append(tokens, logits, hidden);
    };

/**
 * A HiddenStateModel and TreeLanguageModel whose tree evaluation also writes the hidden rows.
 *
 * @code
 *   M& m; std::span<const token_id> tokens; std::span<const std::int32_t> parents;
 *   std::span<float> logits, hidden;
 *   m.append_tree(tokens, parents, logits, hidden)   // + one hidden row per node
 * @endcode
 *
 * `append_tree(tokens, parents, logits, hidden)` is `append_tree(tokens, parents, logits)` that
 * also writes node i's hidden row into row i of `hidden` (n x d).
 */
template <class M>
concept HiddenStateTreeModel =
    HiddenStateModel<M> && TreeLanguageModel<M> &&
    requires(M& m, std::span<const token_id> tokens, std::span<const std::int32_t> parents,
             std::span<float> logits, std::span<float> hidden) {
      m.append_tree(tokens, parents, logits, hidden);
    };

namespace detail {
template <class M>
constexpr bool check_hidden_state_model() {
  static_assert(HiddenStateModel<M>,
                "specdec: the model type does not model specdec::HiddenStateModel, which draft "
                "heads need. Besides LanguageModel it needs hidden_size() const and "
                "append(std::span<const token_id>, std::span<float> logits, std::span<float> "
                "hidden) writing each position's last hidden state; see "
                "specdec/concepts/hidden_state_model.hpp");
  return true;
}
}  // namespace detail

}  // namespace specdec
