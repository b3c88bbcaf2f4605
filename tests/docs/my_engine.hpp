// tests/docs/my_engine.hpp - the engine the docs' adapters wrap, made small but real so that
// tests/docs/adapter_doc_test.cpp can run the conformance kit on the adapter of docs/adapter.md.
//
// A session is a KV "cache" of tokens and a capacity; the logits after a context are a hash of
// its last two tokens, the same for a batch as for one token at a time. Like an engine's C API it
// trusts its caller: forward() writes n rows at `logits` whatever the buffer's length, and keeps
// tokens past capacity() (in a growing vector, so that an adapter that forgets to check is
// reported by the kit instead of corrupting memory). Checking the input is the adapter's job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <specdec/types.hpp>

namespace my_engine {

class session {  // an engine's sequence and its KV cache
 public:
  explicit session(std::size_t vocab = 32, std::size_t capacity = 64)
      : vocab_(vocab), capacity_(capacity) {}

  std::size_t vocab() const { return vocab_; }
  std::size_t tokens_in_cache() const { return cache_.size(); }
  std::size_t capacity() const { return capacity_; }

  /// Appends n tokens and writes n rows of vocab() logits at `logits`.
  void forward(const specdec::token_id* tokens, std::size_t n, float* logits) {
    for (std::size_t i = 0; i < n; ++i) {
      cache_.push_back(tokens[i]);
      const std::uint64_t prev = cache_.size() > 1 ? token_hash(cache_[cache_.size() - 2]) : 0;
      const std::uint64_t h = mix(prev ^ token_hash(tokens[i]));
      for (std::size_t t = 0; t < vocab_; ++t)
        logits[i * vocab_ + t] = static_cast<float>(mix(h + t) % 2001) / 500.0f - 2.0f;
    }
  }

  /// Keeps the first n tokens of the cache.
  void rollback_to(std::size_t n) {
    if (n < cache_.size()) cache_.resize(n);
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  static std::uint64_t token_hash(specdec::token_id t) {
    return mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(t)) + 0x9E3779B97F4A7C15ULL);
  }

  std::size_t vocab_, capacity_;
  std::vector<specdec::token_id> cache_;
};

}  // namespace my_engine
