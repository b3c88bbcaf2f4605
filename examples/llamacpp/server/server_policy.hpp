// examples/llamacpp/server/server_policy.hpp - specdec's speed policy set up inside llama-server:
// whether it runs (policy_setup, from the spec options) and its start-up calibration (the
// target's t(n) for a batch of n tokens, the draft model's cost per drafted level), the prior of
// the step cost fitted while serving (server_cost.hpp). The plans themselves are server_plan.hpp's:
// each step, the K that maximises predicted tokens per second, K = 0 (no draft) included, so that
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

#include "server_plan.hpp"

namespace specdec::llama_server {

/// Called by llama-server before it makes its speculative context (the spec types are final
/// then: given, or read from the draft GGUF): the policy runs when the draft length is "auto"
/// (`--spec-draft-n-max auto`, and the default: no number was given by the flag, its
/// LLAMA_ARG_SPEC_DRAFT_N_MAX twin, config.ini or a preset) and the types are draft-simple alone
/// with a draft model, or ngram-specdec alone (its drafts cost nothing; the policy plans up to
/// its --spec-ngram-specdec-n-max). The cost model knows one drafter, so n-gram types of
/// llama.cpp, EAGLE-3, MTP and DFlash drafts and chains of types keep llama.cpp's own lengths.
/// It then sets llama-server's cap to the policy's: 8 (draft-simple) or ngram-specdec's n-max,
/// or --spec-draft-n-min when that is larger (the policy never plans a K between 0 and n_min:
/// llama.cpp drops such drafts).
inline void policy_setup(common_params_speculative& spec) {
  auto& policy = server_policy();
  // (llama.cpp's list starts as {none}; --spec-type adds to it)
  const auto only = [&spec](common_speculative_type type) {
    return std::find(spec.types.begin(), spec.types.end(), type) != spec.types.end() &&
           std::all_of(spec.types.begin(), spec.types.end(), [type](common_speculative_type t) {
             return t == type || t == COMMON_SPECULATIVE_TYPE_NONE;
           });
  };
  const bool draft_simple = only(COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE);
  const bool ngram = only(COMMON_SPECULATIVE_TYPE_NGRAM_SPECDEC);
  policy.active = spec.draft.n_max_auto && ((draft_simple && spec.has_dft()) || ngram);
  policy.n_min = std::max(0, spec.draft.n_min);
  policy.max_k = std::max(ngram ? spec.ngram_specdec.n_max : 8, policy.n_min);
  if (policy.active) {
    spec.draft.n_max = policy.max_k;
  } else if (spec.draft.n_max_auto && draft_simple) {
    LOG_WRN("specdec: --spec-draft-n-max auto without a draft model: llama.cpp's %d\n", spec.draft.n_max);
  }
  LOG_INF("specdec: draft length %s\n", policy.active ? "auto (the speed policy plans K each step, from 0 to its cap)"
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
/// extrapolated past what was measured): the prior of the step cost fit (server_cost.hpp). A
/// second or two on a 110M model on two cores. On an error the policy stays off.
inline void calibrate_policy(llama_context* target, llama_context* draft, int slots) {
  auto& policy = server_policy();
  if (!policy.active) return;
  std::vector<double> t, d;
  try {
    calibrate_options options;
    options.budget_seconds = 1.0;
    options.max_n = std::min(static_cast<std::size_t>(std::max(1, slots) * (policy.max_k + 1)),
                             calibration_room(target));
    detail::calibration_sequence ts(target);
    t = measure_cost_curve(ts, options);
    if (draft != nullptr) {
      options.max_n = std::min(static_cast<std::size_t>(std::max(1, slots)), calibration_room(draft));
      detail::calibration_sequence ds(draft);
      d = measure_cost_curve(ds, options);
    }
  } catch (const std::exception& e) {
    LOG_WRN("specdec: speed policy calibration failed (%s); the policy is off\n", e.what());
    policy.active = false;
    policy.cost.reset({}, {});
    return;
  }
  LOG_INF("specdec: speed policy calibrated: target t(1) = %.2f ms, t(%zu) = %.2f ms; draft %.2f ms per token\n",
          t[1] * 1e3, t.size() - 1, t.back() * 1e3, d.size() > 1 ? d[1] * 1e3 : 0.0);
  policy.cost.reset(std::move(t), std::move(d));
}

}  // namespace specdec::llama_server
