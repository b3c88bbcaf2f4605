// llamacpp/adapters/context_model.hpp - one llama.cpp context as a specdec::LanguageModel: the adapter an
// engine author copies. Each member is a few lines naming the llama.cpp call it makes:
//   append   = one llama_decode with a row of logits for every token (llama_get_logits_ith)
//   prefill  = llama_decode without logits, in chunks of n_batch
//   truncate = llama_memory_seq_rm from the kept length on
// The context holds sequence 0 only; the tokens it holds are kept here too (tokens()).
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/concepts/language_model.hpp>
#include <specdec/types.hpp>

#include "llamacpp/adapters/gguf_model.hpp"

namespace specdec::llamacpp {

/**
 * A llama_context decoding one sequence (seq id 0), as a specdec::LanguageModel with prefill()
 * and tokens(). Bad input throws before llama.cpp is called and changes nothing; a failing
 * llama_decode throws llama_error naming it, after removing whatever the failed call left in the
 * KV cache, so size(), tokens() and the cache still agree. Not thread-safe (specdec never calls
 * a model from two threads).
 */
class context_model {
 public:
  /// A context on `model` (which must outlive this) made with `options`.
  context_model(const gguf_model& model, const context_options& options = {})
      : model_(model),
        ctx_(model, options),
        batch_(llama_n_batch(ctx_.get()), std::max<std::size_t>(1, options.n_seq_max)),
        vocab_(model.vocab_size()),
        n_batch_(llama_n_batch(ctx_.get())),
        max_size_(llama_n_ctx_seq(ctx_.get())) {
    tokens_.reserve(max_size_);
  }

  std::size_t vocab_size() const noexcept { return vocab_; }
  std::size_t size() const noexcept { return tokens_.size(); }
  /// The KV cache's length for this sequence (llama_n_ctx_seq).
  std::size_t max_size() const noexcept { return max_size_; }
  /// The most tokens one llama_decode takes; longer appends are split into calls of this many.
  std::size_t batch_size() const noexcept { return n_batch_; }
  /// The size() tokens the context holds, in order.
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  llama_context* context() const noexcept { return ctx_.get(); }
  const gguf_model& model() const noexcept { return model_; }

  /// Feeds `tokens` after the context and writes one row of V logits per token. One
  /// llama_decode when tokens.size() <= batch_size(), else one per batch_size() tokens.
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    check_tokens(tokens, "append");
    if (logits.size() != tokens.size() * vocab_)
      throw std::invalid_argument("append: logits has " + std::to_string(logits.size()) +
                                  " floats, expected tokens.size() x vocab_size() = " +
                                  std::to_string(tokens.size() * vocab_));
    decode_chunks(tokens, "append", true, [&](std::size_t done, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) copy_logits(i, logits.data() + (done + i) * vocab_);
    });
  }

  /// append without logits: llama_decode with no output row (the classifier is skipped).
  void prefill(std::span<const token_id> tokens) {
    check_tokens(tokens, "prefill");
    decode_chunks(tokens, "prefill", false, [](std::size_t, std::size_t) {});
  }

  /// Keeps the first n tokens: llama_memory_seq_rm(seq 0, from n on).
  void truncate(std::size_t n) {
    if (n > size())
      throw std::invalid_argument("truncate: n = " + std::to_string(n) + " exceeds size() = " +
                                  std::to_string(size()));
    if (n == size()) return;
    if (!llama_memory_seq_rm(ctx_.memory(), 0, static_cast<llama_pos>(n), -1))
      throw llama_error("llama_memory_seq_rm(seq 0, from " + std::to_string(n) + ") failed");
    tokens_.resize(n);
  }

 protected:
  /// Refuses an empty span, ids outside [0, V) and a context past max_size(), naming `who`.
  void check_tokens(std::span<const token_id> tokens, const char* who) const {
    if (tokens.empty()) throw std::invalid_argument(std::string(who) + ": no tokens");
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= vocab_)
        throw std::out_of_range(std::string(who) + ": tokens[" + std::to_string(i) + "] = " +
                                std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                                std::to_string(vocab_) + ")");
    if (tokens.size() > max_size_ - size())
      throw std::length_error(std::string(who) + ": " + std::to_string(tokens.size()) +
                              " tokens after " + std::to_string(size()) +
                              " exceed the context's max_size() = " + std::to_string(max_size_) +
                              " (raise -c / context_options.n_ctx)");
  }

  /// llama_decode of the batch; on failure, drops what the call may have left in the cache past
  /// size() (every sequence's cells from there on) and throws llama_error.
  void decode_or_throw(const char* what) {
    const int rc = llama_decode(ctx_.get(), batch_.get());
    if (rc == 0) return;
    llama_memory_seq_rm(ctx_.memory(), -1, static_cast<llama_pos>(size()), -1);
    throw llama_error(std::string("llama_decode failed with ") + std::to_string(rc) + " (" +
                      (rc == 1 ? "no KV cache slot for the batch"
                               : rc == 2 ? "aborted" : "invalid batch or compute error") +
                      ") for " + what + " of " + std::to_string(batch_.get().n_tokens) +
                      " tokens at size " + std::to_string(size()));
  }

  /// Row i of the last llama_decode's output (llama_get_logits_ith), copied to `out`.
  void copy_logits(std::size_t i, float* out) {
    const float* row = llama_get_logits_ith(ctx_.get(), static_cast<std::int32_t>(i));
    if (row == nullptr)
      throw llama_error("llama_get_logits_ith(" + std::to_string(i) + ") returned no row");
    std::memcpy(out, row, vocab_ * sizeof(float));
  }

  /// Decodes `tokens` (already checked) after the context in sequence 0, in llama_decode calls
  /// of at most n_batch tokens, each token an output when `outputs`. After each call,
  /// rows(done, n) copies what it needs of that call's n output rows (tokens done..done+n-1),
  /// then those tokens join the context. All or nothing: when a call or `rows` throws, every
  /// cell from the old size() on is removed (the failed chunk's too, which is in the cache but
  /// not yet in tokens()), so the context is exactly as before.
  template <class Rows>
  void decode_chunks(std::span<const token_id> tokens, const char* who, bool outputs, Rows&& rows) {
    const std::size_t start = size();
    try {
      for (std::size_t done = 0; done < tokens.size();) {
        const std::size_t n = std::min(n_batch_, tokens.size() - done);
        batch_.clear();
        for (std::size_t i = 0; i < n; ++i)
          batch_.add(tokens[done + i], static_cast<llama_pos>(size() + i),
                     std::initializer_list<int>{0}, outputs);
        decode_or_throw(who);
        rows(done, n);
        tokens_.insert(tokens_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(done),
                       tokens.begin() + static_cast<std::ptrdiff_t>(done + n));
        done += n;
      }
    } catch (...) {
      llama_memory_seq_rm(ctx_.memory(), -1, static_cast<llama_pos>(start), -1);
      tokens_.resize(start);
      throw;
    }
  }

  const gguf_model& model_;
  llama_context_handle ctx_;
  batch_handle batch_;
  std::vector<token_id> tokens_;
  std::size_t vocab_, n_batch_, max_size_;
};

static_assert(LanguageModel<context_model> && PrefillLanguageModel<context_model>);

}  // namespace specdec::llamacpp
