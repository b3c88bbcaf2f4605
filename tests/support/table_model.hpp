// tests/support/table_model.hpp - a small real LanguageModel for tests: a fixed random n-gram table.
//
// The logits after a context depend on its last `order - 1` tokens only, through a seeded hash, so
// two models with the same seed agree and a different seed gives a different (draft-like) model.
// It keeps a real token cache that append/truncate act on, validates input like a real adapter,
// and counts its calls.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/types.hpp>

namespace specdec::test {

struct table_model_options {
  std::size_t vocab_size = 6;
  std::size_t order = 3;          ///< n of the n-gram: logits depend on the last n-1 tokens.
  std::uint64_t seed = 1;         ///< the table
  float scale = 2.0f;             ///< logit spread
  std::size_t max_size = std::numeric_limits<std::size_t>::max();
  /// Mix the target with another table: logits = (1-mix)*table(seed) + mix*table(mix_seed).
  /// Gives draft models that agree with the target to a chosen degree.
  float mix = 0.0f;
  std::uint64_t mix_seed = 2;
};

class table_model {
 public:
  explicit table_model(table_model_options options = {}) : o_(options) {}

  std::size_t vocab_size() const noexcept { return o_.vocab_size; }
  std::size_t size() const noexcept { return tokens_.size(); }
  std::size_t max_size() const noexcept { return o_.max_size; }
  std::span<const token_id> tokens() const noexcept { return tokens_; }

  void append(std::span<const token_id> tokens, std::span<float> logits) {
    const std::size_t v = o_.vocab_size;
    if (tokens.empty()) throw std::invalid_argument("table_model::append: tokens is empty");
    if (logits.size() != tokens.size() * v)
      throw std::invalid_argument("table_model::append: logits.size() must be tokens.size() * V");
    if (tokens_.size() + tokens.size() > o_.max_size)
      throw std::length_error("table_model::append: context would exceed max_size");
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= v)
        throw std::out_of_range("table_model::append: token " + std::to_string(tokens[i]) +
                                " outside the vocabulary");
    ++append_calls_;
    appended_tokens_ += tokens.size();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens_.push_back(tokens[i]);
      next_logits(tokens_, logits.subspan(i * v, v));
    }
  }

  void truncate(std::size_t n) {
    if (n > tokens_.size())
      throw std::out_of_range("table_model::truncate: n = " + std::to_string(n) +
                              " exceeds size() = " + std::to_string(tokens_.size()));
    tokens_.resize(n);
  }

  /// Next-token logits after `context` (the whole context; only its tail matters).
  void next_logits(std::span<const token_id> context, std::span<float> out) const {
    for (std::size_t t = 0; t < o_.vocab_size; ++t) {
      const float a = table_logit(o_.seed, context, t);
      if (o_.mix == 0.0f) {
        out[t] = a;
      } else {
        out[t] = (1.0f - o_.mix) * a + o_.mix * table_logit(o_.mix_seed, context, t);
      }
    }
  }

  std::size_t append_calls() const noexcept { return append_calls_; }
  std::size_t appended_tokens() const noexcept { return appended_tokens_; }

 private:
  static std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  float table_logit(std::uint64_t seed, std::span<const token_id> context, std::size_t t) const {
    std::uint64_t h = mix64(seed * 0x9E3779B97F4A7C15ULL + 17);
    const std::size_t n = std::min(context.size(), o_.order - 1);
    for (std::size_t i = context.size() - n; i < context.size(); ++i)
      h = mix64(h ^ (static_cast<std::uint64_t>(context[i]) + 0x1234567ULL));
    h = mix64(h ^ (t * 0xD6E8FEB86659FD93ULL));
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    return static_cast<float>(o_.scale * (2.0 * u - 1.0));
  }

  table_model_options o_;
  std::vector<token_id> tokens_;
  std::size_t append_calls_ = 0;
  std::size_t appended_tokens_ = 0;
};

}  // namespace specdec::test
