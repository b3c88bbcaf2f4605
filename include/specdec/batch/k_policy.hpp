// specdec/batch/k_policy.hpp - how many tokens to draft per sequence in a batched step, from the
// engine's measured cost of a batched call and the acceptance the sequences measured so far.
//
// With S sequences drafting K tokens each, a step scores S (K + 1) rows in one call and emits
// S E[tokens | K]. While the call is memory-bound t_B(S (K + 1)) is close to t_B(S) and drafting
// pays; as S grows the call becomes compute-bound, t_B grows with its rows, and the best K falls
// to 0. The policy evaluates that trade with plan_chain on the per-sequence share of the call,
// t_B(S n) / S, so it is the same formula that plans one sequence's chain.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/stats.hpp"
#include "specdec/tree/tree_plan.hpp"

namespace specdec {

/// The cost curve and bounds of the per-step K policy. Off (no cap) while `target` is empty.
struct batch_k_policy {
  /// t_B(n): seconds of one batched call that scores n rows in all, over several sequences
  /// (n = 1.. ; target[0] unused), measured on the engine. Steps whose rows the curve does not
  /// cover are not planned (K falls to what it covers), so measure up to sequences x (K + 1).
  std::vector<double> target;
  double draft_per_token = 0.0;  ///< seconds to draft one token for one sequence
  std::size_t max_k = 8;         ///< never plan more than this (each sequence's own K still caps)
  /// Judged drafts at a position, pooled over the running sequences, before its acceptance
  /// counts; until position 0 has them the policy does not cap (it lets the sequences measure).
  std::size_t min_samples = 16;
  /// Every probe_every-th step drafts one position more than planned (0 = never), so that the
  /// acceptance beyond the plan keeps being measured: after a plan of K = 0 (plain decoding)
  /// nothing else would be, and a plan can only grow into positions with min_samples judged.
  std::size_t probe_every = 16;

  bool enabled() const noexcept { return !target.empty(); }
  /// Throws std::invalid_argument naming the field unless the curve is positive and finite from
  /// target[1] on and draft_per_token >= 0.
  void check(const std::string& who) const {
    if (!enabled()) return;
    step_cost_model{target, 0.0, draft_per_token}.check(who);
  }
};

/// What a step under the policy predicts.
struct k_choice {
  std::size_t k = std::numeric_limits<std::size_t>::max();  ///< the cap (max = no cap)
  double tokens_per_step = 1.0;  ///< per sequence: 1 + expected accepted drafts
  double seconds_per_step = 0.0;  ///< per sequence: its share of the call plus its drafting
};

/**
 * The draft length for the next step of `sequences` running sequences whose pooled statistics
 * (chains: offered_at_rank / accepted_at_rank at rank 0) are `pooled`: plan_chain on the
 * per-sequence cost t_B(S n) / S + n draft_per_token. No cap while the policy is off, nothing
 * is measured yet, or sequences is 0. O(max_k).
 */
inline k_choice choose_draft_length(const batch_k_policy& p, std::size_t sequences,
                                    const decode_stats& pooled) {
  k_choice c;
  if (!p.enabled() || sequences == 0) return c;
  const auto profile = acceptance_profile::from_stats(pooled, p.min_samples);
  if (profile.rate.empty()) return c;
  step_cost_model share;
  share.draft_per_node = p.draft_per_token;
  share.target.push_back(0.0);
  for (std::size_t n = 1; sequences * n < p.target.size(); ++n)
    share.target.push_back(p.target[sequences * n] / static_cast<double>(sequences));
  if (share.target.size() < 2) {
    c.k = 0;  // the curve does not even cover one row per sequence: plain decoding
    return c;
  }
  const tree_plan plan = plan_chain(profile, share, p.max_k);
  c.k = plan.branching.size();
  c.tokens_per_step = plan.tokens_per_step;
  c.seconds_per_step = plan.seconds_per_step;
  return c;
}

}  // namespace specdec
