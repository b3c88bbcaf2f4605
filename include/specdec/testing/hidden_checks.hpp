// specdec/testing/hidden_checks.hpp - conformance check (h) for HiddenStateModel adapters: the
// same prefix gives the same hidden row, batched or not, also after a truncate; the logits are
// unchanged by asking for hidden rows; a wrong hidden size is refused without changing the
// context; the optional prefill(tokens, hidden) gives append's rows and context; tree nodes' rows
// equal their paths' (HiddenStateTreeModel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "specdec/concepts/hidden_state_model.hpp"
#include "specdec/detail/conformance.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

namespace detail {
/// Appends `tokens` in one call asking for hidden rows; returns {logits, hidden}.
template <class M>
std::pair<std::vector<float>, std::vector<float>> append_hidden(M& m,
                                                                std::span<const token_id> tokens) {
  std::vector<float> logits(tokens.size() * m.vocab_size()),
      hidden(tokens.size() * m.hidden_size());
  m.append(tokens, std::span<float>(logits), std::span<float>(hidden));
  return {std::move(logits), std::move(hidden)};
}
}  // namespace detail

/// (h) Hidden rows: one append of the sequence asking for hidden rows gives the logits of a plain
/// append; appending the second half again after junk and a truncate, and token by token, gives
/// the same hidden rows (within tolerance); a hidden span of the wrong size throws and leaves
/// size() unchanged; with the optional prefill(tokens, hidden), prefilling the first half gives
/// its hidden rows and then the second half's logits and rows as one append; for tree models,
/// each node's row equals the row of its path appended alone.
template <class Source>
requires detail::model_source<Source> && HiddenStateModel<typename detail::model_of<Source>::type>
    check_result check_hidden_rows(Source& source, const conformance_options& o = {}) {
  return detail::run_check("hidden_rows", [&](check_result& r) {
    const auto ref = detail::reference(source, o);
    const std::span<const token_id> s(ref.seq);
    std::vector<float> hidden, logits;
    std::size_t d = 0;
    detail::with_fresh(source, [&](auto& m) {
      d = m.hidden_size();
      detail::expect(d > 0, "hidden_size() is 0");
      std::tie(logits, hidden) = detail::append_hidden(m, s);
    });
    detail::comparer same_logits(o.tolerance, ref.vocab, r.max_abs_diff, "plain append",
                                 "append with hidden rows");
    same_logits.rows(ref.logits, logits, s, 0, "asking for hidden rows changed the logits");
    detail::comparer cmp(o.tolerance, d, r.max_abs_diff, "hidden row (one append)", "got");
    const std::size_t h = s.size() / 2;
    detail::with_fresh(source, [&](auto& m) {
      detail::append(m, s.first(h));
      std::vector<token_id> junk(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(h));
      detail::append(m, junk);
      m.truncate(h);
      const auto again = detail::append_hidden(m, s.subspan(h)).second;
      cmp.rows(std::span<const float>(hidden).subspan(h * d), again, s.subspan(h), h,
               "hidden row after a truncate and a re-append differs");
      std::vector<float> wrong(d + 1), lrow(m.vocab_size());
      const std::size_t before = m.size();
      detail::expect_throws(
          [&] { m.append(s.first(1), std::span<float>(lrow), std::span<float>(wrong)); },
          "append with a hidden span of hidden_size() + 1 floats");
      detail::expect(m.size() == before, "a refused append changed size() from " +
                                             std::to_string(before) + " to " +
                                             std::to_string(m.size()));
    });
    detail::with_fresh(source, [&](auto& m) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const auto row = detail::append_hidden(m, s.subspan(i, 1)).second;
        cmp.rows(std::span<const float>(hidden).subspan(i * d, d), row, s.subspan(i, 1), i,
                 "hidden row appended token by token differs from one batched append");
      }
    });
    using model_type = typename detail::model_of<Source>::type;
    if constexpr (requires(model_type& m, std::span<const token_id> t, std::span<float> hr) {
                    m.prefill(t, hr);
                  }) {
      // The optional prefill(tokens, hidden): the hidden rows of an append, no logits, and the
      // context it leaves gives the logits and hidden rows an append would have left.
      detail::with_fresh(source, [&](auto& m) {
        std::vector<float> pre(h * d);
        m.prefill(s.first(h), std::span<float>(pre));
        detail::expect(m.size() == h, "prefill(tokens, hidden) of " + std::to_string(h) +
                                          " tokens left size() = " + std::to_string(m.size()));
        detail::comparer by_prefill(o.tolerance, d, r.max_abs_diff, "hidden row (one append)",
                                    "prefill(tokens, hidden)");
        by_prefill.rows(std::span<const float>(hidden).first(h * d), pre, s.first(h), 0,
                        "prefill's hidden row differs from append's");
        const auto [after_l, after_h] = detail::append_hidden(m, s.subspan(h));
        same_logits.rows(std::span<const float>(ref.logits).subspan(h * ref.vocab), after_l,
                         s.subspan(h), h, "logits after prefill(tokens, hidden) differ");
        cmp.rows(std::span<const float>(hidden).subspan(h * d), after_h, s.subspan(h), h,
                 "hidden row after prefill(tokens, hidden) differs");
      });
    }
    if constexpr (HiddenStateTreeModel<model_type>) {
      // A chain and a fork after the first half: node rows against the paths alone.
      const std::vector<token_id> tokens{s[h], s[(h + 1) % s.size()], s[(h + 2) % s.size()]};
      const std::vector<std::int32_t> parents{-1, 0, 0};
      std::vector<float> tree_hidden;
      detail::with_fresh(source, [&](auto& m) {
        detail::append(m, s.first(h));
        std::vector<float> l(tokens.size() * m.vocab_size());
        tree_hidden.resize(tokens.size() * d);
        m.append_tree(tokens, parents, std::span<float>(l), std::span<float>(tree_hidden));
        m.commit(std::span<const std::int32_t>());
      });
      for (std::size_t leaf : {std::size_t{1}, std::size_t{2}}) {
        detail::with_fresh(source, [&](auto& m) {
          detail::append(m, s.first(h));
          const std::vector<token_id> path{tokens[0], tokens[leaf]};
          const auto got = detail::append_hidden(m, path).second;
          cmp.rows(std::span<const float>(got).subspan(d, d),
                   std::span<const float>(tree_hidden).subspan(leaf * d, d),
                   std::span<const token_id>(path).subspan(1), h + 1,
                   "tree node " + std::to_string(leaf) + "'s hidden row differs from its path's");
        });
      }
    }
  });
}

}  // namespace specdec::testing
