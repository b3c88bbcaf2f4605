// examples/llamacpp/server/server_policy.hpp - specdec's speed policy in llama-server: the draft
// length of each step, when the user gives no --spec-draft-n-max. The model pair's cost is
// calibrated once at start-up (the target's t(n) for a batch of n tokens, the draft model's cost
// per drafted level); the verifications count how often drafts are kept at each depth; plan_chain
// picks the K that maximises predicted tokens per second, K = 0 (no draft) included, so that
// speculation is turned off where it does not pay.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "llama.h"
#include "log.h"

#include <specdec/cost/calibrate.hpp>
#include <specdec/tree/tree_plan.hpp>

namespace specdec::llama_server {

/// The server-wide part of the policy: whether it runs, its K cap and the calibrated cost.
struct speed_policy {
  /// On for draft-simple when the draft length is "auto" (policy_setup).
  bool active = false;
  /// The largest K the policy plans (llama-server's draft length cap while it is active).
  int max_k = 8;
  /// --spec-draft-n-min: no K between 0 and n_min is planned.
  int n_min = 0;
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

/// The most drafts each of `generating` slots can add to a batch of `n_batch` tokens beside its
/// sampled token (llama-server asserts that every slot's 1 + K tokens fit): n_batch / generating
/// - 1, and 0 when even the sampled tokens fill it.
inline int batch_room(int n_batch, std::size_t generating) {
  const std::size_t g = std::max<std::size_t>(generating, 1);
  const std::size_t per_slot = static_cast<std::size_t>(std::max(n_batch, 0)) / g;
  return per_slot == 0 ? 0 : static_cast<int>(per_slot - 1);
}

/// The server's policy (one per process: one target and one draft model).
inline speed_policy& server_policy() {
  static speed_policy policy;
  return policy;
}

/// Called by llama-server before it makes its speculative context (the spec types are final
/// then: given, or read from the draft GGUF): the policy runs when the draft length is "auto"
/// (`--spec-draft-n-max auto`, and the default: no number was given by the flag, its
/// LLAMA_ARG_SPEC_DRAFT_N_MAX twin, config.ini or a preset) and draft-simple is the only type
/// (the cost model is a draft model's; n-gram, EAGLE-3, MTP and DFlash drafts keep llama.cpp's own
/// lengths). It then sets llama-server's cap to the policy's: 8, or --spec-draft-n-min when that
/// is larger (the policy never plans a K between 0 and n_min: llama.cpp drops such drafts).
inline void policy_setup(common_params_speculative& spec) {
  auto& policy = server_policy();
  // (llama.cpp's list starts as {none}; --spec-type adds to it)
  const bool draft_simple_only =
      std::find(spec.types.begin(), spec.types.end(), COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE) != spec.types.end() &&
      std::all_of(spec.types.begin(), spec.types.end(), [](common_speculative_type t) {
        return t == COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE || t == COMMON_SPECULATIVE_TYPE_NONE;
      });
  policy.active = spec.draft.n_max_auto && draft_simple_only && spec.has_dft();
  policy.n_min = std::max(0, spec.draft.n_min);
  policy.max_k = std::max(8, policy.n_min);
  if (policy.active) {
    spec.draft.n_max = policy.max_k;
  } else if (spec.draft.n_max_auto && draft_simple_only) {
    LOG_WRN("specdec: --spec-draft-n-max auto without a draft model: llama.cpp's %d\n", spec.draft.n_max);
  }
  LOG_INF("specdec: draft length %s\n", policy.active ? "auto (the speed policy plans K each step, 0 to 8 or n_min)"
                                                     : "as llama.cpp's options give it");
}

namespace detail {

// Sequence 0 of a llama_context as a specdec::LanguageModel, so that measure_cost_curve can time
// it at start-up, before any slot holds a sequence: append decodes the tokens with every row's
// logits, truncate removes the sequence's tail.
class calibration_sequence {
 public:
  explicit calibration_sequence(llama_context* ctx)
      : ctx_(ctx),
        vocab_(static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx))))) {}
  std::size_t vocab_size() const { return vocab_; }
  std::size_t size() const { return size_; }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    const int n = static_cast<int>(tokens.size());
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tokens[static_cast<std::size_t>(i)];
      batch.pos[i] = static_cast<llama_pos>(size_) + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    const int rc = llama_decode(ctx_, batch);
    llama_batch_free(batch);
    if (rc != 0) throw std::runtime_error("llama_decode returned " + std::to_string(rc));
    for (int i = 0; i < n; ++i)
      std::copy_n(llama_get_logits_ith(ctx_, i), vocab_, logits.data() + static_cast<std::size_t>(i) * vocab_);
    size_ += tokens.size();
  }
  void truncate(std::size_t n) {
    llama_memory_seq_rm(llama_get_memory(ctx_), 0, static_cast<llama_pos>(n), -1);
    size_ = n;
  }

 private:
  llama_context* ctx_;
  std::size_t vocab_;
  std::size_t size_ = 0;
};

}  // namespace detail

