// tests/compile_errors/adapters.hpp - the adapters the compile-error tests use: one that models
// specdec::LanguageModel, and the mistakes a newcomer makes first, each missing or mistyping one
// member. Also read by tests/compile_fail/missing_const.cpp.
#pragma once

#include <cstddef>
#include <span>

#include <specdec/concepts/batch_language_model.hpp>
#include <specdec/types.hpp>

namespace adapters {

// The four members, right.
struct good_model {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() const { return n; }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  void truncate(std::size_t to) { n = to; }
  std::size_t n = 0;
};

// No truncate().
struct no_truncate {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() const { return n; }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  std::size_t n = 0;
};

// size() without const.
struct size_not_const {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() { return n; }  // should be const
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  void truncate(std::size_t to) { n = to; }
  std::size_t n = 0;
};

// A batch engine without truncate(id, n).
struct batch_no_truncate {
  std::size_t vocab_size() const { return 4; }
  specdec::sequence_id create_sequence() { return next++; }
  void release_sequence(specdec::sequence_id) {}
  std::size_t size(specdec::sequence_id) const { return 0; }
  void score(std::span<const specdec::batch_entry>) {}
  specdec::sequence_id next = 0;
};

}  // namespace adapters
