// llamacpp/adapters/tree_model.hpp - a llama.cpp context as a specdec::TreeLanguageModel: a whole token
// tree scored in ONE llama_decode, then one root-to-node path kept, without copying any KV data.
//
// How a tree maps onto llama.cpp's sequences (kv_unified: one KV buffer, cells tagged with the
// set of sequences they belong to, a token seeing the cells of its first sequence up to its
// position):
//   - each leaf of the tree gets a sequence id 0..L-1; each node is tagged with the ids of the
//     leaves below it (its first id is a leaf below it), at position size() + depth;
//   - the context (sequence 0) is shared with sequences 1..L-1 first (llama_memory_seq_cp,
//     which in a unified cache only adds tags);
//   - so node i sees the context, its ancestors (whose leaf sets contain i's) and itself: every
//     other node at a position <= its own is on another root-to-leaf path.
// commit(path) keeps the sequence s of a leaf below the path's last node (llama_memory_seq_keep),
// removes its nodes past the path (llama_memory_seq_rm) and renames s to 0 (seq_cp + seq_rm).
#pragma once

#include <llama.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/concepts/tree_language_model.hpp>
#include <specdec/types.hpp>

#include "llamacpp/adapters/context_model.hpp"

namespace specdec::llamacpp {

/// `o` for trees of up to `leaves` leaves: n_seq_max = leaves, kv_unified.
inline context_options tree_options(std::size_t leaves, context_options o = {}) {
  o.n_seq_max = leaves;
  o.kv_unified = true;
  return o;
}

/**
 * context_model plus append_tree/commit (specdec::TreeLanguageModel). The context must be made
 * with kv_unified (the default); n_seq_max bounds the leaves of a tree (at most 256, llama.cpp's
 * LLAMA_MAX_SEQ) and n_batch its nodes, limits it reports as max_tree_leaves() and
 * max_tree_size(), within which the decoders draft. A tree with more leaves, more nodes than
 * batch_size() or than fit in max_size() after the context is refused with
 * std::invalid_argument / std::length_error before llama.cpp is called. While a tree is pending,
 * only commit() is accepted. Not thread-safe.
 */
class tree_model : public context_model {
 public:
  /// `options.n_seq_max` bounds the leaves of a tree (tree_options() sets it).
  explicit tree_model(const gguf_model& model, context_options options = tree_options(64))
      : context_model(model, check_options(options)),
        max_leaves_(llama_n_seq_max(ctx_.get())) {}

  /// The most nodes one append_tree takes: one llama_decode, so batch_size() (n_batch). The
  /// decoders read it and draft trees within it (TreeLanguageModel's optional limits).
  std::size_t max_tree_size() const noexcept { return n_batch_; }
  /// The most leaves one tree may have: a sequence each, so the context's n_seq_max.
  std::size_t max_tree_leaves() const noexcept { return max_leaves_; }

  void append(std::span<const token_id> tokens, std::span<float> logits) {
    check_no_pending("append");
    context_model::append(tokens, logits);
  }
  void prefill(std::span<const token_id> tokens) {
    check_no_pending("prefill");
    context_model::prefill(tokens);
  }
  void truncate(std::size_t n) {
    check_no_pending("truncate");
    context_model::truncate(n);
  }

