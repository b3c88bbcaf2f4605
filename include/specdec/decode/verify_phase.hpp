// specdec/decode/verify_phase.hpp - phase 3 of a step: judge the drafts against the target's rows
// with the existing verifiers (verify_rejection, which is exact match when greedy; verify_block;
// verify_tree for trees) and keep the verdict: the accepted drafts and the target's own token.
// A row processor (sampling_params::processor) rewrites each row the verifier reads, given its
// prefix, just before it is read.
#pragma once

#include <cstddef>
#include <span>

#include "specdec/decode/options.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/math/row_processor.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/coupled.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/rejection.hpp"

namespace specdec {

namespace detail {

/**
 * The verifiers' row hook of a step of s: rewrites row i (a chain's position i, a tree's node
 * i) with s.options.sampling.processor, given the tokens it follows (the history, then the
 * drafts before it or the path to its node), when the verifier first reads it. Rows no verifier
 * reads are never processed, so a processor that fails on a prefix only a rejected draft
 * reaches fails nothing. O(V + depth) per row read, plus the processor's cost.
 */
class process_on_read {
 public:
  explicit process_on_read(sequence_state& s) : s_(s) {
    if (s.options.sampling.processor) s.prefixes.begin(s.history);  // O(history), once a step
  }
  void operator()(std::size_t i) {
    const row_processor& processor = s_.options.sampling.processor;
    if (!processor) return;
    const std::size_t v = s_.vocab;
    const std::span<float> row(s_.logits.data() + i * v, v);
    if (s_.tree_step) {
      const token_tree& tree = s_.tree.tree;
      processor(s_.prefixes.then_path(tree.tokens(), tree.parents(), i), row);
    } else {
      const std::span<const token_id> drafts(s_.chain.tokens.data(), i);
      processor(s_.prefixes.then(drafts), row);
    }
  }

 private:
  sequence_state& s_;
};

}  // namespace detail

/**
 * Fills s.accepted and s.next (and s.path for a tree) from s.logits; the row processor (if any)
 * rewrites each row in place when the verifier first reads it (rows it never reads stay as the
 * target wrote them). s must expect the verify phase (after draft_phase, and the rows written);
 * it then expects commit_phase. Throws std::logic_error out of order (nothing changes); what the
 * processor throws, or what the verifier throws (std::domain_error for NaN or +inf logits), after
 * which s expects abandon_step (commit_phase.hpp's neighbour decode/abandon.hpp).
 */
inline void verify_phase(sequence_state& s) {
  s.require_phase(step_phase::verify, "verify_phase");
  s.expects = step_phase::abandon;  // until the verdict is complete
  const auto t0 = detail::decode_clock::now();
  detail::process_on_read on_read(s);
  const auto v = static_cast<Eigen::Index>(s.vocab);
  if (s.tree_step) {
    const token_tree& tree = s.tree.tree;
    const bool sampled_q = s.tree.draw != candidate_draw::deterministic;
    const logits_view rows(s.logits.data(), static_cast<Eigen::Index>(tree.size()), v);
    const logits_view q(s.tree.q.data(), sampled_q ? s.tree.q.rows() : 0, v);
    if (s.options.verification == verification_rule::coupled)
      verify_tree_coupled(tree, rows, s.options.sampling, s.history_before, s.coupled_ws,
                          s.tree_verdict, on_read);
    else if (s.options.verification == verification_rule::sample_match)
      verify_tree_sample_match(tree, rows, s.options.sampling, s.gen, s.coupled_ws,
                               s.tree_verdict, on_read);
    else
      verify_tree(tree, rows, q, s.tree.draw, s.options.sampling, s.gen, s.tree_verify_ws,
                  s.tree_verdict, on_read);
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
    verify_result verdict;
    switch (s.options.verification) {
      case verification_rule::block:
        verdict = verify_block(rows, drafts, q, s.options.sampling, s.gen, s.block_ws, on_read);
        break;
      case verification_rule::coupled:  // row i draws the token at history index before + i
        verdict = verify_coupled(rows, drafts, s.options.sampling, s.history_before,
                                 s.coupled_ws, on_read);
        break;
      case verification_rule::sample_match:
        verdict = verify_sample_match(rows, drafts, s.options.sampling, s.gen, s.coupled_ws,
                                      on_read);
        break;
      default:
        verdict = verify_rejection(rows, drafts, q, s.options.sampling, s.gen, s.verify_ws,
                                   on_read);
    }
    s.accepted.assign(s.chain.tokens.begin(),
                      s.chain.tokens.begin() + static_cast<std::ptrdiff_t>(verdict.accepted));
    s.next = verdict.next;
  }
  s.verify_seconds = detail::seconds_between(t0, detail::decode_clock::now());
  s.expects = step_phase::commit;
}

}  // namespace specdec
