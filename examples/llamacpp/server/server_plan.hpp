// examples/llamacpp/server/server_plan.hpp - the draft length of each llama-server step when
// specdec's speed policy runs: the server-wide policy (on or off, its cap, the fitted step cost)
// and the chain plan the slots share, which counts the drafts kept at each depth and picks one
// K for all generating slots with plan_chain. Needs no llama.cpp header, so that tests drive it;
// server_policy.hpp sets it up and calibrates it inside llama-server.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <specdec/tree/tree_plan.hpp>

#include "server_cost.hpp"

namespace specdec::llama_server {

/// The server-wide part of the policy: whether it runs, its K cap and the fitted step cost.
struct speed_policy {
  /// On for draft-simple when the draft length is "auto" (policy_setup).
  bool active = false;
  /// The largest K the policy plans (llama-server's draft length cap while it is active).
  int max_k = 8;
  /// --spec-draft-n-min: no K between 0 and n_min is planned.
  int n_min = 0;
  /// The step cost: calibrated at start-up, fitted on every generating step since.
  step_cost cost;

  /// The cost model a slot plans with when `generating` slots share each step and each drafts
  /// the same K (step_cost::cost_for).
  step_cost_model cost_for(std::size_t generating) const {
    return cost.cost_for(generating, static_cast<std::size_t>(max_k));
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

/// Records a step llama-server ran (one update_slots) and its wall time, for the cost fit
/// (nothing while the policy is off).
inline void record_step(const step_shape& step, double seconds) {
  auto& policy = server_policy();
  if (policy.active) policy.cost.record(step, seconds);
}

/**
 * The draft length every generating slot drafts this step, from the drafts kept at each depth
 * over all slots (the counts decay by 1% a verification: about the last hundred steps weigh)
 * and the cost of a step all generating slots share. One K for all slots, kept until a plan
 * predicts 5% more: without a unified KV cache llama.cpp splits a batch whose slots hold unequal
 * counts into several passes (split_passes), and it builds its compute graph again for every
 * new batch shape; on the race's 110M model (four slots, F32) drafts of mixed or changing
 * lengths ran at 80 tokens/s where the same drafts at one constant K ran at 128. Until 4 steps
 * have measured depth 0 the cap is drafted. While the plan is K = 0, a probe (every generating
 * slot drafting one token, so that the batch keeps one pass) keeps the acceptance estimate
 * current: first after 8 steps, then after twice as many steps as the probe before, up to 256,
 * until a plan drafts again: a probe costs a draft call, the draft model's catch-up of what the
 * slots emitted since they last drafted, and a batch of another shape, and backing off keeps
 * them rare where the draft never pays.
 */
class chain_plan {
 public:
  /// The draft length for a slot with room for `cap` drafts when `generating` slots share the
  /// step: `cap` when the policy is off. llama-server asks once per generating slot, in turn; the
  /// first ask of a step decides the K of every slot in it.
  int plan(int cap, std::size_t generating) {
    const auto& policy = server_policy();
    if (!policy.active || !policy.cost.ready()) return cap;
    const std::size_t per_step = std::max<std::size_t>(generating, 1);
    if (left_in_step_ == 0 || per_step != step_slots_) {
      step_k_ = step_plan(generating);
      step_slots_ = per_step;
      left_in_step_ = per_step;
    }
    --left_in_step_;
    const int k = std::max(0, std::min(step_k_, cap));
    return k < policy.n_min ? 0 : k;  // llama.cpp would drop a shorter draft
  }

  /// The K planned last (-1 before the first plan), for /slots.
  int planned() const noexcept { return k_; }

  /// The generating slots the last plan was for (0 before the first), for /slots.
  std::size_t planned_for() const noexcept { return planned_for_; }

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

  // The K of every slot in a new step.
  int step_plan(std::size_t generating) {
    const auto& policy = server_policy();
    if (offered_.empty() || offered_[0] < 4.0) return policy.max_k;  // measure first
    if (generating != planned_for_ || dirty_) replan(generating);
    if (k_ > 0) {
      idle_ = 0;
      probe_gap_ = 0;
      return k_;
    }
    if (probe_gap_ == 0) probe_gap_ = first_probe_gap;
    if (++idle_ < probe_gap_) return 0;
    idle_ = 0;
    probe_gap_ = std::min(2 * probe_gap_, last_probe_gap);
    return std::max(1, policy.n_min);
  }

  static constexpr std::size_t first_probe_gap = 8;   // steps before the first probe at K = 0
  static constexpr std::size_t last_probe_gap = 256;  // ... and the most between two probes

  std::vector<double> offered_;  // verifications that offered a draft at depth d (decayed)
  std::vector<double> kept_;     // ... and kept it
  int k_ = -1;                   // the K planned (-1: none yet)
  std::size_t planned_for_ = 0;  // the generating count k_ was planned for
  bool dirty_ = true;            // a verification since the last plan
  std::size_t idle_ = 0;         // steps at K = 0 since the last probe
  std::size_t probe_gap_ = 0;    // steps between probes (0: K > 0, start again from the first)
  int step_k_ = 0;               // the K of the slots of the current step
  std::size_t step_slots_ = 0;   // ... the generating slots it has
  std::size_t left_in_step_ = 0; // ... and how many of them have not asked yet
};

/// The server's chain plan (one per process, shared by the slots).
inline chain_plan& server_chain_plan() {
  static chain_plan plan;
  return plan;
}

/// The fitted seconds of a step at each K from 0 to the policy's cap, when as many slots generate
/// as the last plan was for (empty while the policy is off or before its first plan), for /slots.
inline std::vector<double> predicted_step_seconds() {
  const auto& policy = server_policy();
  const std::size_t g = server_chain_plan().planned_for();
  std::vector<double> s;
  if (!policy.active || !policy.cost.ready() || g == 0) return s;
  for (int k = 0; k <= policy.max_k; ++k) s.push_back(policy.cost.predict(g, static_cast<std::size_t>(k)));
  return s;
}

}  // namespace specdec::llama_server
