// specdec/decode/verify_phase.hpp - phase 3 of a step: judge the drafts against the target's rows
// with the existing verifiers (verify_rejection, which is exact match when greedy; verify_block;
// verify_tree for trees) and keep the verdict: the accepted drafts and the target's own token.
// A row processor (sampling_params::processor) rewrites each row first, given its prefix.
#pragma once

#include <cstddef>
#include <span>

#include "specdec/decode/options.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/math/row_processor.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/rejection.hpp"

namespace specdec {

namespace detail {

/// Rewrites every row the target scored this step with s.options.sampling.processor, each given
/// the tokens it follows: the history, then (chain) the drafts before it or (tree) the path to
/// its node. Nothing when there is no processor. O(rows x (V + depth)) plus the processor's cost.
inline void process_target_rows(sequence_state& s) {
  const row_processor& processor = s.options.sampling.processor;
  if (!processor) return;
  const std::size_t v = s.vocab;
  s.prefixes.begin(s.history);
  if (s.tree_step) {
    const token_tree& tree = s.tree.tree;
    for (std::size_t node = 0; node < tree.size(); ++node)
      processor(s.prefixes.then_path(tree.tokens(), tree.parents(), node),
                std::span<float>(s.logits.data() + node * v, v));
  } else {
    const std::span<const token_id> drafts(s.chain.tokens.data(), s.positions);
    const std::span<const token_id> all = s.prefixes.then(drafts);
    for (std::size_t i = 0; i <= s.positions; ++i)
      processor(all.first(s.history.size() + i), std::span<float>(s.logits.data() + i * v, v));
  }
}

}  // namespace detail

/// Fills s.accepted and s.next (and s.path for a tree) from s.logits, after the row processor
/// (if any) has rewritten them in place. Throws what the processor throws, or what the verifier
/// throws (std::domain_error for NaN or +inf logits); the caller then abandons the step
/// (commit_phase.hpp's abandon_step).
inline void verify_phase(sequence_state& s) {
  const auto t0 = detail::decode_clock::now();
  detail::process_target_rows(s);
  const auto v = static_cast<Eigen::Index>(s.vocab);
  if (s.tree_step) {
    const token_tree& tree = s.tree.tree;
    const bool sampled_q = s.tree.draw != candidate_draw::deterministic;
    const logits_view rows(s.logits.data(), static_cast<Eigen::Index>(tree.size()), v);
    const logits_view q(s.tree.q.data(), sampled_q ? s.tree.q.rows() : 0, v);
    verify_tree(tree, rows, q, s.tree.draw, s.options.sampling, s.gen, s.tree_verify_ws,
                s.tree_verdict);
    s.path.assign(1, 0);
    s.path.insert(s.path.end(), s.tree_verdict.accepted.begin(), s.tree_verdict.accepted.end());
    s.accepted.clear();
    for (std::int32_t node : s.tree_verdict.accepted)
      s.accepted.push_back(tree.token(static_cast<std::size_t>(node)));
    s.next = s.tree_verdict.next;
  } else {
    const std::size_t n = s.positions;
    const logits_view rows(s.logits.data(), static_cast<Eigen::Index>(n + 1), v);
    const std::span<const token_id> drafts(s.chain.tokens.data(), n);
    const logits_view q(s.chain.q.data(),
                        s.chain.deterministic() ? 0 : static_cast<Eigen::Index>(n), v);
    // Exact-match verification when greedy (verify_rejection delegates to verify_greedy).
    const verify_result verdict =
        s.options.verification == chain_verification::block
            ? verify_block(rows, drafts, q, s.options.sampling, s.gen, s.block_ws)
            : verify_rejection(rows, drafts, q, s.options.sampling, s.gen, s.verify_ws);
    s.accepted.assign(s.chain.tokens.begin(),
                      s.chain.tokens.begin() + static_cast<std::ptrdiff_t>(verdict.accepted));
    s.next = verdict.next;
  }
  s.verify_seconds = detail::seconds_between(t0, detail::decode_clock::now());
}

}  // namespace specdec
