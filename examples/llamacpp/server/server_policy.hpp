// examples/llamacpp/server/server_policy.hpp - specdec's speed policy in llama-server: the draft
// length of each step, when the user gives no --spec-draft-n-max. The model pair's cost is
// calibrated once at start-up (the target's t(n) for a batch of n tokens, the draft model's cost
// per drafted level); the verifications count how often drafts are kept at each depth; plan_chain
// picks the K that maximises predicted tokens per second, K = 0 (no draft) included, so that
// speculation is turned off where it does not pay.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "log.h"

#include <specdec/tree/tree_plan.hpp>

namespace specdec::llama_server {

/// The server-wide part of the policy: whether it runs, its K cap and the calibrated cost.
struct speed_policy {
  /// On when the command line (or LLAMA_ARG_SPEC_DRAFT_N_MAX) gives no draft length.
  bool active = false;
  /// The largest K the policy plans (llama-server's draft length cap while it is active).
  int max_k = 8;
  /// t[n] = seconds for one llama_decode of n tokens (n = 1..t.size() - 1), measured.
  std::vector<double> target;
  /// d[n] = seconds for the draft model to decode n tokens in one call (0 without a draft model).
  std::vector<double> draft;

  /// The cost model a slot plans with when `generating` slots share each step and each drafts
  /// the same K: per slot, t(generating x n) / generating for n tokens, and the draft model's
  /// d(generating) / generating per level.
  step_cost_model cost_for(std::size_t generating) const {
    const std::size_t g = std::max<std::size_t>(generating, 1);
    step_cost_model c;
    c.target.assign(static_cast<std::size_t>(max_k) + 2, 0.0);
    for (std::size_t n = 1; n < c.target.size(); ++n)
      c.target[n] = at(target, g * n) / static_cast<double>(g);
    c.draft_per_level = draft.empty() ? 0.0 : at(draft, g) / static_cast<double>(g);
    return c;
  }

 private:
  // curve[n], linearly extrapolated past its end from its last two points.
  static double at(const std::vector<double>& curve, std::size_t n) {
    const std::size_t last = curve.size() - 1;
    if (n <= last) return curve[n];
    const double slope = last >= 2 ? curve[last] - curve[last - 1] : curve[last];
    return curve[last] + slope * static_cast<double>(n - last);
  }
};

/// The server's policy (one per process: one target and one draft model).
inline speed_policy& server_policy() {
  static speed_policy policy;
  return policy;
}

/// Called by llama-server's main after parsing: the policy runs unless a draft length was given,
/// and then raises llama-server's cap to the policy's (`n_max`: params.speculative.draft.n_max).
inline void policy_from_args(int argc, char** argv, int& n_max) {
  bool given = std::getenv("LLAMA_ARG_SPEC_DRAFT_N_MAX") != nullptr;
  for (int i = 1; i < argc && !given; ++i) given = std::strcmp(argv[i], "--spec-draft-n-max") == 0;
  auto& policy = server_policy();
  policy.active = !given;
  if (policy.active) n_max = policy.max_k;
}

namespace detail {

// Median seconds of `rounds` calls of llama_decode on `ctx` with n tokens of sequence 0 (all
// rows' logits), the sequence cleared after each.
inline double time_decode(llama_context* ctx, int n, int rounds) {
  llama_batch batch = llama_batch_init(n, 0, 1);
  const llama_vocab* vocab = llama_model_get_vocab(llama_get_model(ctx));
  const llama_token token = std::max<llama_token>(llama_vocab_bos(vocab), 0);
  std::vector<double> seconds;
  for (int r = 0; r < rounds; ++r) {
    batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch.token[i] = token;
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = llama_decode(ctx, batch);
    llama_synchronize(ctx);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    llama_memory_seq_rm(llama_get_memory(ctx), 0, -1, -1);
    if (rc != 0) {
      LOG_WRN("specdec: calibration: llama_decode of %d tokens returned %d\n", n, rc);
      seconds.clear();
      break;
    }
  }
  llama_batch_free(batch);
  std::sort(seconds.begin(), seconds.end());
  return seconds.empty() ? 0.0 : seconds[seconds.size() / 2];
}

}  // namespace detail

/// Measures the cost curves at start-up, before any slot serves: the target at 1..max_tokens
/// tokens per call (every n up to 8, then a grid about 25% apart, interpolated), the draft model
/// at 1..slots tokens. A few seconds on a 110M model on two cores.
inline void calibrate_policy(llama_context* target, llama_context* draft, int slots) {
  auto& policy = server_policy();
  if (!policy.active) return;
  const int rounds = 3;
  const int max_tokens = std::max(1, slots) * (policy.max_k + 1);
  detail::time_decode(target, 1, 1);  // warm-up
  std::vector<int> grid;
  for (int n = 1; n <= max_tokens; n = n < 8 ? n + 1 : std::max(n + 1, n * 5 / 4)) grid.push_back(n);
  if (grid.back() != max_tokens) grid.push_back(max_tokens);
  policy.target.assign(static_cast<std::size_t>(max_tokens) + 1, 0.0);
  int prev = 0;
  for (const int n : grid) {
    policy.target[static_cast<std::size_t>(n)] = detail::time_decode(target, n, rounds);
    for (int m = prev + 1; m < n; ++m) {  // linear between grid points
      const double w = static_cast<double>(m - prev) / static_cast<double>(n - prev);
      policy.target[static_cast<std::size_t>(m)] =
          (1.0 - w) * policy.target[static_cast<std::size_t>(prev)] +
          w * policy.target[static_cast<std::size_t>(n)];
    }
    prev = n;
  }
  policy.draft.clear();
  if (draft != nullptr) {
    detail::time_decode(draft, 1, 1);
    policy.draft.assign(static_cast<std::size_t>(std::max(1, slots)) + 1, 0.0);
    for (int n = 1; n <= std::max(1, slots); ++n)
      policy.draft[static_cast<std::size_t>(n)] = detail::time_decode(draft, n, rounds);
  }
  LOG_INF("specdec: speed policy calibrated: target t(1) = %.2f ms, t(%d) = %.2f ms; draft %.2f ms per token\n",
          policy.target[1] * 1e3, max_tokens, policy.target.back() * 1e3,
          policy.draft.empty() ? 0.0 : policy.draft[1] * 1e3);
}

/**
 * The draft length every generating slot drafts this step, from the drafts kept at each depth
 * over all slots (the counts decay by 1% a verification: about the last hundred steps weigh)
 * and the cost of a step all generating slots share. One K for all slots, kept until a plan
 * predicts 5% more: llama.cpp reuses its compute graph only while a batch keeps its shape and
 * builds it again for every new shape, and on the race's 110M model (four slots, F32) drafts of
 * mixed or changing lengths ran at 80 tokens/s where the same drafts at one constant K ran at
 * 128. Until 4 steps have measured depth 0 the cap is drafted; when the plan is K = 0, one plan
 * in 8 x generating drafts a token, so that a change in acceptance is seen.
 */
class chain_plan {
 public:
  /// The draft length for a slot with room for `cap` drafts when `generating` slots share the
  /// step: `cap` when the policy is off.
  int plan(int cap, std::size_t generating) {
    const auto& policy = server_policy();
    if (!policy.active || cap <= 0 || policy.target.size() < 2) return cap;
    const int max_k = std::min(cap, policy.max_k);
    if (offered_.empty() || offered_[0] < 4.0) return max_k;  // measure first
    if (generating != planned_for_ || dirty_) replan(generating);
    int k = std::min(k_, max_k);
    if (k == 0 && ++idle_ % (8 * std::max<std::size_t>(generating, 1)) == 0) k = 1;
    return k;
  }

