// specdec/decode/options.hpp - what a generation is asked to do (generate_options), what it
// returns, and the check of both at the entry.
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/math/sampling_params.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// How sampled drafts are verified, chains and trees (greedy decoding is exact match whatever the
/// rule). token and block verify a chain (a tree: multi-candidate speculative sampling); coupled
/// and sample_match verify both.
enum class verification_rule {
  token,  ///< token by token (verify_rejection): each draft on its own p(x) / q(x)
  block,  ///< the block jointly (verify_block): never fewer tokens per step, same distribution
  /// Coupled sampling (verify/coupled.hpp): every position is drawn as plain decoding in this
  /// mode draws it, with noise keyed by (seed, position, token), and a draft is kept while it
  /// equals that draw; drafters draw with the same noise. The tokens are then a function of the
  /// seed, the prompt and the rows alone: plain decoding's with the same options, whatever the
  /// drafter, K, tree, batch or plan. Applies to chains and trees.
  coupled,
  /// Sample-and-match, llama.cpp's rule, kept as the baseline coupled is measured against: the
  /// target samples each position with the generator, a draft is kept while it equals that
  /// sample, and drafters propose their most likely tokens (draft_temperature 0 unless set).
  /// Exact, but a draft is kept only with probability p(draft). Chains and trees.
  sample_match,
};

/// The name verification_rule had before it was named for all it chooses (chains and trees);
/// kept for one release.
using chain_verification [[deprecated("renamed specdec::verification_rule")]] = verification_rule;

/// The rule's name as the command lines spell it: "token", "block", "coupled", "sample-match".
constexpr const char* to_string(verification_rule v) noexcept {
  switch (v) {
    case verification_rule::token: return "token";
    case verification_rule::block: return "block";
    case verification_rule::coupled: return "coupled";
    case verification_rule::sample_match: return "sample-match";
  }
  return "unknown";
}

namespace detail {
template <class>
inline constexpr bool renamed_always_false = false;
/// The former field generate_options::replan: empty, and any assignment from it or to it fails
/// to compile with the new name (member access fails naming this type, which says it too).
struct replan_is_now_policy {
  template <class T>
  replan_is_now_policy& operator=(T&&) {
    static_assert(renamed_always_false<T>,
                  "generate_options::replan was renamed generate_options::policy");
    return *this;
  }
};
}  // namespace detail

