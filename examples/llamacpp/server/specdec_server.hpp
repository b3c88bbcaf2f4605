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
#include <exception>
#include <limits>
#include <span>
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
  /// A pinned seed with `--spec-seeded coupled` (or the request's "spec_seeded": "coupled"):
  /// coupled draws keyed by (seed, the token's index in the request's output), so the tokens are
  /// the same with or without a draft model, whatever K, across context shifts, and
  /// drafts drawn by the draft model under the same noise are kept about as often as rejection
  /// sampling keeps them. The tokens differ from stock llama-server's for that seed.
  coupled,
  /// No seed: rejection sampling with the draft's q (a one-hot q for deterministic drafts), the
  /// rule that keeps the most drafts.
  rejection,
};

/// The rule for a request's sampling parameters; `coupled_seeded`: the request's (or the
/// server's) `spec_seeded` is "coupled".
inline rule rule_for(const common_params_sampling& params, bool backend_sampling,
                     bool coupled_seeded) {
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

/// A model's vocabulary size (the width of its rows of logits).
inline std::size_t vocab_size(const llama_model* model) {
  return static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model)));
}

/// What a request is told about one emitted token's distribution (llama-server's n_probs with
/// post_sampling_probs): the token's probability and the most probable tokens, in order.
struct emitted_probs {
  float prob = 1.0f;
  std::span<const llama_token_data> top;
};

/**
 * specdec's state for one slot: the rows it processed, the draft model's q, the generator and
 * workspaces. start() at each request; then, per step, either sample() (no draft) or
 * begin_draft(), draft() per draft token, and verify(). Nothing is allocated once the buffers
 * have held the longest draft (and, with n_probs, the longest list of probabilities).
 */
class slot_speculation {
 public:
  /// A request starts on this slot with `params` (its sampler `smpl` is made from them);
  /// `coupled_seeded`: its spec_seeded is "coupled"; `n_vocab` is the target's vocabulary size
  /// (vocab_size()), `n_vocab_draft` the draft model's (0 without one: draft() is then given rows
  /// as wide as the target's).
  void start(const common_params_sampling& params, bool coupled_seeded, bool backend_sampling,
             common_sampler* smpl, std::size_t n_vocab, std::size_t n_vocab_draft) {
    rule_ = rule_for(params, backend_sampling, coupled_seeded);
    n_vocab_ = n_vocab;
    // The draft model's rows have its own width; q covers the ids both models have (llama.cpp
    // pairs vocabularies up to 128 tokens apart) and is zero beyond them.
    n_draft_row_ = n_vocab_draft > 0 ? n_vocab_draft : n_vocab_;
    n_shared_ = std::min(n_vocab_, n_draft_row_);
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
    n_probs_ = params.n_probs > 0 ? static_cast<std::size_t>(params.n_probs) : 0;
    q_count_ = 0;
    q_tokens_.clear();
    probs_count_ = 0;
    rows_.reserve(n_vocab_);
    row_ws_.reserve(n_vocab_);
  }

  /// This step's draft length, 0 for no draft: at most `cap` (the room the slot has in its
  /// context) and at most what one llama_decode of `n_batch` tokens holds when `generating` slots
  /// each add their token and K drafts (n_batch / generating - 1, 0 when that is below 0); the
  /// speed policy's plan within that when it runs (server_policy.hpp), else that bound itself.
  int plan_k(int cap, std::size_t generating, int n_batch) {
    last_k_ = server_chain_plan().plan(std::min(cap, batch_room(n_batch, generating)), generating);
    return last_k_;
  }

  rule current() const noexcept { return rule_; }

  /// The draft length plan_k gave last (for /slots).
  int last_k() const noexcept { return last_k_; }

  /// Whether draft() picks the draft model's tokens for this request (else llama.cpp's draft
  /// sampler does: its top candidate).
  bool draws_drafts() const noexcept { return rule_ != rule::stock; }