  /// A verification kept `accepted` of `drafted` drafts.
  void record(std::size_t drafted, std::size_t accepted) {
    if (drafted > offered_.size()) {
      offered_.resize(drafted, 0.0);
      kept_.resize(drafted, 0.0);
    }
    for (std::size_t d = 0; d < offered_.size(); ++d) {
      offered_[d] *= 0.99;
      kept_[d] *= 0.99;
    }
    for (std::size_t d = 0; d < drafted && d <= accepted; ++d) offered_[d] += 1.0;
    for (std::size_t d = 0; d < accepted; ++d) kept_[d] += 1.0;
    dirty_ = true;
  }

 private:
  void replan(std::size_t generating) {
    const auto& policy = server_policy();
    acceptance_profile profile;
    double prior = kept_[0] / offered_[0];
    for (std::size_t d = 0; d < offered_.size() && d < static_cast<std::size_t>(policy.max_k); ++d) {
      // One pseudo-observation at the depth above's rate: rarely reached depths lean on it.
      const double rate = (kept_[d] + prior) / (offered_[d] + 1.0);
      profile.rate.push_back({std::clamp(rate, 0.0, 1.0)});
      prior = rate;
    }
    const step_cost_model cost = policy.cost_for(generating);
    const tree_plan best = plan_chain(profile, cost, static_cast<std::size_t>(policy.max_k), 0.02);
    const int k = static_cast<int>(best.branching.size());
    if (k_ < 0 || k == k_ ||
        best.tokens_per_second() >=
            1.05 * predict_plan(std::vector<std::size_t>(static_cast<std::size_t>(k_), 1), profile, cost)
                       .tokens_per_second())
      k_ = k;
    planned_for_ = generating;
    dirty_ = false;
  }

  std::vector<double> offered_;  // verifications that offered a draft at depth d (decayed)
  std::vector<double> kept_;     // ... and kept it
  int k_ = -1;                   // the K planned (-1: none yet)
  std::size_t planned_for_ = 0;  // the generating count k_ was planned for
  bool dirty_ = true;            // a verification since the last plan
  std::size_t idle_ = 0;
};

/// The server's chain plan (one per process, shared by the slots).
inline chain_plan& server_chain_plan() {
  static chain_plan plan;
  return plan;
}

}  // namespace specdec::llama_server
