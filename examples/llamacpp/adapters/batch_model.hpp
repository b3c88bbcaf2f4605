// llamacpp/adapters/batch_model.hpp - several sequences of ONE llama.cpp context as a
// specdec::BatchLanguageModel (with prefill), for specdec::batch_decoder: every score() is one
// llama_decode holding the rows of all its entries.
//   sequence        = a llama.cpp sequence id, one of the context's n_seq_max slots
//   score(batch)    = one llama_batch, entry e's tokens in sequence slot(e) at positions
//                     size(e), size(e) + 1, ..., each with a row of logits; one llama_decode
//   prefill         = the same for one entry, no row asked for
//   truncate        = llama_memory_seq_rm(slot, n, -1)
//   release         = llama_memory_seq_rm(slot, -1, -1); the slot is free for a new sequence
// The context is made with kv_unified: one KV buffer whose cells are tagged with their sequence,
// so llama.cpp puts the whole batch in one ubatch (one forward pass over all rows) and each row
// attends to its own sequence's cells only. All sequences share the context's n_ctx cells, so
// each may hold n_ctx / n_seq_max of them (max_size(), as llama-server splits -c among its -np
// slots): a sequence that reaches it ends context_full however full the others are.
// Rows (measured, docs/llamacpp.md): Q8_0 rows are the same bits alone or beside other
// sequences; F32 rows move by up to 5.5e-4, as llama.cpp's F32 kernels sum in an order that
// depends on how many rows a call has.
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/concepts/batch_language_model.hpp>
#include <specdec/types.hpp>

#include "llamacpp/adapters/gguf_model.hpp"

namespace specdec::llamacpp {

/// `o` for up to `sequences` live sequences (n_seq_max) in one unified KV cache, each holding up
/// to n_ctx / sequences tokens (batch_model::max_size(); llama.cpp rounds n_ctx up to a multiple
/// of 256).
inline context_options batch_context_options(std::size_t sequences, context_options o = {}) {
  o.n_seq_max = sequences;
  o.kv_unified = true;
  return o;
}

/**
 * Up to max_sequences() sequences in one llama_context (specdec::BatchPrefillLanguageModel).
 * Chains only: an entry with parents (a tree) is refused. score() is one llama_decode for every
 * entry (at most max_batch_tokens() rows in all); the n_ctx cells of the KV cache are shared by
 * the live sequences, max_size() = n_ctx / n_seq_max each, so every sequence has room up to its
 * max_size() whatever the others hold (the decoders end a sequence there, context_full). Ids
 * are never reused (a released id stays unknown); slots are. Bad input throws before llama.cpp
 * runs and changes nothing; a failing llama_decode throws llama_error naming it after removing
 * what it left in every entry's sequence. Not thread-safe.
 */
class batch_model {
 public:
  /// A context on `model` (which must outlive this) made with `options` (kv_unified forced).
  explicit batch_model(const gguf_model& model, context_options options = batch_context_options(8))
      : model_(model),
        ctx_(model, batch_context_options(options.n_seq_max, options)),
        batch_(llama_n_batch(ctx_.get()), 1),
        vocab_(model.vocab_size()),
        n_batch_(llama_n_batch(ctx_.get())),
        n_ctx_(llama_n_ctx(ctx_.get())),
        slots_(llama_n_seq_max(ctx_.get())) {}

  std::size_t vocab_size() const noexcept { return vocab_; }
  /// The longest context of one sequence: its share of the context's n_ctx cells, n_ctx /
  /// n_seq_max, so that every live sequence has room for its whole max_size() at once.
  std::size_t max_size() const noexcept { return n_ctx_ / slots_.size(); }
  /// The most rows one score() takes (the context's n_batch).
  std::size_t max_batch_tokens() const noexcept { return n_batch_; }
  /// The most live sequences (the context's n_seq_max).
  std::size_t max_sequences() const noexcept { return slots_.size(); }
  /// KV cells held by all live sequences together (at most max_size()).
  std::size_t cells_used() const noexcept { return used_; }
  llama_context* context() const noexcept { return ctx_.get(); }
  const gguf_model& model() const noexcept { return model_; }

