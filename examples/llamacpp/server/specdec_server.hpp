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
#include <specdec/types.hpp>
#include <specdec/verify/coupled.hpp>
#include <specdec/verify/rejection.hpp>

#include "emitted_probs.hpp"
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
    // The draft's draw: greedy or not, coupled or not, as the request (q itself is the draft
    // row through the request's chain: draft_law).
    draft_sp_ = sampling_params{};
    draft_sp_.temperature = params.temp > 0.0f ? std::max(params.temp, sampling_params::min_temperature) : 0.0f;
    draft_sp_.seed = seed_;
    draft_sp_.coupled = rule_ == rule::coupled;
    probs_.start(params.n_probs > 0 ? static_cast<std::size_t>(params.n_probs) : 0, n_vocab_);
    q_count_ = 0;
    q_tokens_.clear();
    probs_.clear();
    rows_.reserve(n_vocab_);
    row_ws_.reserve(n_vocab_);
  }

  /// This step's draft length, 0 for no draft: at most `cap` (the room the slot has in its
  /// context) and at most what one llama_decode of `n_batch` tokens holds when `generating` slots
  /// each add their token and K drafts (n_batch / generating - 1, 0 when that is below 0); the
  /// speed policy's plan within that when it runs (server_plan.hpp), else that bound itself.
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
    probs_.clear();
    if (rule_ != rule::coupled) return common_sampler_sample(smpl, ctx, idx);
    try {
      float* row = row_buffer(1);
      process_row(smpl, ctx, idx, row);
      const llama_token x = coupled_sample(std::span<const float>(row, n_vocab_), target_sp(),
                                           coupled_key(seed_, index), cws_);
      probs_.keep_row(row, x);
      return x;
    } catch (const std::exception& e) {
      LOG_WRN("specdec: %s; this token is sampled by llama.cpp\n", e.what());
      probs_.clear();
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
  /// vocabulary wide): a draw (under the target's coupled key with the coupled rule; the argmax
  /// when the request is greedy) from the row processed by the request's own sampler `smpl` as
  /// the target's rows are (logit bias, penalties, truncations on the unscaled logits, then the
  /// temperature; the grammar apart), among the ids the target has too, its q kept for verify().
  /// Returns LLAMA_TOKEN_NULL to end the draft: when the draft model's largest probability is
  /// below `p_min` (llama.cpp's --spec-draft-p-min), or on a row specdec refuses.
  llama_token draft(common_sampler* smpl, const float* logits, std::size_t i, float p_min) {
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
        draft_law(smpl, row, std::span<float>(q, n_vocab_));
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
    probs_.clear();
    rows_read_.assign(idxs.begin(), idxs.end());
    if (rule_ == rule::stock) {
      out = sample_and_match(smpl, ctx, idxs, draft);
    } else {
      try {
        out = verify_rows(smpl, ctx, idxs, draft, index, replay);
      } catch (const std::exception& e) {
        LOG_WRN("specdec: %s; this step is verified by llama.cpp\n", e.what());
        common_sampler_copy(saved, smpl);
        probs_.clear();
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
  bool has_probs(std::size_t i) const noexcept { return probs_.has(i); }

  /// The post-sampling probabilities of the i-th token the last step emitted: its probability
  /// and the request's n_probs most probable tokens (none of probability 0), each from the row
  /// its token was drawn from, processed as stock processes it (the law it was drawn from).
  emitted_probs emitted_probability(std::size_t i) const { return probs_.get(i); }

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

  // q: the draft model's row (the shared ids) through the request's chain, as probabilities over
  // the target's vocabulary (0 where the chain cut a token, and beyond the shared ids). Throws
  // std::invalid_argument when the chain leaves no token.
  void draft_law(common_sampler* smpl, std::span<const float> row, std::span<float> q) {
    std::fill(q.begin(), q.end(), 0.0f);
    common_sampler_process_logits(smpl, row.data(), static_cast<int>(row.size()));
    const llama_token_data_array* c = common_sampler_get_candidates(smpl, false);
    constexpr float none = -std::numeric_limits<float>::infinity();
    float top = none;
    for (std::size_t j = 0; j < c->size; ++j) top = std::max(top, c->data[j].logit);
    if (!(top > none) || !std::isfinite(top)) throw std::invalid_argument("the draft row leaves no token after the request's sampler chain");
    double total = 0.0;
    for (std::size_t j = 0; j < c->size; ++j) {
      const llama_token_data& t = c->data[j];
      if (t.id < 0 || static_cast<std::size_t>(t.id) >= row.size() || !(t.logit > none)) continue;
      const double w = std::exp(static_cast<double>(t.logit) - static_cast<double>(top));
      q[static_cast<std::size_t>(t.id)] = static_cast<float>(w);
      total += w;
    }
    const float scale = static_cast<float>(1.0 / total);
    for (float& v : q) v *= scale;
  }

  // The largest probability of a row of logits at temperature 1.
  static float top_probability(std::span<const float> logits) {
    return static_cast<float>(std::exp(static_cast<double>(checked_max(logits)) -
                                       log_sum_exp(logits)));
  }

  // llama.cpp's sample-and-match (common_sampler_sample_and_accept_n), keeping each row's
  // candidates for the post-sampling probabilities.
  std::vector<llama_token> sample_and_match(common_sampler* smpl, llama_context* ctx,
                                            const std::vector<int>& idxs, const llama_tokens& draft) {
    std::vector<llama_token> out;
    out.reserve(idxs.size());
    for (std::size_t i = 0; i < idxs.size(); ++i) {
      const llama_token x = common_sampler_sample(smpl, ctx, idxs[i]);
      probs_.keep_candidates(smpl, x);
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
    for (std::size_t i = 0; i < out.size(); ++i) probs_.keep_row(buffer + i * n_vocab_, out[i]);
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
  emitted_probs_keeper probs_;              // the emitted tokens' probabilities (n_probs)
  std::vector<int> rows_read_;               // the last verify()'s rows in the target's batch
  rng gen_;
  rejection_workspace rws_;
  coupled_workspace cws_;
};

}  // namespace specdec::llama_server
