// examples/llamacpp/server/specdec_server.hpp - specdec's sampling and verification for one slot
// of llama-server: what the patch series (patches/) calls where the server samples a token, where
// its draft model picks a draft token and where it verifies a draft. Compiled inside llama.cpp's
// tools/server (it includes llama.cpp's common/sampling.h); C++20, Eigen and specdec's headers.
//
// Each row of the target is processed by the slot's own sampler (reasoning budget, grammar, logit
// bias, penalties, DRY, top-k, typical, top-p, min-p, XTC, temperature: every sampler
// llama-server runs) into the law stock llama-server draws the slot's token from, grammar
// included (stock_row.hpp), and specdec draws from that row. So the output law is llama-server's
// without speculation, and a row is processed only when it is read: the sampler (and its
// penalties' history) sees exactly the tokens the slot emits, one row each.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "llama.h"
#include "log.h"
#include "sampling.h"

#include <specdec/math/coupled.hpp>
#include <specdec/math/rng.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/math/softmax.hpp>
#include <specdec/math/warp.hpp>
#include <specdec/types.hpp>
#include <specdec/verify/coupled.hpp>
#include <specdec/verify/rejection.hpp>

#include "server_policy.hpp"
#include "stock_row.hpp"

namespace specdec::llama_server {

/// Which rule draws a request's tokens and verifies its drafts (chosen per request at its start).
enum class rule {
  /// llama.cpp's own sampling and sample-and-match on the draft model's top candidates. Serves
  /// a request that pins a seed (llama.cpp draws one uniform of the seed's stream per emitted
  /// token, so its tokens are stock llama-server's, with or without a draft: clients and
  /// llama.cpp's own tests rely on that stream), unless coupled sampling is asked for; and chains
  /// whose last sampler picks the token itself with feedback (mirostat, adaptive-p), and backend
  /// sampling.
  stock,
  /// A pinned seed with SPECDEC_SEEDED=coupled in the server's environment: coupled draws keyed by
  /// (seed, position), so the tokens are the same with or without a draft model, whatever K, and
  /// drafts drawn by the draft model under the same noise are kept about as often as rejection
  /// sampling keeps them. The tokens differ from stock llama-server's for that seed.
  coupled,
  /// No seed: rejection sampling with the draft's q (a one-hot q for deterministic drafts), the
  /// rule that keeps the most drafts.
  rejection,
};

/// Whether seeded requests use coupled sampling: SPECDEC_SEEDED=coupled in the environment.
inline bool coupled_seeded_requests() {
  const char* v = std::getenv("SPECDEC_SEEDED");
  return v != nullptr && std::string_view(v) == "coupled";
}

/// The rule for a request's sampling parameters.
inline rule rule_for(const common_params_sampling& params, bool backend_sampling,
                     bool coupled_seeded = coupled_seeded_requests()) {
  if (backend_sampling || params.mirostat != 0) return rule::stock;
  for (const auto type : params.samplers)
    if (type == COMMON_SAMPLER_TYPE_ADAPTIVE_P) return rule::stock;
  if (params.seed == LLAMA_DEFAULT_SEED) return rule::rejection;
  return coupled_seeded ? rule::coupled : rule::stock;
}

/// The rule's name, for logs and the slot's JSON.
inline const char* rule_name(rule r) {
  switch (r) {
    case rule::stock: return "sample-and-match";
    case rule::coupled: return "coupled";
    case rule::rejection: return "rejection";
  }
  return "?";
}

/**
 * specdec's state for one slot: the rows it processed, the draft model's q, the generator and
 * workspaces. start() at each request; then, per step, either sample() (no draft) or
 * begin_draft(), draft() per draft token, and verify(). Nothing is allocated once the buffers
 * have held the longest draft.
 */
class slot_speculation {
 public:
  /// A request starts on this slot with `params` (its sampler `smpl` is made from them).
  void start(const common_params_sampling& params, bool backend_sampling, common_sampler* smpl,
             const llama_model* model) {
    rule_ = rule_for(params, backend_sampling);
    n_vocab_ = static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model)));
    seed_ = params.seed;
    gen_.reseed(common_sampler_get_seed(smpl));  // a request without a seed got a random one
    // The draft model's warp: the request's temperature and truncations (q is any distribution
    // specdec knows exactly; the closer to the target's processed row, the more drafts are kept).
    draft_sp_ = sampling_params{};
    draft_sp_.temperature = params.temp > 0.0f ? std::max(params.temp, sampling_params::min_temperature) : 0.0f;
    draft_sp_.top_k = params.top_k > 0 ? static_cast<std::size_t>(params.top_k) : 0;
    draft_sp_.top_p = params.top_p > 0.0f && params.top_p < 1.0f ? params.top_p : 1.0f;
    draft_sp_.min_p = params.min_p > 0.0f && params.min_p < 1.0f ? params.min_p : 0.0f;
    draft_sp_.seed = seed_;
    draft_sp_.coupled = rule_ == rule::coupled;
    q_count_ = 0;
    q_tokens_.clear();
    rows_.reserve(n_vocab_);
    row_ws_.reserve(n_vocab_);
  }

  /// This step's draft length, 0 for no draft: at most `cap` (the room the slot has in its
  /// context) and at most what one llama_decode of `n_batch` tokens holds when `generating` slots
  /// each add their token and K drafts (n_batch / generating - 1, 0 when that is below 0); the
  /// speed policy's plan within that when it runs (server_policy.hpp), else that bound itself.
  int plan_k(int cap, std::size_t generating, int n_batch) {
    return server_chain_plan().plan(std::min(cap, batch_room(n_batch, generating)), generating);
  }

  rule current() const noexcept { return rule_; }

  /// Whether draft() picks the draft model's tokens for this request (else llama.cpp's draft
  /// sampler does: its top candidate).
  bool draws_drafts() const noexcept { return rule_ != rule::stock; }

  /// The slot's next token from row `idx` of `ctx`, at sequence position `position`, with no
  /// draft: the coupled draw under the coupled rule, else llama.cpp's own draw (so a server
  /// without a draft model samples as stock llama-server does). The caller accepts it
  /// into `smpl`, as after common_sampler_sample.
  llama_token sample(common_sampler* smpl, llama_context* ctx, int idx, llama_pos position) {
    if (rule_ != rule::coupled) return common_sampler_sample(smpl, ctx, idx);
    try {
      float* row = row_buffer(1);
      process_row(smpl, ctx, idx, row);
      return coupled_sample(std::span<const float>(row, n_vocab_), target_sp(),
                            coupled_key(seed_, static_cast<std::size_t>(position)), cws_);
    } catch (const std::exception& e) {
      LOG_WRN("specdec: %s; this token is sampled by llama.cpp\n", e.what());
      return common_sampler_sample(smpl, ctx, idx);
    }
  }

  /// A draft is about to be made for this slot.
  void begin_draft() noexcept {
    q_count_ = 0;
    q_tokens_.clear();
  }

  /// The draft model's pick of draft token `i` (at position `position`) from its row of logits:
  /// a draw from the row warped as the request asks (under the target's coupled key with the
  /// coupled rule; the argmax when the request is greedy), its q kept for verify(). Returns
  /// LLAMA_TOKEN_NULL to end the draft: when the draft model's largest probability is below
  /// `p_min` (llama.cpp's --spec-draft-p-min), or on a row specdec refuses.
  llama_token draft(const float* logits, std::size_t i, llama_pos position, float p_min) {
    if (rule_ == rule::stock || i != q_tokens_.size()) return LLAMA_TOKEN_NULL;
    const std::span<const float> row(logits, n_vocab_);
    try {
      // llama.cpp's rule for ending a draft: the draft model's own confidence, at temperature 1.
      if (p_min > 0.0f && top_probability(row) < p_min) return LLAMA_TOKEN_NULL;
      token_id x;
      if (draft_sp_.greedy()) {  // a deterministic draft: one-hot q, nothing kept
        x = argmax(row);
      } else {
        if (q_.size() < (i + 1) * n_vocab_) q_.resize((i + 1) * n_vocab_);
        const std::span<float> q(q_.data() + i * n_vocab_, n_vocab_);
        warp(row, draft_sp_, q, warp_ws_);
        x = draft_draw(q, draft_sp_, static_cast<std::size_t>(position), gen_, cws_);
        q_count_ = i + 1;
      }
      q_tokens_.push_back(x);
      return x;
    } catch (const std::exception& e) {
      LOG_WRN("specdec: draft row %zu: %s; the draft ends here\n", i, e.what());
      return LLAMA_TOKEN_NULL;
    }
  }

  /**
   * Verifies `draft` against the target rows `idxs` (idxs[i] follows draft[0..i)); the token of
   * row 0 is at sequence position `position`. Returns the accepted drafts and the target's next
   * token, all accepted into `smpl` (as common_sampler_sample_and_accept_n does). `replay`: the
   * draft was accepted before a checkpoint restore and is kept as it is. On an error from specdec
   * (a row of NaN, a dead end no token can follow), `smpl` is restored from `saved` and the step
   * is llama.cpp's sample-and-match.
   */
  std::vector<llama_token> verify(common_sampler* smpl, const common_sampler* saved,
                                  llama_context* ctx, const std::vector<int>& idxs,
                                  const llama_tokens& draft, llama_pos position, bool replay) {
    std::vector<llama_token> out;
    if (rule_ == rule::stock) {
      out = common_sampler_sample_and_accept_n(smpl, ctx, idxs, draft);
    } else {
      try {
        out = verify_rows(smpl, ctx, idxs, draft, static_cast<std::size_t>(position), replay);
      } catch (const std::exception& e) {
        LOG_WRN("specdec: %s; this step is verified by llama.cpp\n", e.what());
        common_sampler_copy(saved, smpl);
        out = common_sampler_sample_and_accept_n(smpl, ctx, idxs, draft);
      }
    }
    if (!replay) server_chain_plan().record(draft.size(), out.size() - 1);
    return out;
  }

 private:
  // Processed logits are drawn from as they are: temperature 1 (the chain applied the request's
  // temperature; a greedy request's chain left one finite logit), no truncation.
  sampling_params target_sp() const {
    sampling_params sp;
    sp.seed = seed_;
    return sp;
  }

  float* row_buffer(std::size_t rows) {
    if (rows_.size() < rows * n_vocab_) rows_.resize(rows * n_vocab_);
    return rows_.data();
  }

  // Row idx of ctx processed into stock llama-server's law for the slot's token (stock_row.hpp):
  // `out` gets V logits, -inf where the law is 0.
  void process_row(common_sampler* smpl, llama_context* ctx, int idx, float* out) {
    stock_row(smpl, ctx, idx, std::span<float>(out, n_vocab_), row_ws_);
  }

  // The largest probability of a row of logits at temperature 1.
  static float top_probability(std::span<const float> logits) {
    return static_cast<float>(std::exp(static_cast<double>(checked_max(logits)) -
                                       log_sum_exp(logits)));
  }

  std::vector<llama_token> verify_rows(common_sampler* smpl, llama_context* ctx,
                                       const std::vector<int>& idxs, const llama_tokens& draft,
                                       std::size_t position, bool replay) {
    const std::size_t n = draft.size();
    float* buffer = row_buffer(n + 1);
    const logits_view target(buffer, static_cast<Eigen::Index>(n + 1),
                             static_cast<Eigen::Index>(n_vocab_));
    // Row i is read only after drafts[0..i) were kept: they go into the chain first.
    const auto on_read = [&](std::size_t i) {
      if (i > 0) common_sampler_accept(smpl, draft[i - 1], true);
      process_row(smpl, ctx, idxs[i], buffer + i * n_vocab_);
    };
    const std::span<const token_id> drafts(draft.data(), n);
    const sampling_params sp = target_sp();
    verify_result r;
    if (replay) {
      for (std::size_t i = 0; i <= n; ++i) on_read(i);
      r.accepted = n;
      r.next = coupled_or_sampled(std::span<const float>(buffer + n * n_vocab_, n_vocab_),
                                  position + n);
    } else if (rule_ == rule::coupled) {
      r = verify_coupled(target, drafts, sp, position, cws_, on_read);
    } else if (q_count_ > 0 && q_count_ >= n &&
               std::equal(draft.begin(), draft.end(), q_tokens_.begin())) {
      const logits_view q(q_.data(), static_cast<Eigen::Index>(n),
                          static_cast<Eigen::Index>(n_vocab_));
      r = verify_rejection(target, drafts, q, sp, gen_, rws_, on_read);
    } else if (q_count_ == 0) {
      // A deterministic draft (a greedy request's draft(); n-gram, MTP and EAGLE-3 drafts, their
      // top candidate): a one-hot q.
      r = verify_rejection(target, drafts, logits_view(nullptr, 0, target.cols()), sp, gen_,
                           rws_, on_read);
    } else {
      // A sampled draft whose q is not this draft's (cut or reused by the server): the rule
      // exact for any draft.
      r = verify_sample_match(target, drafts, sp, gen_, cws_, on_read);
    }
    common_sampler_accept(smpl, r.next, true);
    std::vector<llama_token> out(draft.begin(), draft.begin() + static_cast<std::ptrdiff_t>(r.accepted));
    out.push_back(r.next);
    return out;
  }

  token_id coupled_or_sampled(std::span<const float> row, std::size_t position) {
    const sampling_params sp = target_sp();
    if (rule_ == rule::coupled) return coupled_sample(row, sp, coupled_key(seed_, position), cws_);
    return specdec::detail::generator_draw(sp, gen_, cws_)(position, row);
  }

  rule rule_ = rule::stock;
  std::size_t n_vocab_ = 0;
  std::uint64_t seed_ = 0;
  sampling_params draft_sp_;
  std::vector<float> rows_;       // processed target rows, n + 1 of V
  stock_row_workspace row_ws_;
  std::vector<float> q_;          // the draft model's q rows, q_count_ of V
  std::size_t q_count_ = 0;
  std::vector<token_id> q_tokens_;  // the draft tokens drawn by draft()
  rng gen_;
  rejection_workspace rws_;
  coupled_workspace cws_;
  warp_workspace warp_ws_;
};

}  // namespace specdec::llama_server