/// Options of one generation. Validated by generate()/start() (validate_options); the error
/// names the field.
struct generate_options {
  std::size_t max_new_tokens = 128;   ///< stop after this many generated tokens (>= 1)
  std::vector<token_id> stop_tokens;  ///< stop after emitting any of these (it is returned)
  std::size_t draft_length = 4;       ///< K, draft tokens per step; 0 = plain decoding
  sampling_params sampling;           ///< warping + seed, same for target and draft
  /// The temperature drafters sample at while the target samples (unset: the target's). The
  /// verifiers judge each draft against the q it was really drawn from, so any value is exactly
  /// lossless; it only moves acceptance, sum_x min(p(x), q(x)). 0 = drafters propose their
  /// most likely tokens (deterministic drafts, accepted with probability p(x)). The rest of
  /// `sampling` (top-k, top-p, min-p, the processor) still applies to the draft. Unused when
  /// the target is greedy (drafts are then its argmax guesses anyway).
  std::optional<float> draft_temperature;
  /// Called with each emitted token, in order, as soon as it is verified; return false to stop.
  std::function<bool(token_id)> on_token;
  /// Multi-candidate decoding: a token tree of branching k1 x k2 x ... per step (empty = one
  /// chain of draft_length tokens). Needs a TreeDrafter; draft_length is then unused.
  std::vector<std::size_t> tree;
  /// How a sampling tree drafter draws each node's candidates: iid (MCSD Algorithm 1) or
  /// without_replacement (Algorithm 2). Greedy and n-gram drafts are deterministic regardless.
  candidate_draw tree_draw = candidate_draw::iid;
  /// Verification: token-wise or block (a chain; a tree is verified by multi-candidate
  /// speculative sampling), or coupled (chains and trees; the tokens are plain decoding's in
  /// that mode, token for token). All are lossless. Plain decoding samples by the same rule.
  verification_rule verification = verification_rule::token;
  /// The planning policy: every `policy.every` steps (0 = never), and at the start of each
  /// generation once something was measured, the decoder replaces the shape in force
  /// (draft_length, or tree) with plan_tree's choice for `policy.cost` and the acceptance by
  /// depth and rank it has measured over all its re-planning generations (a decoder serving
  /// similar requests learns once). Chains only when the drafter cannot draft trees, with block
  /// verification, or with chains_only.
  /// - Without `explore`, the shape given above is the first one, so start wide enough to
  ///   measure what a plan may use: a plan never goes past measured depths and ranks, each
  ///   needing min_samples judged candidates, and until depth 0 has them the shape stays. A plan
  ///   of plain decoding measures nothing more, so it stays until forget_measurements().
  /// - With `explore` (the speed policy, see speed_policy()), the first step of every
  ///   generation is planned too, each plan reads acceptance_profile::optimistic (the counts
  ///   plus `optimism` pseudo-samples of the most a cell could be, one depth and one rank past
  ///   the evidence), and the counts halve every `half_life` steps: a plan can grow one
  ///   position deeper than measured, and a plan of K = 0 is probed again once its evidence has
  ///   faded, only where drafting could pay. Needs every >= 1.
  /// Every plan reads committed steps only, so each step stays lossless; no clock is read, so
  /// the same seed and cost give the same tokens.
  struct policy_options {
    std::size_t every = 0;
    step_cost_model cost;  ///< the target's t(n) (cost.target[n]) and the drafting costs
    std::size_t max_nodes = 32;
    std::size_t max_depth = 8;
    std::size_t min_samples = 16;  ///< judged candidates a (depth, rank) needs (not with explore)
    bool chains_only = false;
    bool explore = false;         ///< the speed policy (above)
    double optimism = 1.0;        ///< explore: pseudo-samples per cell (> 0, finite)
    /// explore: the acceptance expected before any is measured (rate[d][r], each in [0, 1],
    /// each depth's sum at most 1), for instance expected_acceptance(heads) for draft heads:
    /// the first plans start from it instead of climbing one depth per step, and measurements
    /// take over as they come (acceptance_profile::optimistic). Empty = none.
    acceptance_profile expected;
    double expected_samples = 8.0;  ///< explore: pseudo-samples `expected` counts per cell (> 0)
    std::size_t half_life = 256;  ///< explore: steps per halving of the counts (0 = never)
    /// A plan that drafts replaces plain decoding only when its predicted tokens per second
    /// exceed plain decoding's, 1 / cost.target[1], by at least this fraction (>= 0, finite):
    /// the margin that keeps probes and calibration noise from costing more than a marginal
    /// shape could gain. speed_policy() sets 0.1.
    double min_gain = 0.0;
  } policy;
  /// Former names, kept one release so that old code fails with a message that says what to
  /// write: the type alias is deprecated, and any use of the field is a compile error naming
  /// `policy` (a data member of an aggregate cannot be a deprecated alias without every copy of
  /// the options warning). Takes no space.
  using replan_options [[deprecated("renamed generate_options::policy_options")]] =
      policy_options;
  [[no_unique_address]] detail::replan_is_now_policy replan;
  /// Keep the part of the target's context that the new prompt starts with (multi-turn chat,
  /// continuing a generation) instead of feeding the whole prompt again. Off by default: every
  /// prompt is fed whole. On, what is kept depends on what the target can tell:
  /// - a target with the optional member `tokens()` (-> std::span<const token_id>, the size()
  ///   tokens its context holds, in order) has them compared with the prompt, so the prefix kept
  ///   is exactly right whoever used the target in between;
  /// - any other target is trusted: the prefix the prompt shares with this decoder's last
  ///   history is kept whenever the target's size is what the decoder left, so turn this on only
  ///   when nothing else uses the target between generations (or changes it without changing
  ///   its size), else the output is silently wrong.
  bool reuse_prefix = false;
};