  /// Scores the tree (parents[i] = -1 or an earlier index) in one llama_decode; row i of
  /// `logits` follows node i. The tree stays pending until commit().
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    check_no_pending("append_tree");
    const std::size_t n = tokens.size();
    if (parents.size() != n)
      throw std::invalid_argument("append_tree: " + std::to_string(parents.size()) +
                                  " parents for " + std::to_string(n) + " tokens");
    check_tokens(tokens, "append_tree");
    if (logits.size() != n * vocab_)
      throw std::invalid_argument("append_tree: logits has " + std::to_string(logits.size()) +
                                  " floats, expected " + std::to_string(n * vocab_));
    if (n > n_batch_)
      throw std::length_error("append_tree: " + std::to_string(n) + " nodes exceed the batch "
                              "size " + std::to_string(n_batch_) + " (one llama_decode)");
    depth_.assign(n, 0);
    std::vector<bool> has_child(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t p = parents[i];
      if (p < -1 || p >= static_cast<std::int32_t>(i))
        throw std::invalid_argument("append_tree: parents[" + std::to_string(i) + "] = " +
                                    std::to_string(p) + " is not -1 or an earlier node");
      if (p >= 0) {
        depth_[i] = depth_[static_cast<std::size_t>(p)] + 1;
        has_child[static_cast<std::size_t>(p)] = true;
      }
    }
    // Leaf sequence ids, then each node's set: its own id if a leaf, else its children's.
    seqs_.assign(n, {});
    std::size_t leaves = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (!has_child[i]) seqs_[i].push_back(static_cast<llama_seq_id>(leaves++));
    if (leaves > max_leaves_)
      throw std::length_error("append_tree: the tree has " + std::to_string(leaves) +
                              " leaves, the context takes at most " + std::to_string(max_leaves_) +
                              " (context_options.n_seq_max)");
    for (std::size_t i = n; i-- > 0;)
      if (parents[i] >= 0) {
        auto& up = seqs_[static_cast<std::size_t>(parents[i])];
        up.insert(up.end(), seqs_[i].begin(), seqs_[i].end());
      }
    const auto base = static_cast<llama_pos>(size());
    for (std::size_t s = 1; s < leaves; ++s)  // every leaf's sequence sees the context
      llama_memory_seq_cp(ctx_.memory(), 0, static_cast<llama_seq_id>(s), -1, -1);
    batch_.clear();
    for (std::size_t i = 0; i < n; ++i)
      batch_.add(tokens[i], base + static_cast<llama_pos>(depth_[i]), seqs_[i], true);
    leaves_ = leaves;
    try {
      decode_or_throw("append_tree");
      for (std::size_t i = 0; i < n; ++i) copy_logits(i, logits.data() + i * vocab_);
    } catch (...) {
      drop_tree();
      throw;
    }
    pending_.assign(tokens.begin(), tokens.end());
    pending_parents_.assign(parents.begin(), parents.end());
  }

  /// Keeps the root-to-node `path` of the pending tree (empty: none of it) as if appended.
  void commit(std::span<const std::int32_t> path) {
    if (leaves_ == 0) throw std::logic_error("commit: no tree is pending (call append_tree)");
    const auto n = static_cast<std::int32_t>(pending_.size());
    for (std::size_t k = 0; k < path.size(); ++k) {
      const std::int32_t node = path[k];
      const std::int32_t want = k == 0 ? -1 : path[k - 1];
      if (node < 0 || node >= n || pending_parents_[static_cast<std::size_t>(node)] != want)
        throw std::invalid_argument("commit: path[" + std::to_string(k) + "] = " +
                                    std::to_string(node) + " is not " +
                                    (k == 0 ? std::string("a root") :
                                              "a child of node " + std::to_string(want)) +
                                    " of the pending tree");
    }
    if (path.empty()) {
      drop_tree();
      return;
    }
    llama_memory_t mem = ctx_.memory();
    const llama_seq_id s = seqs_[static_cast<std::size_t>(path.back())].front();
    const auto end = static_cast<llama_pos>(size() + path.size());
    llama_memory_seq_keep(mem, s);  // every other leaf's cells go; kept cells hold s only
    if (!llama_memory_seq_rm(mem, s, end, -1))
      throw llama_error("llama_memory_seq_rm(seq " + std::to_string(s) + ", from " +
                        std::to_string(end) + ") failed");
    if (s != 0) {
      llama_memory_seq_cp(mem, s, 0, -1, -1);
      llama_memory_seq_rm(mem, s, -1, -1);
    }
    for (const std::int32_t node : path) tokens_.push_back(pending_[static_cast<std::size_t>(node)]);
    leaves_ = 0;
  }

 private:
  static context_options check_options(context_options o) {
    if (!o.kv_unified)
      throw std::invalid_argument("tree_model: context_options.kv_unified must be true (the "
                                  "tree's sequences share the context's cells)");
    return o;
  }
  void check_no_pending(const char* who) const {
    if (leaves_ != 0)
      throw std::logic_error(std::string(who) + ": a tree is pending; commit() comes first");
  }
  /// Removes every node of the tree and the leaf sequences' tags: the context is sequence 0 alone.
  void drop_tree() {
    llama_memory_t mem = ctx_.memory();
    for (std::size_t s = 1; s < leaves_; ++s)
      llama_memory_seq_rm(mem, static_cast<llama_seq_id>(s), -1, -1);
    llama_memory_seq_rm(mem, -1, static_cast<llama_pos>(size()), -1);
    leaves_ = 0;
  }

  std::size_t max_leaves_;
  std::size_t leaves_ = 0;  ///< leaves of the pending tree; 0 = none pending
  std::vector<token_id> pending_;
  std::vector<std::int32_t> pending_parents_;
  std::vector<std::size_t> depth_;
  std::vector<std::vector<llama_seq_id>> seqs_;
};

static_assert(TreeLanguageModel<tree_model> && PrefillLanguageModel<tree_model>);

}  // namespace specdec::llamacpp
