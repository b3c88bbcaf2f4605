// specdec/draft/model_drafter.hpp - drafts with a smaller LanguageModel (classic speculative decoding).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * Drafts k tokens autoregressively from a draft model, warped exactly like the target
 * (same sampling_params), and keeps the q row each token was drawn from (none when greedy: the
 * drafts are then deterministic).
 *
 * The drafter owns the draft model's context: it remembers which tokens its cache holds and, on
 * each propose, rolls the cache back to the longest prefix still in the history (after a
 * rejection, that drops the rejected drafts) and feeds the missing tokens in one append.
 * Cost per propose: one append of the tokens the history gained, then k - 1 single-token appends.
 * Not thread-safe. The model must outlive the drafter.
 */
template <class Model>
class model_drafter {
  static_assert(detail::check_language_model<Model>());

 public:
  explicit model_drafter(Model& model) : model_(model) {}

  Model& model() noexcept { return model_; }
  std::size_t vocab_size() const { return static_cast<std::size_t>(model_.vocab_size()); }
  /// Number of append calls made on the draft model since construction.
  std::size_t model_calls() const noexcept { return calls_; }

  /// Forgets the cached context: the next propose starts from an empty draft cache.
  void reset() {
    model_.truncate(0);
    cached_.clear();
  }

  /// Nothing to do: the next propose re-synchronises from the history in O(k).
  void accept(std::span<const token_id> /*committed*/) noexcept {}

  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp,
               rng& gen, draft& out) {
    const std::size_t v = vocab_size();
    out.clear();
    if (k == 0 || history.empty()) return;
    const std::size_t capacity = max_size_of(model_);
    if (history.size() > capacity) return;  // the draft cannot hold this context: propose nothing
    k = std::min(k, capacity - history.size() + 1);

    // Roll the draft cache back to the longest prefix it shares with the history, keeping at
    // least one token to feed so that we get the logits after the last history token.
    if (cached_.size() != static_cast<std::size_t>(model_.size())) reset();  // used elsewhere
    std::size_t common = 0;
    const std::size_t limit = std::min(cached_.size(), history.size() - 1);
    while (common < limit && cached_[common] == history[common]) ++common;
    model_.truncate(common);
    cached_.resize(common);
    feed(history.subspan(common));

    out.tokens.reserve(k);
    if (!sp.greedy()) out.q.resize(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(v));
    for (std::size_t j = 0; j < k; ++j) {
      const std::span<const float> last(logits_.data() + logits_.size() - v, v);
      token_id t;
      if (sp.greedy()) {
        t = argmax(last);
      } else {
        std::span<float> q(out.q.row(static_cast<Eigen::Index>(j)).data(), v);
        warp(last, sp, q, ws_);
        t = sample(q, gen);
      }
      out.tokens.push_back(t);
      if (j + 1 < k) feed(std::span<const token_id>(&out.tokens.back(), 1));
    }
  }

 private:
  void feed(std::span<const token_id> tokens) {
    const std::size_t v = vocab_size();
    logits_.resize(tokens.size() * v);
    model_.append(tokens, std::span<float>(logits_));
    ++calls_;
    cached_.insert(cached_.end(), tokens.begin(), tokens.end());
  }

  Model& model_;
  std::vector<token_id> cached_;  // the tokens in the draft model's context, in lockstep with it
  std::vector<float> logits_;
  warp_workspace ws_;
  std::size_t calls_ = 0;
};

}  // namespace specdec