/// Why a generation ended.
enum class stop_reason {
  max_new_tokens,  ///< it generated max_new_tokens
  stop_token,      ///< it emitted one of stop_tokens (which is returned)
  callback,        ///< the caller ended it: on_token returned false or threw, or a start() that
                   ///< refused its arguments ended it mid-way
  context_full,    ///< the target's context reached its max_size
};

/// The reason's name: "max_new_tokens", "stop_token", "callback", "context_full".
constexpr const char* to_string(stop_reason r) noexcept {
  switch (r) {
    case stop_reason::max_new_tokens: return "max_new_tokens";
    case stop_reason::stop_token: return "stop_token";
    case stop_reason::callback: return "callback";
    case stop_reason::context_full: return "context_full";
  }
  return "unknown";
}

/// The tokens a generation produced (prompt excluded) and how it went.
struct generate_result {
  std::vector<token_id> tokens;
  decode_stats stats;
  stop_reason reason = stop_reason::max_new_tokens;
};

/// The tokens one step emitted (a view into the decoder's history, valid until the next call).
struct step_result {
  std::span<const token_id> tokens;
  std::size_t drafted = 0;
  std::size_t accepted = 0;
  bool done = false;
};

/// Whether a re-planning of a generation with options `o` may plan a tree: it re-plans
/// (policy.every > 0), not chains_only, not block verification, and the pipeline can run a tree
/// (`can_tree`, see trees_possible). O(1).
inline bool replan_may_tree(const generate_options& o, bool can_tree) noexcept {
  return can_tree && o.policy.every > 0 && !o.policy.chains_only &&
         o.verification != verification_rule::block;
}

/**
 * Whether a step of a generation with options `o` may be a tree: the pipeline can run one
 * (`can_tree`: a TreeDrafter, and a model that scores trees; the single-sequence decoder scores
 * them on any model, the batch decoder on a BatchTreeLanguageModel) and the options ask for one
 * (o.tree) or a re-planning may plan one (replan_may_tree). The one predicate that validation
 * and re-planning read. O(1).
 */
inline bool trees_possible(const generate_options& o, bool can_tree) noexcept {
  return can_tree && (!o.tree.empty() || replan_may_tree(o, can_tree));
}

/**
 * Checks a prompt and options before anything runs: the prompt is non-empty, inside [0, vocab)
 * and at most max_size tokens; every option in range (trees only where the pipeline can run them,
 * `can_tree`; block verification only for chains; a positive finite re-planning cost curve), and
 * what a re-planned shape may later use (tree_draw, whenever trees_possible). Throws
 * std::invalid_argument naming the field and the value.
 */