/// The most tokens one calibration call may decode into sequence 0 of `ctx`: llama_decode
/// asserts that a batch fits n_batch, and the sequence holds n_ctx_seq cells.
inline std::size_t calibration_room(const llama_context* ctx) {
  return std::max<std::size_t>(1, std::min(llama_n_batch(ctx), llama_n_ctx_seq(ctx)));
}

/// Measures the cost curves at start-up, before any slot serves, with specdec's
/// measure_cost_curve: the target at 1 to slots x (max_k + 1) tokens a call, the draft model at 1
/// to slots, each within one batch and one slot's context (calibration_room; the curves are
/// extrapolated past what was measured). A second or two on a 110M model on two cores. On an
/// error the policy stays off.
inline void calibrate_policy(llama_context* target, llama_context* draft, int slots) {
  auto& policy = server_policy();
  if (!policy.active) return;
  try {
    calibrate_options options;
    options.budget_seconds = 1.0;
    options.max_n = std::min(static_cast<std::size_t>(std::max(1, slots) * (policy.max_k + 1)),
                             calibration_room(target));
    detail::calibration_sequence t(target);
    policy.target = measure_cost_curve(t, options);
    policy.draft.clear();
    if (draft != nullptr) {
      options.max_n = std::min(static_cast<std::size_t>(std::max(1, slots)), calibration_room(draft));
      detail::calibration_sequence d(draft);
      policy.draft = measure_cost_curve(d, options);
    }
  } catch (const std::exception& e) {
    LOG_WRN("specdec: speed policy calibration failed (%s); the policy is off\n", e.what());
    policy.active = false;
    policy.target.clear();
    return;
  }
  LOG_INF("specdec: speed policy calibrated: target t(1) = %.2f ms, t(%zu) = %.2f ms; draft %.2f ms per token\n",
          policy.target[1] * 1e3, policy.target.size() - 1, policy.target.back() * 1e3,
          policy.draft.empty() ? 0.0 : policy.draft[1] * 1e3);
}

/**
 * The draft length every generating slot drafts this step, from the drafts kept at each depth
 * over all slots (the counts decay by 1% a verification: about the last hundred steps weigh)
 * and the cost of a step all generating slots share. One K for all slots, kept until a plan
 * predicts 5% more: llama.cpp reuses its compute graph only while a batch keeps its shape and
 * builds it again for every new shape, and on the race's 110M model (four slots, F32) drafts of
 * mixed or changing lengths ran at 80 tokens/s where the same drafts at one constant K ran at
 * 128. Until 4 steps have measured depth 0 the cap is drafted. While the plan is K = 0, a probe
 * (one slot drafting one token) keeps the acceptance estimate current: first after 8 steps, then
 * after twice as many steps as the probe before, up to 256, until a plan drafts again: a probe
 * costs a draft call and a batch of another shape, and backing off keeps them rare where the
 * draft never pays.
 */
