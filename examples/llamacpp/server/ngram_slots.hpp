// examples/llamacpp/server/ngram_slots.hpp - specdec's n-gram drafter for each sequence of a
// llama.cpp speculative context (the spec type ngram-specdec, patch 0010): one ngram_drafter per
// slot over that slot's own prompt and output, and, only when the user opts in, a cross-request
// cache of finished requests that every slot reads. No llama.cpp header: tests drive it directly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/draft/ngram_cache.hpp>
#include <specdec/draft/ngram_drafter.hpp>

namespace specdec::llama_server {

/// Settings of ngram_slots (llama.cpp's --spec-ngram-specdec-* flags).
struct ngram_slots_options {
  /// The shortest earlier match that drafts (ngram_options::min_ngram, >= 1): below it a slot
  /// drafts nothing, so text that does not repeat costs no verification.
  std::size_t min_match = 1;
  /// > 0: a draft holds at most ceil(adaptive * match length) tokens (ngram_options::
  /// adaptive_factor), so a short, doubtful match costs few verified tokens; 0 = off. Why 2:
  /// docs/results.md#ngram-types (the cap's rows against no cap).
  double adaptive = 2.0;
  /// Opt-in cross-request cache: a request's prompt and output join a cache that every slot's
  /// later requests read (their drafts may then quote them). Off by default, because a draft is
  /// visible to the request it is drafted for through timing and through the tokens it makes
  /// cheap, so one user's private text must not feed another user's drafts unless the operator
  /// says that all requests may share.
  bool shared = false;
  /// The cross-request cache's memory bound (ngram_cache_options::max_bytes, >= 4096).
  std::size_t shared_bytes = std::size_t{64} << 20;

  void validate() const {
    if (min_match < 1)
      throw std::invalid_argument("ngram_slots_options.min_match: must be >= 1, got " +
                                  std::to_string(min_match));
    if (!(adaptive >= 0.0 && adaptive <= 1e6))
      throw std::invalid_argument("ngram_slots_options.adaptive: must be in [0, 1e6], got " +
                                  std::to_string(adaptive));
    if (shared) ngram_cache_options{shared_bytes}.validate();
  }
};

/**
 * The drafters of n_seq sequences. begin() starts a request on a sequence (the previous one's
 * text enters the shared cache first when `shared` is on); draft() proposes up to n_max tokens
 * continuing prompt + id_last from the longest earlier match in that sequence's own text (and
 * the cache's, when shared). Each sequence's index is incremental (O(new tokens) amortised per
 * draft); draft() copies the history into a buffer it keeps, so a warm call allocates only
 * when the context grows past what it held. Not thread-safe (llama-server drafts from one
 * thread); the shared cache itself is.
 */
class ngram_slots {
 public:
  /// Throws std::invalid_argument naming the field when `options` is invalid.
  ngram_slots(std::size_t n_seq, ngram_slots_options options) : options_(options) {
    options_.validate();
    if (options_.shared)
      cache_ = std::make_shared<ngram_cache>(ngram_cache_options{options_.shared_bytes});
    ngram_options o;
    o.min_ngram = options_.min_match;
    o.adaptive_factor = options_.adaptive;
    o.max_draft = max_draft;
    o.cache = cache_;
    slots_.reserve(n_seq);
    for (std::size_t i = 0; i < n_seq; ++i) slots_.push_back(slot{ngram_drafter(o), {}});
  }

  const ngram_slots_options& options() const noexcept { return options_; }
  std::size_t size() const noexcept { return slots_.size(); }
  /// The cross-request cache, null unless `shared`.
  const ngram_cache* cache() const noexcept { return cache_.get(); }

  /// A new request on `seq`: with `shared`, the previous request's text (the last history this
  /// sequence drafted from) joins the cache, unless it alone could exceed the cache's bound (it
  /// is then left out, not an error: the server keeps serving); the drafter forgets it.
  /// `prompt` is unused: the first draft() indexes the history it is given.
  void begin(std::size_t seq, std::span<const token_id> /*prompt*/) {
    slot& s = at(seq, "begin");
    if (cache_ && !s.history.empty() &&
        ngram_cache::snapshot::bytes_bound(s.history.size(), 1) <= options_.shared_bytes)
      cache_->insert(s.history);
    s.history.clear();
    s.drafter.reset();
  }

  /// out <- up to min(n_max, max_draft) tokens continuing prompt + id_last (empty when no
  /// earlier match of at least min_match tokens exists). n_max = 0 drafts nothing.
  void draft(std::size_t seq, std::span<const token_id> prompt, token_id id_last, std::size_t n_max,
             std::vector<token_id>& out) {
    slot& s = at(seq, "draft");
    s.history.assign(prompt.begin(), prompt.end());
    s.history.push_back(id_last);
    s.drafter.propose_into(s.history, std::min(n_max, max_draft), out);
  }

  /// The most tokens a draft holds (llama-server caps it further with --spec-draft-n-max).
  static constexpr std::size_t max_draft = 256;

 private:
  struct slot {
    ngram_drafter drafter;
    std::vector<token_id> history;
  };
  slot& at(std::size_t seq, const char* who) {
    if (seq >= slots_.size())
      throw std::out_of_range(std::string("ngram_slots::") + who + ": seq " + std::to_string(seq) +
                              " is not below n_seq " + std::to_string(slots_.size()));
    return slots_[seq];
  }

  ngram_slots_options options_;
  std::shared_ptr<ngram_cache> cache_;
  std::vector<slot> slots_;
};

}  // namespace specdec::llama_server
