// specdec/detail/ngram_index.hpp - the incremental n-gram occurrence index behind ngram_drafter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "specdec/types.hpp"

namespace specdec::detail {

/**
 * std::allocator, except that on Linux blocks of 2 MiB or more are 2 MiB-aligned and advised as
 * transparent huge pages: the index is probed at random, and at contexts of 10^5..10^6 tokens
 * TLB misses would otherwise cost about as much as the cache misses themselves.
 */
template <class T>
struct ngram_allocator {
  using value_type = T;
  static constexpr std::size_t huge = std::size_t{2} << 20;

  ngram_allocator() = default;
  template <class U>
  ngram_allocator(const ngram_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
#if defined(__linux__)
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= huge) {
      const std::size_t rounded = (bytes + huge - 1) / huge * huge;
      void* p = std::aligned_alloc(huge, rounded);
      if (p == nullptr) throw std::bad_alloc();
      ::madvise(p, rounded, MADV_HUGEPAGE);  // advisory: failure only loses the speed-up
      return static_cast<T*>(p);
    }
#endif
    return std::allocator<T>{}.allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if defined(__linux__)
    if (n * sizeof(T) >= huge) {
      std::free(p);
      return;
    }
#endif
    std::allocator<T>{}.deallocate(p, n);
  }
  template <class U>
  bool operator==(const ngram_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using ngram_vector = std::vector<T, ngram_allocator<T>>;

/**
 * A depth-bounded suffix trie over the reversed token stream, stored as one open-addressing hash
 * table per n-gram length m = 1..max_m.
 *
 * The m-gram ending at position e is the class of (class of the (m-1)-gram ending at e, the token
 * at e - m + 1); a class is identified by the end position of its first occurrence. A table slot
 * keys a class by exactly that (parent class, token) pair, so equal keys mean equal n-grams: no
 * hash collision can produce a false match and no stored tokens are re-compared. The hash used to
 * place a slot is a polynomial hash of the n-gram's tokens, which depends on the tokens alone, so
 * the home slots of all lengths are known (and prefetched) before the first one is resolved.
 *
 * Per indexed position e and per length m in [min_m, max_m] the index keeps `prev(e, m)`, the end
 * of the previous occurrence of the same m-gram (or `none`): walking `prev` lists occurrences from
 * the most recent back. Each class also remembers its most recent occurrence ending at or before
 * `prompt_limit` (for prompt-only search).
 *
 * Cost: push is O(max_m) expected (amortised over table growth); memory O(n * max_m).
 */
class ngram_index {
 public:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

  ngram_index() = default;

  void configure(std::size_t min_m, std::size_t max_m) {
    min_m_ = min_m;
    max_m_ = max_m;
    levels_ = max_m - min_m + 1;
    tables_.assign(max_m_, table{});
    for (auto& t : tables_) t.init(initial_capacity);
    last_ids_.assign(max_m_, none);
    clear();
  }

  /// Forgets every token; keeps the table capacity for reuse. O(capacity).
  void clear() {
    tokens_.clear();
    prev_.clear();
    prompt_head_.clear();
    prompt_count_ = 0;  // prompt_head_ is empty: no position may be recorded in it
    for (auto& t : tables_) t.clear();
    std::fill(last_ids_.begin(), last_ids_.end(), none);
  }

  /// Pre-sizes storage for `n` tokens so that indexing up to n tokens never reallocates or
  /// rehashes (tables sized for the worst case: every n-gram distinct). O(n * max_m).
  void reserve(std::size_t n) {
    tokens_.reserve(n);
    prev_.reserve(n * levels_);
    for (std::size_t m = 1; m <= max_m_; ++m) tables_[m - 1].reserve(n, m, tokens_);
  }

  /// Occurrences ending at e < count are prompt occurrences (see prompt_head_of_last). Call it on
  /// an empty index: positions indexed before the call are not recorded.
  void set_prompt_count(std::uint32_t count) {
    prompt_count_ = count;
    prompt_head_.assign(static_cast<std::size_t>(prompt_count_) * levels_, none);
  }

  std::size_t size() const noexcept { return tokens_.size(); }
  /// Allocated bytes: tokens, links, prompt heads and every table. O(max_m).
  std::size_t memory_bytes() const noexcept {
    std::size_t bytes = (tokens_.capacity() + prev_.capacity() + prompt_head_.capacity()) * 4;
    for (const auto& t : tables_) bytes += t.slots.size() * sizeof(slot);
    return bytes;
  }
  std::span<const token_id> tokens() const noexcept { return tokens_; }

  /// End of the previous occurrence of the m-gram ending at e, or `none`. O(1).
  std::uint32_t prev(std::uint32_t e, std::size_t m) const noexcept {
    return prev_[static_cast<std::size_t>(e) * levels_ + (m - min_m_)];
  }

  /// Most recent prompt occurrence (end < prompt count) of the m-gram that ends at the last
  /// indexed position (possibly that position itself), or `none`. O(1).
  std::uint32_t prompt_head_of_last(std::size_t m) const noexcept {
    const std::uint32_t id = last_ids_[m - 1];
    if (id == none || id >= prompt_count_) return none;
    return prompt_head_[static_cast<std::size_t>(id) * levels_ + (m - min_m_)];
  }

  /// Appends tokens and indexes them; the table slots of token i + 1 are prefetched while token i
  /// is resolved, so cache misses of consecutive tokens overlap.
  void push(std::span<const token_id> ts) {
    if (ts.empty()) return;
    const std::size_t first = tokens_.size();
    tokens_.insert(tokens_.end(), ts.begin(), ts.end());
    prev_.resize(tokens_.size() * levels_, none);
    std::uint64_t hashes[2][max_levels];
    hash_and_prefetch(first, hashes[0]);
    for (std::size_t e = first; e < tokens_.size(); ++e) {
      if (e + 1 < tokens_.size()) hash_and_prefetch(e + 1, hashes[(e + 1 - first) & 1]);
      resolve(e, hashes[(e - first) & 1]);
    }
  }

  static constexpr std::size_t max_levels = 64;

 private:
  static constexpr std::uint32_t root = none - 1;
  static constexpr std::size_t initial_capacity = 64;

  std::size_t depth(std::size_t e) const noexcept { return std::min(max_m_, e + 1); }

  // hashes[m - 1] <- hash of the m-gram ending at e; prefetches its home slot.
  void hash_and_prefetch(std::size_t e, std::uint64_t* hashes) const noexcept {
    std::uint64_t h = 0;
    for (std::size_t m = 1; m <= depth(e); ++m) {
      h = extend(h, tokens_[e - (m - 1)]);
      hashes[m - 1] = h;
      tables_[m - 1].prefetch(h);
    }
  }

  // Finds or inserts the classes of the n-grams ending at e and links e to their previous ends.
  void resolve(std::size_t e, const std::uint64_t* hashes) {
    const auto pos = static_cast<std::uint32_t>(e);
    std::uint32_t parent = root;
    for (std::size_t m = 1; m <= depth(e); ++m) {
      const auto tok = static_cast<std::uint32_t>(tokens_[e - (m - 1)]);
      const auto [id, before] = tables_[m - 1].upsert(hashes[m - 1], parent, tok, pos, m, tokens_);
      if (m >= min_m_) {
        prev_[e * levels_ + (m - min_m_)] = before;
        if (pos < prompt_count_)
          prompt_head_[static_cast<std::size_t>(id) * levels_ + (m - min_m_)] = pos;
      }
      last_ids_[m - 1] = id;
      parent = id;
    }
    for (std::size_t m = depth(e) + 1; m <= max_m_; ++m) last_ids_[m - 1] = none;
  }

  static std::uint64_t extend(std::uint64_t h, token_id t) noexcept {
    return (h + static_cast<std::uint32_t>(t) + 1) * 0x9E3779B97F4A7C15ULL;
  }
  static std::uint64_t finalise(std::uint64_t h) noexcept {
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 29);
  }

  struct slot {
    std::uint32_t parent;
    std::uint32_t token;
    std::uint32_t id;    // end of the first occurrence; `none` marks an empty slot
    std::uint32_t head;  // end of the most recent occurrence
  };

  struct upsert_result {
    std::uint32_t id;
    std::uint32_t previous_head;
  };

  // Linear probing, load factor <= 1/2.
  struct table {
    ngram_vector<slot> slots;
    std::size_t mask = 0;
    std::size_t used = 0;

    void init(std::size_t capacity) {
      slots.assign(capacity, slot{0, 0, none, none});
      mask = capacity - 1;
      used = 0;
    }
    void reserve(std::size_t n, std::size_t m, const ngram_vector<token_id>& tokens) {
      std::size_t capacity = slots.size();
      while (capacity < 2 * n) capacity *= 2;
      if (capacity == slots.size()) return;
      ngram_vector<slot> old(capacity, slot{0, 0, none, none});
      old.swap(slots);
      mask = slots.size() - 1;
      rehash(old, m, tokens);
    }
    void clear() {
      std::fill(slots.begin(), slots.end(), slot{0, 0, none, none});
      used = 0;
    }
    void prefetch([[maybe_unused]] std::uint64_t h) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
      __builtin_prefetch(&slots[finalise(h) & mask]);
#endif
    }
    upsert_result upsert(std::uint64_t h, std::uint32_t parent, std::uint32_t tok, std::uint32_t e,
                         std::size_t m, const ngram_vector<token_id>& tokens) {
      if (2 * (used + 1) > slots.size()) grow(m, tokens);
      for (std::size_t i = finalise(h) & mask;; i = (i + 1) & mask) {
        slot& s = slots[i];
        if (s.id == none) {
          s = slot{parent, tok, e, e};
          ++used;
          return {e, none};
        }
        if (s.parent == parent && s.token == tok) {
          const std::uint32_t before = s.head;
          s.head = e;
          return {s.id, before};
        }
      }
    }
    // Doubles the table; a slot's home is recomputed from the tokens of its latest occurrence.
    void grow(std::size_t m, const ngram_vector<token_id>& tokens) {
      ngram_vector<slot> old(slots.size() * 2, slot{0, 0, none, none});
      old.swap(slots);
      mask = slots.size() - 1;
      rehash(old, m, tokens);
    }
    void rehash(const ngram_vector<slot>& old, std::size_t m,
                const ngram_vector<token_id>& tokens) {
      for (const slot& s : old) {
        if (s.id == none) continue;
        std::uint64_t h = 0;
        for (std::size_t j = 0; j < m; ++j) h = extend(h, tokens[s.head - j]);
        std::size_t i = finalise(h) & mask;
        while (slots[i].id != none) i = (i + 1) & mask;
        slots[i] = s;
      }
    }
  };

  std::size_t min_m_ = 1, max_m_ = 1, levels_ = 1;
  std::uint32_t prompt_count_ = 0;
  ngram_vector<token_id> tokens_;
  ngram_vector<std::uint32_t> prev_;  // [e * levels + (m - min_m)]
  ngram_vector<std::uint32_t>
      prompt_head_;                      // [class id * levels + (m - min_m)], ids < prompt count
  std::vector<std::uint32_t> last_ids_;  // class of the m-gram ending at the last position
  std::vector<table> tables_;            // tables_[m - 1] holds the m-grams
};

}  // namespace specdec::detail