class chain_plan {
 public:
  /// The draft length for a slot with room for `cap` drafts when `generating` slots share the
  /// step: `cap` when the policy is off.
  int plan(int cap, std::size_t generating) {
    const auto& policy = server_policy();
    if (!policy.active || cap <= 0 || policy.target.size() < 2) return cap;
    const int max_k = std::min(cap, policy.max_k);
    if (max_k < policy.n_min) return 0;  // llama.cpp would drop the draft
    if (offered_.empty() || offered_[0] < 4.0) return max_k;  // measure first
    if (generating != planned_for_ || dirty_) replan(generating);
    const int k = std::min(k_, max_k);
    if (k > 0) {
      idle_ = 0;
      probe_gap_ = 0;
      return k;
    }
    // Plans are per slot: `generating` of them make a step.
    const std::size_t per_step = std::max<std::size_t>(generating, 1);
    if (probe_gap_ == 0) probe_gap_ = first_probe_gap * per_step;
    if (++idle_ < probe_gap_) return 0;
    idle_ = 0;
    probe_gap_ = std::min(2 * probe_gap_, last_probe_gap * per_step);
    return std::max(1, policy.n_min);
  }

  /// The K planned last (-1 before the first plan), for /slots.
  int planned() const noexcept { return k_; }

  /// The share of drafts kept at each depth, over the recent verifications of all slots (the
  /// counts the plans use), for /slots.
  std::vector<double> acceptance_by_depth() const {
    std::vector<double> a;
    for (std::size_t d = 0; d < offered_.size() && offered_[d] > 0.0; ++d) a.push_back(kept_[d] / offered_[d]);
    return a;
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
    for (std::size_t d = 0; d < static_cast<std::size_t>(policy.max_k); ++d) {
      if (d >= offered_.size()) {
        // Depths never offered count as the depth above only up to n_min (so that a chain of
        // n_min can be weighed against none); deeper ones are not planned before measured.
        if (d >= static_cast<std::size_t>(policy.n_min)) break;
        profile.rate.push_back({prior});
        continue;
      }
      // One pseudo-observation at the depth above's rate: rarely reached depths lean on it.
      const double rate = (kept_[d] + prior) / (offered_[d] + 1.0);
      profile.rate.push_back({std::clamp(rate, 0.0, 1.0)});
      prior = rate;
    }
    const step_cost_model cost = policy.cost_for(generating);
    const tree_plan best = plan_chain(profile, cost, static_cast<std::size_t>(policy.max_k), 0.02);
    const auto chain_speed = [&](int k) {
      return predict_plan(std::vector<std::size_t>(static_cast<std::size_t>(k), 1), profile, cost)
          .tokens_per_second();
    };
    int k = static_cast<int>(best.branching.size());
    double speed = best.tokens_per_second();
    if (k > 0 && k < policy.n_min) {
      // A K below n_min would be dropped: n_min or nothing, whichever predicts more.
      const double at_min = chain_speed(policy.n_min), at_zero = chain_speed(0);
      k = at_min > at_zero ? policy.n_min : 0;
      speed = std::max(at_min, at_zero);
    }
    if (k_ < 0 || k == k_ || speed >= 1.05 * chain_speed(k_)) k_ = k;
    planned_for_ = generating;
    dirty_ = false;
  }

  static constexpr std::size_t first_probe_gap = 8;   // steps before the first probe at K = 0
  static constexpr std::size_t last_probe_gap = 256;  // ... and the most between two probes

  std::vector<double> offered_;  // verifications that offered a draft at depth d (decayed)
  std::vector<double> kept_;     // ... and kept it
  int k_ = -1;                   // the K planned (-1: none yet)
  std::size_t planned_for_ = 0;  // the generating count k_ was planned for
  bool dirty_ = true;            // a verification since the last plan
  std::size_t idle_ = 0;         // plans at K = 0 since the last probe
  std::size_t probe_gap_ = 0;    // plans between probes (0: K > 0, start again from the first)
};

/// The server's chain plan (one per process, shared by the slots).
inline chain_plan& server_chain_plan() {
  static chain_plan plan;
  return plan;
}

}  // namespace specdec::llama_server