  /// The slot's next token from row `idx` of `ctx`, the request's output token number `index`
  /// (0 for the first), with no draft: the coupled draw under the coupled rule, else llama.cpp's
  /// own draw (so a server without a draft model samples as stock llama-server does). The caller
  /// accepts it into `smpl`, as after common_sampler_sample.
  llama_token sample(common_sampler* smpl, llama_context* ctx, int idx, std::size_t index) {
    probs_count_ = 0;
    if (rule_ != rule::coupled) return common_sampler_sample(smpl, ctx, idx);
    try {
      float* row = row_buffer(1);
      process_row(smpl, ctx, idx, row);
      const llama_token x = coupled_sample(std::span<const float>(row, n_vocab_), target_sp(),
                                           coupled_key(seed_, index), cws_);
      keep_row_probs(row, x);
      return x;
    } catch (const std::exception& e) {
      LOG_WRN("specdec: %s; this token is sampled by llama.cpp\n", e.what());
      probs_count_ = 0;
      return common_sampler_sample(smpl, ctx, idx);
    }
  }

  /// A draft is about to be made for this slot; its first token will be the request's output
  /// token number `index`.
  void begin_draft(std::size_t index) noexcept {
    q_count_ = 0;
    q_tokens_.clear();
    draft_index_ = index;
  }