inline void validate_options(std::span<const token_id> prompt, const generate_options& o,
                             std::size_t v, std::size_t cap, bool can_tree) {
  if (prompt.empty()) throw std::invalid_argument("prompt: must not be empty");
  for (std::size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= v)
      throw std::invalid_argument("prompt[" + std::to_string(i) +
                                  "] = " + std::to_string(prompt[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(v) + ")");
  if (prompt.size() > cap)
    throw std::invalid_argument("prompt: " + std::to_string(prompt.size()) +
                                " tokens exceed the target's max_size " + std::to_string(cap));
  if (o.max_new_tokens == 0)
    throw std::invalid_argument("generate_options.max_new_tokens: must be >= 1");
  for (std::size_t i = 0; i < o.stop_tokens.size(); ++i)
    if (o.stop_tokens[i] < 0 || static_cast<std::size_t>(o.stop_tokens[i]) >= v)
      throw std::invalid_argument("generate_options.stop_tokens[" + std::to_string(i) +
                                  "] = " + std::to_string(o.stop_tokens[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(v) + ")");
  o.sampling.validate();
  if (o.draft_temperature) {
    const float t = *o.draft_temperature;
    if (!(std::isfinite(t) && t >= 0.0f) || (t != 0.0f && t < sampling_params::min_temperature))
      throw std::invalid_argument(
          "generate_options.draft_temperature: must be 0 or in [min_temperature, inf) and "
          "finite, got " + std::to_string(t));
  }
  if (!o.tree.empty()) {
    if (!can_tree) {
      throw std::invalid_argument(
          "generate_options.tree: this pipeline cannot run trees (the drafter does not model "
          "specdec::TreeDrafter, or the batch model does not model "
          "specdec::BatchTreeLanguageModel)");
    }
    check_tree_shape(o.tree, "generate_options.tree");  // factors >= 1, at most max_tree_nodes
    if (o.verification == verification_rule::block)
      throw std::invalid_argument(
          "generate_options.verification: block verification applies to a chain; a tree is "
          "verified by multi-candidate speculative sampling (leave verification = token)");
  }
  if (trees_possible(o, can_tree) && o.tree_draw != candidate_draw::iid &&
      o.tree_draw != candidate_draw::without_replacement)
    throw std::invalid_argument(
        std::string("generate_options.tree_draw: must be iid or without_replacement ") +
        (o.tree.empty() ? "(re-planning may plan a tree; set policy.chains_only for chains) "
                        : "") +
        "(deterministic drafters say so themselves)");
  if (o.policy.every > 0 && o.policy.min_samples == 0)
    throw std::invalid_argument(
        "generate_options.policy.min_samples: must be >= 1 (a rate needs a judged candidate)");
  if (o.policy.explore && o.policy.every == 0)
    throw std::invalid_argument("generate_options.policy.explore: needs policy.every >= 1");
  if (o.policy.explore && (!(o.policy.optimism > 0.0) || !std::isfinite(o.policy.optimism)))
    throw std::invalid_argument("generate_options.policy.optimism: must be > 0 and finite");
  if (o.policy.explore && !o.policy.expected.rate.empty()) {
    if (!(o.policy.expected_samples > 0.0) || !std::isfinite(o.policy.expected_samples))
      throw std::invalid_argument(
          "generate_options.policy.expected_samples: must be > 0 and finite");
    o.policy.expected.check("generate_options.policy.expected");
  }
  if (!(o.policy.min_gain >= 0.0) || !std::isfinite(o.policy.min_gain))
    throw std::invalid_argument("generate_options.policy.min_gain: must be >= 0 and finite");
  if (o.policy.every > 0) o.policy.cost.check("generate_options.policy.cost");
  if (o.verification != verification_rule::token && o.verification != verification_rule::block &&
      o.verification != verification_rule::coupled &&
      o.verification != verification_rule::sample_match)
    throw std::invalid_argument(
        "generate_options.verification: not token, block, coupled or sample_match");
}

/**
 * The speed policy for a target whose step costs `cost` (calibrate() measures it): re-plan
 * before every step with explore on (generate_options::policy), chains or trees as the
 * drafter allows, plain decoding whenever no shape is predicted to be at least 10% faster
 * (min_gain: below that margin a probe's cost and the curve's noise outweigh the gain). A plan
 * costs microseconds (O(max_depth) for a chain; plan_tree's search is bounded by the curve's
 * length) and allocates a little. Use as
 * `options.policy = speed_policy(calibrate(target, drafter));`. The curve must reach nodes + 1
 * for the shapes to be considered (calibrate's default max_n = 9: chains up to K = 8).
 */
inline generate_options::policy_options speed_policy(step_cost_model cost) {
  generate_options::policy_options r;
  r.every = 1;
  r.cost = std::move(cost);
  r.explore = true;
  r.min_gain = 0.1;
  return r;
}

}  // namespace specdec