  /// A new empty sequence in a free slot. std::length_error when max_sequences() are live.
  sequence_id create_sequence() {
    for (std::size_t s = 0; s < slots_.size(); ++s)
      if (!slots_[s].live) {
        slots_[s] = {next_id_++, true, {}};
        return slots_[s].id;
      }
    throw std::length_error("batch_model::create_sequence: " + std::to_string(slots_.size()) +
                            " sequences are live, the context's n_seq_max (raise "
                            "context_options.n_seq_max, at most 256)");
  }

  /// Frees `id`'s cells (llama_memory_seq_rm of its whole slot). std::invalid_argument for an
  /// unknown id.
  void release_sequence(sequence_id id) {
    const std::size_t s = find(id, "release_sequence");
    if (!llama_memory_seq_rm(ctx_.memory(), static_cast<llama_seq_id>(s), -1, -1))
      throw llama_error("llama_memory_seq_rm(seq " + std::to_string(s) + ", all) failed");
    used_ -= slots_[s].tokens.size();
    slots_[s] = {};
  }

  /// Tokens in `id`'s context. std::invalid_argument for an unknown id.
  std::size_t size(sequence_id id) const { return slots_[find(id, "size")].tokens.size(); }
  /// The size(id) tokens sequence `id` holds, in order.
  std::span<const token_id> tokens(sequence_id id) const {
    return slots_[find(id, "tokens")].tokens;
  }

  /// Keeps `id`'s first n tokens: llama_memory_seq_rm(slot, n, -1). std::invalid_argument for
  /// an unknown id or n > size(id).
  void truncate(sequence_id id, std::size_t n) {
    const std::size_t s = find(id, "truncate");
    auto& t = slots_[s].tokens;
    if (n > t.size())
      throw std::invalid_argument("batch_model::truncate: n = " + std::to_string(n) +
                                  " exceeds size = " + std::to_string(t.size()) + " of sequence " +
                                  std::to_string(id));
    if (n == t.size()) return;
    if (!llama_memory_seq_rm(ctx_.memory(), static_cast<llama_seq_id>(s), static_cast<llama_pos>(n),
                             -1))
      throw llama_error("llama_memory_seq_rm(seq " + std::to_string(s) + ", from " +
                        std::to_string(n) + ") failed");
    used_ -= t.size() - n;
    t.resize(n);
  }

  /// Every entry's tokens after its sequence's context, in ONE llama_decode; row i of entry e's
  /// logits is the next-token logits after its context and tokens[0..i]. Refused before
  /// llama.cpp runs: an unknown id, a sequence twice, an empty entry, a tree entry, a token
  /// outside [0, V), a wrong logits size (std::invalid_argument / std::out_of_range); a
  /// sequence past max_size() or more rows than max_batch_tokens() (std::length_error).
  void score(std::span<const batch_entry> batch) {
    check(batch, "score");
    decode(batch, true);
  }

  /// score() of the one entry {id, tokens} writing no logits (llama.cpp skips the classifier).
  void prefill(sequence_id id, std::span<const token_id> tokens) {
    const batch_entry e{id, tokens, {}, {}};
    check(std::span<const batch_entry>(&e, 1), "prefill");
    decode(std::span<const batch_entry>(&e, 1), false);
  }

 private:
  struct slot {
    sequence_id id = 0;
    bool live = false;
    std::vector<token_id> tokens;
  };

  std::size_t find(sequence_id id, const char* who) const {
    for (std::size_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].live && slots_[s].id == id) return s;
    throw std::invalid_argument("batch_model::" + std::string(who) + ": sequence " +
                                std::to_string(id) + " is unknown (never created, or released)");
  }