  /// The draft model's pick of draft token `i` from its row of logits (the draft model's own
  /// vocabulary wide): a draw from the row warped as the request asks (under the target's
  /// coupled key with the coupled rule; the argmax when the request is greedy), among the ids
  /// the target has too, its q kept for verify(). Returns LLAMA_TOKEN_NULL to end the draft:
  /// when the draft model's largest probability is below `p_min` (llama.cpp's
  /// --spec-draft-p-min), or on a row specdec refuses.
  llama_token draft(const float* logits, std::size_t i, float p_min) {
    if (rule_ == rule::stock || i != q_tokens_.size()) return LLAMA_TOKEN_NULL;
    try {
      // llama.cpp's rule for ending a draft: the draft model's own confidence, at temperature 1.
      if (p_min > 0.0f && top_probability(std::span<const float>(logits, n_draft_row_)) < p_min)
        return LLAMA_TOKEN_NULL;
      const std::span<const float> row(logits, n_shared_);
      token_id x;
      if (draft_sp_.greedy()) {  // a deterministic draft: one-hot q, nothing kept
        x = argmax(row);
      } else {
        if (q_.size() < (i + 1) * n_vocab_) q_.resize((i + 1) * n_vocab_);
        float* q = q_.data() + i * n_vocab_;
        warp(row, draft_sp_, std::span<float>(q, n_shared_), warp_ws_);
        std::fill(q + n_shared_, q + n_vocab_, 0.0f);
        x = draft_draw(std::span<const float>(q, n_vocab_), draft_sp_, draft_index_ + i, gen_, cws_);
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
   * Verifies `draft` against the target rows `idxs` (idxs[i] follows draft[0..i)); draft[0] is
   * the request's output token number `index`. Returns the accepted drafts and the target's
   * next token, all accepted into `smpl` (as common_sampler_sample_and_accept_n does).
   * `replay`: the draft was accepted before a checkpoint restore and is kept as it is. On an
   * error from specdec (a row of NaN, a dead end no token can follow), `smpl` is restored from
   * `saved` and the whole step is llama.cpp's sample-and-match: the rows read before the error
   * are read again by llama.cpp's rule, so such a step's law is llama.cpp's, not specdec's.
   */
  std::vector<llama_token> verify(common_sampler* smpl, const common_sampler* saved,
                                  llama_context* ctx, const std::vector<int>& idxs,
                                  const llama_tokens& draft, std::size_t index, bool replay) {
    std::vector<llama_token> out;
    probs_count_ = 0;
    rows_read_.assign(idxs.begin(), idxs.end());
    if (rule_ == rule::stock) {
      out = sample_and_match(smpl, ctx, idxs, draft);
    } else {
      try {
        out = verify_rows(smpl, ctx, idxs, draft, index, replay);
      } catch (const std::exception& e) {
        LOG_WRN("specdec: %s; this step is verified by llama.cpp\n", e.what());
        common_sampler_copy(saved, smpl);
        probs_count_ = 0;
        out = sample_and_match(smpl, ctx, idxs, draft);
      }
    }
    if (!replay) server_chain_plan().record(draft.size(), out.size() - 1);
    return out;
  }

  /// The row of the target's last batch that the i-th token of the last verify() was drawn from
  /// (for the pre-sampling probabilities, which stock reads from the raw row).
  int emitted_row(std::size_t i) const { return rows_read_.at(i); }

  /// Whether emitted_probability(i) holds the post-sampling probabilities of the i-th token the
  /// last sample() or verify() emitted (the request asked for n_probs, and that step processed
  /// its rows here; else llama.cpp's own candidates are the answer, as on stock's plain path).
  bool has_probs(std::size_t i) const noexcept { return i < probs_count_; }

  /// The post-sampling probabilities of the i-th token the last step emitted: its probability
  /// and the request's n_probs most probable tokens (none of probability 0), each from the row
  /// its token was drawn from, processed as stock processes it (the law it was drawn from).
  emitted_probs emitted_probability(std::size_t i) const {
    const std::size_t n = probs_top_n_[i];
    return {probs_token_[i], std::span<const llama_token_data>(probs_top_.data() + i * n_probs_, n)};
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

  // A slot of the probabilities kept for the next emitted token (n_probs_ entries wide).
  std::size_t next_probs_slot() {
    const std::size_t i = probs_count_++;
    if (probs_token_.size() < probs_count_) {
      probs_token_.resize(probs_count_);
      probs_top_n_.resize(probs_count_);
      probs_top_.resize(probs_count_ * n_probs_);
    }
    return i;
  }

  // Keeps token x's probability and the top n_probs_ of a processed row (logits, -inf where the
  // law is 0), as llama.cpp's dist sampler reports them: p = softmax in float, zeros dropped.
  void keep_row_probs(const float* row, llama_token x) {
    if (n_probs_ == 0) return;
    const std::size_t slot = next_probs_slot();
    const std::span<const float> logits(row, n_vocab_);
    const double lse = log_sum_exp(logits);
    const auto prob = [&](std::size_t id) {
      return static_cast<float>(std::exp(static_cast<double>(logits[id]) - lse));
    };
    probs_token_[slot] = prob(static_cast<std::size_t>(x));
    probs_order_.clear();
    for (std::size_t id = 0; id < n_vocab_; ++id)
      if (logits[id] > -std::numeric_limits<float>::infinity()) probs_order_.push_back(static_cast<llama_token>(id));
    const std::size_t n = std::min(n_probs_, probs_order_.size());
    std::partial_sort(probs_order_.begin(), probs_order_.begin() + static_cast<std::ptrdiff_t>(n),
                      probs_order_.end(), [&](llama_token a, llama_token b) {
                        return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
                      });
    std::size_t kept = 0;
    for (; kept < n; ++kept) {
      const llama_token id = probs_order_[kept];
      const float p = prob(static_cast<std::size_t>(id));
      if (p == 0.0f) break;
      probs_top_[slot * n_probs_ + kept] = {id, logits[static_cast<std::size_t>(id)], p};
    }
    probs_top_n_[slot] = kept;
  }

  // Keeps token x's probability and the top n_probs_ of llama.cpp's candidates after its own
  // draw (what stock's populate_token_probs reads on its plain path).
  void keep_candidate_probs(common_sampler* smpl, llama_token x) {
    if (n_probs_ == 0) return;
    const std::size_t slot = next_probs_slot();
    const llama_token_data_array* cur = common_sampler_get_candidates(smpl, true);
    probs_token_[slot] = 1.0f;
    for (std::size_t j = 0; j < cur->size; ++j)
      if (cur->data[j].id == x) {
        probs_token_[slot] = cur->data[j].p;
        break;
      }
    std::size_t kept = 0;
    for (; kept < std::min(n_probs_, cur->size) && cur->data[kept].p != 0.0f; ++kept)
      probs_top_[slot * n_probs_ + kept] = cur->data[kept];
    probs_top_n_[slot] = kept;
  }

  // llama.cpp's sample-and-match (common_sampler_sample_and_accept_n), keeping each row's
  // candidates for the post-sampling probabilities.
  std::vector<llama_token> sample_and_match(common_sampler* smpl, llama_context* ctx,
                                            const std::vector<int>& idxs, const llama_tokens& draft) {
    std::vector<llama_token> out;
    out.reserve(idxs.size());
    for (std::size_t i = 0; i < idxs.size(); ++i) {
      const llama_token x = common_sampler_sample(smpl, ctx, idxs[i]);
      keep_candidate_probs(smpl, x);
      common_sampler_accept(smpl, x, true);
      out.push_back(x);
      if (i >= draft.size() || draft[i] != x) break;
    }
    return out;
  }

  std::vector<llama_token> verify_rows(common_sampler* smpl, llama_context* ctx,
                                       const std::vector<int>& idxs, const llama_tokens& draft,
                                       std::size_t index, bool replay) {
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
      r.next = coupled_or_sampled(std::span<const float>(buffer + n * n_vocab_, n_vocab_), index + n);
    } else if (rule_ == rule::coupled) {
      r = verify_coupled(target, drafts, sp, index, cws_, on_read);
    } else if (q_count_ > 0 && q_count_ >= n &&
               std::equal(draft.begin(), draft.end(), q_tokens_.begin())) {
      // draft() drew these tokens this step: llama.cpp runs draft-simple after its n-gram types
      // and only for a slot none of them drafted for, so equal tokens are draft-simple's draw.
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
    for (std::size_t i = 0; i < out.size(); ++i) keep_row_probs(buffer + i * n_vocab_, out[i]);
    return out;
  }

  token_id coupled_or_sampled(std::span<const float> row, std::size_t index) {
    const sampling_params sp = target_sp();
    if (rule_ == rule::coupled) return coupled_sample(row, sp, coupled_key(seed_, index), cws_);
    return specdec::detail::generator_draw(sp, gen_, cws_)(index, row);
  }

  rule rule_ = rule::stock;
  std::size_t n_vocab_ = 0;      // the target's vocabulary: a processed row's width
  std::size_t n_draft_row_ = 0;  // the draft model's vocabulary: its rows' width
  std::size_t n_shared_ = 0;     // the ids both have: q's support
  std::uint64_t seed_ = 0;
  sampling_params draft_sp_;
  std::vector<float> rows_;       // processed target rows, n + 1 of V
  stock_row_workspace row_ws_;
  std::vector<float> q_;          // the draft model's q rows, q_count_ of V
  std::size_t q_count_ = 0;
  std::vector<token_id> q_tokens_;  // the draft tokens drawn by draft()
  std::size_t draft_index_ = 0;     // the output index of this draft's first token
  int last_k_ = 0;
  std::size_t n_probs_ = 0;                  // the request's n_probs (0: none kept)
  std::size_t probs_count_ = 0;              // emitted tokens of the last step with probs kept
  std::vector<float> probs_token_;           // ... each one's probability
  std::vector<std::size_t> probs_top_n_;     // ... how many top tokens each has
  std::vector<llama_token_data> probs_top_;  // ... the top tokens, n_probs_ a token
  std::vector<llama_token> probs_order_;     // keep_row_probs' sort
  std::vector<int> rows_read_;               // the last verify()'s rows in the target's batch
  rng gen_;
  rejection_workspace rws_;
  coupled_workspace cws_;
  warp_workspace warp_ws_;
};

}  // namespace specdec::llama_server
