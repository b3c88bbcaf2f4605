// specdec/draft/ngram_cache.hpp - a cross-request cache for prompt lookup: an index over earlier
// generations, shared read-only by the ngram_drafters of one process, with a memory bound.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/detail/document_automaton.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Settings of ngram_cache; validate() throws std::invalid_argument naming the field and bound.
struct ngram_cache_options {
  /// Bound on the bytes of the published index (tokens, states, transitions); the oldest
  /// documents are evicted to stay under it. >= 4096.
  std::size_t max_bytes = std::size_t{64} << 20;

  void validate() const {
    if (max_bytes < 4096)
      throw std::invalid_argument("ngram_cache_options.max_bytes: must be >= 4096, got " +
                                  std::to_string(max_bytes));
  }
};

/**
 * Earlier generations (typically each finished request's output) indexed for prompt lookup, as
 * an immutable snapshot published through a shared_ptr. ngram_drafter searches it after the
 * request's own context (ngram_options::cache; see docs/ngram.md for the rule).
 *
 * Who may write while others read: any thread may call insert() at any time; inserts are
 * serialised among themselves, build the next snapshot aside and then publish it by swapping
 * one pointer under a mutex that readers hold only to copy that pointer. A reader (a drafter)
 * takes the current snapshot when it starts a sequence and reads it, without locks, until its
 * reset() or next sequence: a request sees the cache as it was when it started, never a
 * half-built index. A snapshot is freed when its last reader lets go of it.
 *
 * Memory: each published snapshot holds at most max_bytes (memory_bytes() <= max_bytes): insert
 * keeps the newest documents whose index fits and evicts the rest, oldest first. Snapshots still
 * held by readers live on until released, and a build needs about as much again transiently.
 * A document whose index alone could exceed max_bytes (at the worst case,
 * document_automaton::bytes_bound: about 60 bytes per token) is refused with
 * std::invalid_argument and the cache is left as it was.
 * Cost of insert: O(tokens kept) expected (the snapshot is rebuilt whole), on the inserting
 * thread; readers are never blocked by it.
 */
class ngram_cache {
 public:
  using snapshot = detail::document_automaton;

  /// Throws std::invalid_argument when `options` is invalid.
  explicit ngram_cache(ngram_cache_options options = {})
      : options_(options), current_(std::make_shared<const snapshot>()) {
    options_.validate();
  }

  const ngram_cache_options& options() const noexcept { return options_; }

  /// Adds `document` as the newest, evicting the oldest documents until the index fits
  /// max_bytes, and publishes the new snapshot. An empty document changes nothing.
  /// Thread-safe. Throws std::invalid_argument (cache unchanged) when the document alone may
  /// need more than max_bytes.
  void insert(std::span<const token_id> document) {
    if (document.empty()) return;
    if (snapshot::bytes_bound(document.size(), 1) > options_.max_bytes)
      throw std::invalid_argument(
          "ngram_cache::insert: document of " + std::to_string(document.size()) +
          " tokens may need " + std::to_string(snapshot::bytes_bound(document.size(), 1)) +
          " bytes, more than ngram_cache_options.max_bytes (" +
          std::to_string(options_.max_bytes) + ")");
    const std::lock_guard<std::mutex> writing(write_);
    const std::shared_ptr<const snapshot> old = current();
    // The newest documents that fit at the worst case, then the exact check (evict more if the
    // built index is over the bound; not expected, as the worst case is an upper bound).
    std::vector<std::span<const token_id>> kept{document};
    std::size_t tokens = document.size();
    for (std::size_t i = old->document_count(); i-- > 0;) {
      const auto d = old->document(i);
      if (snapshot::bytes_bound(tokens + d.size(), kept.size() + 1) > options_.max_bytes) break;
      kept.push_back(d);
      tokens += d.size();
    }
    std::reverse(kept.begin(), kept.end());  // oldest first
    std::shared_ptr<const snapshot> next;
    for (std::size_t drop = 0;; ++drop) {
      next = std::make_shared<const snapshot>(std::span(kept).subspan(drop));
      if (next->memory_bytes() <= options_.max_bytes || drop + 1 == kept.size()) break;
    }
    const std::size_t evicted = old->document_count() + 1 - next->document_count();
    const std::lock_guard<std::mutex> publishing(publish_);
    current_ = std::move(next);
    evicted_ += evicted;
    ++inserted_;
  }

  /// The snapshot readers should use now; never null. Thread-safe, O(1) (copies a pointer).
  std::shared_ptr<const snapshot> current() const {
    const std::lock_guard<std::mutex> reading(publish_);
    return current_;
  }

  /// Bytes of the current snapshot (<= max_bytes). Thread-safe.
  std::size_t memory_bytes() const { return current()->memory_bytes(); }
  /// Documents and tokens in the current snapshot. Thread-safe.
  std::size_t document_count() const { return current()->document_count(); }
  std::size_t token_count() const { return current()->size(); }
  /// Documents inserted and evicted since construction. Thread-safe.
  std::size_t inserted() const {
    const std::lock_guard<std::mutex> reading(publish_);
    return inserted_;
  }
  std::size_t evicted() const {
    const std::lock_guard<std::mutex> reading(publish_);
    return evicted_;
  }

 private:
  ngram_cache_options options_;
  mutable std::mutex publish_;  // guards current_ and the counters: held only to copy or swap
  std::mutex write_;            // serialises insert()
  std::shared_ptr<const snapshot> current_;
  std::size_t inserted_ = 0, evicted_ = 0;
};

}  // namespace specdec