  void check(std::span<const batch_entry> batch, const char* who) {
    std::size_t rows = 0;
    seen_.clear();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const batch_entry& e = batch[i];
      const std::size_t s = find(e.sequence, who);
      const std::string where = "batch_model::" + std::string(who) + ": entry " +
                                std::to_string(i) + " (sequence " + std::to_string(e.sequence) +
                                "): ";
      if (std::find(seen_.begin(), seen_.end(), s) != seen_.end())
        throw std::invalid_argument(where + "the sequence is already in this call");
      seen_.push_back(s);
      if (e.tokens.empty()) throw std::invalid_argument(where + "tokens is empty");
      if (!e.parents.empty())
        throw std::invalid_argument(where + "a token tree; batch_model scores chains only");
      for (std::size_t j = 0; j < e.tokens.size(); ++j)
        if (e.tokens[j] < 0 || static_cast<std::size_t>(e.tokens[j]) >= vocab_)
          throw std::out_of_range(where + "tokens[" + std::to_string(j) +
                                  "] = " + std::to_string(e.tokens[j]) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
      if (std::string(who) == "score" && e.logits.size() != e.tokens.size() * vocab_)
        throw std::invalid_argument(where + "logits has " + std::to_string(e.logits.size()) +
                                    " floats, expected tokens.size() x vocab_size() = " +
                                    std::to_string(e.tokens.size() * vocab_));
      if (e.tokens.size() > max_size() - slots_[s].tokens.size())
        throw std::length_error(where + std::to_string(e.tokens.size()) + " tokens after " +
                                std::to_string(slots_[s].tokens.size()) + " exceed max_size() = " +
                                std::to_string(max_size()) + " (n_ctx " + std::to_string(n_ctx_) +
                                " / n_seq_max " + std::to_string(slots_.size()) + ")");
      rows += e.tokens.size();
    }
    if (rows > n_batch_)
      throw std::length_error("batch_model::" + std::string(who) + ": " + std::to_string(rows) +
                              " rows exceed max_batch_tokens() = " + std::to_string(n_batch_) +
                              " (one llama_decode; context_options.n_batch)");
  }

  /// One llama_decode of the checked entries; rows copied in batch order when `logits`.
  void decode(std::span<const batch_entry> batch, bool logits) {
    batch_.clear();
    for (const batch_entry& e : batch) {
      const std::size_t s = find(e.sequence, "score");
      const auto base = static_cast<llama_pos>(slots_[s].tokens.size());
      for (std::size_t j = 0; j < e.tokens.size(); ++j)
        batch_.add(e.tokens[j], base + static_cast<llama_pos>(j),
                   std::initializer_list<std::size_t>{s}, logits);
    }
    const int rc = llama_decode(ctx_.get(), batch_.get());
    if (rc != 0) {
      forget(batch);  // whatever the failed call stored goes again
      throw llama_error("llama_decode failed with " + std::to_string(rc) + " (" +
                        (rc == 1   ? "no KV cache slot for the batch"
                         : rc == 2 ? "aborted"
                                   : "invalid batch or compute error") +
                        ") for " + std::to_string(batch.size()) + " entries, " +
                        std::to_string(batch_.get().n_tokens) + " tokens");
    }
    try {
      std::int32_t row = 0;
      for (const batch_entry& e : batch)
        for (std::size_t j = 0; logits && j < e.tokens.size(); ++j, ++row) {
          const float* p = llama_get_logits_ith(ctx_.get(), row);
          if (p == nullptr)
            throw llama_error("llama_get_logits_ith(" + std::to_string(row) + ") returned no row");
          std::memcpy(e.logits.data() + j * vocab_, p, vocab_ * sizeof(float));
        }
    } catch (...) {
      forget(batch);
      throw;
    }
    for (const batch_entry& e : batch) {
      auto& t = slots_[find(e.sequence, "score")].tokens;
      t.insert(t.end(), e.tokens.begin(), e.tokens.end());
      used_ += e.tokens.size();
    }
  }

  /// Removes the cells a call stored for its entries (llama_memory_seq_rm past each size).
  void forget(std::span<const batch_entry> batch) {
    for (const batch_entry& e : batch) {
      const std::size_t s = find(e.sequence, "score");
      llama_memory_seq_rm(ctx_.memory(), static_cast<llama_seq_id>(s),
                          static_cast<llama_pos>(slots_[s].tokens.size()), -1);
    }
  }

  const gguf_model& model_;
  llama_context_handle ctx_;
  batch_handle batch_;
  std::size_t vocab_, n_batch_, n_ctx_;
  std::vector<slot> slots_;
  std::vector<std::size_t> seen_;
  std::size_t used_ = 0;
  sequence_id next_id_ = 1;
};

static_assert(BatchPrefillLanguageModel<batch_model>);

}  // namespace specdec::llamacpp
