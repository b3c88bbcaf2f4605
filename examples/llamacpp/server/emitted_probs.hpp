// examples/llamacpp/server/emitted_probs.hpp - the post-sampling probabilities of the tokens a
// slot emitted in one step (llama-server's n_probs with post_sampling_probs), drafted or not, as
// stock reports them for the same row. Compiled inside llama.cpp's tools/server
// (common/sampling.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "llama.h"
#include "sampling.h"

#include <specdec/math/softmax.hpp>

namespace specdec::llama_server {

/// What a request is told about one emitted token's distribution (llama-server's n_probs with
/// post_sampling_probs): the token's probability and the most probable tokens, in order.
struct emitted_probs {
  float prob = 1.0f;
  std::span<const llama_token_data> top;
};

/**
 * Keeps, for each token a step emits, its probability and the request's n_probs most probable
 * tokens, from the law it was drawn from. start() at each request, clear() at each step, then one
 * keep_row() or keep_candidates() per emitted token, in order. Nothing is allocated once the
 * buffers have held the step with the most emitted tokens.
 */
class emitted_probs_keeper {
 public:
  /// A request asking for `n_probs` (0: nothing is kept) over a vocabulary of `n_vocab`.
  void start(std::size_t n_probs, std::size_t n_vocab) {
    n_probs_ = n_probs;
    n_vocab_ = n_vocab;
    count_ = 0;
  }

  /// A new step: nothing kept yet.
  void clear() noexcept { count_ = 0; }

  /// Whether the i-th token of this step has its probabilities kept.
  bool has(std::size_t i) const noexcept { return i < count_; }

  /// The i-th token's probabilities (has(i) must hold).
  emitted_probs get(std::size_t i) const {
    return {token_[i], std::span<const llama_token_data>(top_.data() + i * n_probs_, top_n_[i])};
  }

  /// Keeps token x's probability and the top n_probs of a processed row (n_vocab logits, -inf
  /// where the law is 0), as llama.cpp's dist sampler reports them: p = softmax in float, zeros
  /// dropped.
  void keep_row(const float* row, llama_token x) {
    if (n_probs_ == 0) return;
    const std::size_t slot = next_slot();
    const std::span<const float> logits(row, n_vocab_);
    const double lse = log_sum_exp(logits);
    const auto prob = [&](std::size_t id) {
      return static_cast<float>(std::exp(static_cast<double>(logits[id]) - lse));
    };
    token_[slot] = prob(static_cast<std::size_t>(x));
    order_.clear();
    for (std::size_t id = 0; id < n_vocab_; ++id)
      if (logits[id] > -std::numeric_limits<float>::infinity()) order_.push_back(static_cast<llama_token>(id));
    const std::size_t n = std::min(n_probs_, order_.size());
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(),
                      [&](llama_token a, llama_token b) {
                        return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
                      });
    std::size_t kept = 0;
    for (; kept < n; ++kept) {
      const llama_token id = order_[kept];
      const float p = prob(static_cast<std::size_t>(id));
      if (p == 0.0f) break;
      top_[slot * n_probs_ + kept] = {id, logits[static_cast<std::size_t>(id)], p};
    }
    top_n_[slot] = kept;
  }

  /// Keeps token x's probability and the top n_probs of llama.cpp's candidates after its own
  /// draw (what stock's populate_token_probs reads on its plain path).
  void keep_candidates(common_sampler* smpl, llama_token x) {
    if (n_probs_ == 0) return;
    const std::size_t slot = next_slot();
    const llama_token_data_array* cur = common_sampler_get_candidates(smpl, true);
    token_[slot] = 1.0f;
    for (std::size_t j = 0; j < cur->size; ++j)
      if (cur->data[j].id == x) {
        token_[slot] = cur->data[j].p;
        break;
      }
    std::size_t kept = 0;
    for (; kept < std::min(n_probs_, cur->size) && cur->data[kept].p != 0.0f; ++kept)
      top_[slot * n_probs_ + kept] = cur->data[kept];
    top_n_[slot] = kept;
  }

 private:
  // The entry of the next emitted token (n_probs_ top entries wide).
  std::size_t next_slot() {
    const std::size_t i = count_++;
    if (token_.size() < count_) {
      token_.resize(count_);
      top_n_.resize(count_);
    }
    // (sized apart: a request may ask for more n_probs than the one that sized token_)
    if (top_.size() < count_ * n_probs_) top_.resize(count_ * n_probs_);
    return i;
  }

  std::size_t n_probs_ = 0;            // the request's n_probs (0: none kept)
  std::size_t n_vocab_ = 0;            // a processed row's width
  std::size_t count_ = 0;              // emitted tokens of this step with probs kept
  std::vector<float> token_;           // ... each one's probability
  std::vector<std::size_t> top_n_;     // ... how many top tokens each has
  std::vector<llama_token_data> top_;  // ... the top tokens, n_probs_ a token
  std::vector<llama_token> order_;     // keep_row's sort
};

}  // namespace specdec::llama_server
