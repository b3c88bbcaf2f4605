// llama2c/engine/batch_model.hpp - the llama2.c transformer serving many sequences, as a
// specdec::BatchTreeLanguageModel: one forward pass over a ragged batch (each entry its own
// sequence, KV cache and positions; a chain or a token tree) in which every weight matrix is
// read once for all rows of all sequences (kernels.hpp's matmul, as for one sequence's K + 1
// rows).
//
// What is shared and what is not: the products with the weights (q, k, v, the output
// projection, the FFN, the classifier) run on all N rows at once; attention runs per entry over
// that entry's own cache (entries in parallel on the pool), causal for a chain and with an
// ancestor list per node for a tree (tree_rows.hpp, the layout model.hpp's append_tree uses).
// Every row is computed by the same instructions whatever the rest of the batch is, so a row's
// logits are the same bits as when its entry is scored alone (the hidden rows of the FFN are
// padded to a multiple of 16 floats so that the vectorised SiLU sees the same alignment in
// every row).
//
// A tree entry leaves its tree pending in its sequence, as model::append_tree does: size(id)
// does not count it, and commit(id, path) keeps one root-to-node path (moving its K/V rows into
// place). Anything else that changes the sequence first discards the pending tree: a new entry
// for it (chain or tree) and truncate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <specdec/concepts/batch_language_model.hpp>
#include <specdec/types.hpp>

#include "llama2c/engine/checkpoint.hpp"
#include "llama2c/engine/kernels.hpp"
#include "llama2c/engine/row_ops.hpp"
#include "llama2c/engine/thread_pool.hpp"
#include "llama2c/engine/tree_rows.hpp"

namespace specdec::llama2c {

/// Options of a batch model; validated by its constructor (std::invalid_argument naming the
/// field).
struct batch_model_options {
  std::size_t max_context = 0;         ///< per sequence; 0 = the checkpoint's seq_len
  std::size_t max_sequences = 64;      ///< live sequences (each owns a KV cache of max_context)
  std::size_t max_batch_tokens = 512;  ///< rows per score call, over all entries
  std::size_t threads = 0;             ///< as model_options::threads
  std::shared_ptr<thread_pool> pool = nullptr;  ///< shared pool; overrides threads
};

/**
 * Many sequences on one set of weights. score() runs one batched forward over chains and token
 * trees; truncate is O(1); commit is O(path x layers x kv_dim); create_sequence allocates (or
 * reuses) a KV cache of max_context rows per layer (a tree wider than the positions left grows
 * its sequence's cache). Ids are never reused. Bad input throws before any state changes. Not
 * thread-safe.
 */
class batch_model {
 public:
  explicit batch_model(std::shared_ptr<const weights> w, batch_model_options o = {});

  std::size_t vocab_size() const noexcept { return w_->cfg().vocab_size; }
  std::size_t max_size() const noexcept { return max_context_; }
  std::size_t max_sequences() const noexcept { return o_.max_sequences; }
  std::size_t max_batch_tokens() const noexcept { return o_.max_batch_tokens; }
  const config& cfg() const noexcept { return w_->cfg(); }
  const std::shared_ptr<thread_pool>& pool() const noexcept { return pool_; }

  /// A new empty sequence. std::length_error when max_sequences() are live.
  sequence_id create_sequence();
  /// Frees `id`'s cache for reuse. std::invalid_argument for an unknown id.
  void release_sequence(sequence_id id);
  /// Tokens in `id`'s context; a pending tree's nodes are not counted. std::invalid_argument
  /// for an unknown id.
  std::size_t size(sequence_id id) const { return find(id, "size").size; }
  /// True between a tree entry for `id` and commit(id, ...) (or whatever discards the tree).
  bool tree_pending(sequence_id id) const { return !find(id, "tree_pending").pending.empty(); }
  /// Keeps `id`'s first n tokens (std::out_of_range past size(id)). O(1). Discards a pending
  /// tree.
  void truncate(sequence_id id, std::size_t n);

  /// The most nodes one tree entry may have (model::max_tree_nodes).
  static constexpr std::size_t max_tree_nodes = tree_node_limit;

  /**
   * One forward pass over every entry (see the header comment). A chain entry appends its
   * tokens; a tree entry does what model::append_tree does for its sequence (node i at position
   * size + depth(i), attending to the context and its ancestors) and leaves the tree pending.
   * Either discards a tree already pending in that sequence. Throws before any change:
   * std::invalid_argument (unknown id, a sequence twice, an empty entry, a tree of more than
   * max_tree_nodes nodes, parents of the wrong size or a parent that is not -1 or an earlier
   * node, a wrong logits size), std::out_of_range (a token outside the vocabulary),
   * std::length_error (a context, or a tree's deepest node, past max_size(); more than
   * max_batch_tokens() rows).
   */
  void score(std::span<const batch_entry> batch);

  /**
   * score() of the one chain entry {id, tokens} writing no logits
   * (specdec::BatchPrefillLanguageModel): the same context afterwards, the final norm and the
   * classifier skipped for every row. Same limits and errors as score (at most
   * max_batch_tokens() tokens); nothing changes when it throws.
   */
  void prefill(sequence_id id, std::span<const token_id> tokens);

  /**
   * Keeps the root-to-node `path` of `id`'s pending tree (may be empty): size(id) grows by
   * path.size(), the tree is no longer pending. model::commit for that sequence. Throws
   * std::invalid_argument (unknown id, a path that is not a chain from a root of the tree),
   * std::logic_error (no pending tree); nothing changes then.
   */
  void commit(sequence_id id, std::span<const std::int32_t> path);

 private:
  struct sequence {
    sequence_id id = 0;
    std::size_t size = 0;
    std::vector<std::int32_t> pending;  // parents of the pending tree; empty: none
    // Per layer: max_context (more once a tree wider than the positions left grew it) x kv_dim.
    std::vector<row_matrix> k, v;
  };
  const sequence& find(sequence_id id, const char* who) const;
  sequence& find(sequence_id id, const char* who) {
    return const_cast<sequence&>(std::as_const(*this).find(id, who));
  }
  void check(std::span<const batch_entry> batch, bool logits);
  void run(std::span<const batch_entry> batch, bool logits);
  void ensure_scratch(std::size_t n);
  void forward(std::span<const batch_entry> batch, bool logits);
  void attend(std::size_t layer, std::span<const batch_entry> batch);

  std::shared_ptr<const weights> w_;
  batch_model_options o_;
  std::shared_ptr<thread_pool> pool_;
  std::size_t max_context_ = 0, hidden_ld_ = 0;
  std::vector<std::unique_ptr<sequence>> live_, spare_;
  sequence_id next_id_ = 1;
  rope_table rope_;
  // Per pass: the sequence, first row and positions of each entry / row, and the layout of each
  // tree entry (indexed by entry; chains leave theirs unused).
  std::vector<sequence*> seq_of_;
  std::vector<tree_layout> trees_;
  std::vector<std::size_t> first_row_, positions_, score_offset_;
  row_matrix x_, xb_, q_, att_, k_new_, v_new_, h1_, h3_, logits_;
  std::vector<float, Eigen::aligned_allocator<float>> scores_;
};

static_assert(specdec::BatchTreeLanguageModel<batch_model>);
static_assert(specdec::BatchPrefillLanguageModel<batch_model>);

// ---------------------------------------------------------------------------------------------

inline batch_model::batch_model(std::shared_ptr<const weights> w, batch_model_options o)
    : w_(std::move(w)), o_(std::move(o)) {
  if (!w_) throw std::invalid_argument("llama2c::batch_model: weights is null");
  const config& c = w_->cfg();
  if (o_.max_sequences == 0)
    throw std::invalid_argument("llama2c::batch_model: batch_model_options::max_sequences must be >= 1");
  if (o_.max_batch_tokens == 0)
    throw std::invalid_argument("llama2c::batch_model: batch_model_options::max_batch_tokens must be >= 1");
  if (o_.threads > 256)
    throw std::invalid_argument("llama2c::batch_model: batch_model_options::threads = " +
                                std::to_string(o_.threads) + " exceeds 256");
  pool_ = o_.pool ? o_.pool : std::make_shared<thread_pool>(o_.threads);
  max_context_ = o_.max_context == 0 ? c.seq_len : o_.max_context;
  hidden_ld_ = (c.hidden_dim + 15) / 16 * 16;
  rope_ = rope_table(max_context_, c.head_size());
}

inline const batch_model::sequence& batch_model::find(sequence_id id, const char* who) const {
  for (const auto& s : live_)
    if (s->id == id) return *s;
  throw std::invalid_argument(std::string("llama2c::batch_model::") + who + ": sequence " +
                              std::to_string(id) + " is unknown (never created, or released)");
}

inline sequence_id batch_model::create_sequence() {
  if (live_.size() >= o_.max_sequences)
    throw std::length_error("llama2c::batch_model::create_sequence: " +
                            std::to_string(live_.size()) + " sequences are live, max_sequences = " +
                            std::to_string(o_.max_sequences));
  std::unique_ptr<sequence> s;
  if (!spare_.empty()) {
    s = std::move(spare_.back());
    spare_.pop_back();
  } else {
    s = std::make_unique<sequence>();
    const config& c = cfg();
    s->k.resize(c.n_layers);
    s->v.resize(c.n_layers);
    for (std::size_t l = 0; l < c.n_layers; ++l) {
      s->k[l].resize(static_cast<Eigen::Index>(max_context_), static_cast<Eigen::Index>(c.kv_dim()));
      s->v[l].resize(static_cast<Eigen::Index>(max_context_), static_cast<Eigen::Index>(c.kv_dim()));
    }
  }
  s->id = next_id_++;
  s->size = 0;
  s->pending.clear();
  live_.push_back(std::move(s));
  return live_.back()->id;
}

inline void batch_model::release_sequence(sequence_id id) {
  const auto it = std::find_if(live_.begin(), live_.end(), [&](const auto& s) { return s->id == id; });
  if (it == live_.end()) (void)find(id, "release_sequence");  // throws, naming the id
  spare_.push_back(std::move(*it));
  live_.erase(it);
}

inline void batch_model::truncate(sequence_id id, std::size_t n) {
  sequence& s = find(id, "truncate");
  if (n > s.size)
    throw std::out_of_range("llama2c::batch_model::truncate: n = " + std::to_string(n) +
                            " exceeds size = " + std::to_string(s.size) + " of sequence " +
                            std::to_string(id));
  s.size = n;
  s.pending.clear();
}

inline void batch_model::commit(sequence_id id, std::span<const std::int32_t> path) {
  sequence& s = find(id, "commit");
  const auto where = [&] {
    return "llama2c::batch_model::commit: sequence " + std::to_string(id) + ": ";
  };
  if (s.pending.empty())
    throw std::logic_error(where() + "no pending tree (score a tree entry for it first)");
  check_path(s.pending, path, where);
  keep_path_rows(s.k, s.v, s.size, path);
  s.size += path.size();
  s.pending.clear();
}

inline void batch_model::check(std::span<const batch_entry> batch, bool logits) {
  const std::size_t v = vocab_size();
  std::size_t rows = 0;
  seq_of_.clear();
  if (trees_.size() < batch.size()) trees_.resize(batch.size());  // layouts keep their storage
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const batch_entry& e = batch[i];
    const char* who = logits ? "score" : "prefill";
    sequence& s = find(e.sequence, who);
    const std::string where = std::string("llama2c::batch_model::") + who + ": entry " + std::to_string(i) +
                              " (sequence " + std::to_string(e.sequence) + "): ";
    if (std::find(seq_of_.begin(), seq_of_.end(), &s) != seq_of_.end())
      throw std::invalid_argument(where + "the sequence is already in this call");
    if (e.tokens.empty()) throw std::invalid_argument(where + "tokens is empty");
    const bool tree = !e.parents.empty();
    const auto where_fn = [&] { return where; };
    if (tree) {
      check_node_count(e.tokens.size(), where_fn);
      check_parents(e.parents, e.tokens.size(), where_fn);
    }
    if (logits && e.logits.size() != e.tokens.size() * v)
      throw std::invalid_argument(where + "logits.size() = " + std::to_string(e.logits.size()) +
                                  ", expected " + std::to_string(e.tokens.size() * v));
    for (std::size_t j = 0; j < e.tokens.size(); ++j)
      if (e.tokens[j] < 0 || static_cast<std::size_t>(e.tokens[j]) >= v)
        throw std::out_of_range(where + "token " + std::to_string(e.tokens[j]) + " at index " +
                                std::to_string(j) + " outside the vocabulary [0, " +
                                std::to_string(v) + ")");
    if (tree) {
      trees_[i].assign(e.parents);
      check_tree_fits(trees_[i], s.size, max_context_, where_fn);
    } else if (e.tokens.size() > max_context_ - s.size) {
      throw std::length_error(where + std::to_string(s.size) + " + " +
                              std::to_string(e.tokens.size()) + " tokens exceed max_size() = " +
                              std::to_string(max_context_));
    }
    rows += e.tokens.size();
    seq_of_.push_back(&s);
  }
  if (rows > o_.max_batch_tokens)
    throw std::length_error("llama2c::batch_model::score: " + std::to_string(rows) +
                            " rows exceed max_batch_tokens() = " +
                            std::to_string(o_.max_batch_tokens));
}

inline void batch_model::score(std::span<const batch_entry> batch) { run(batch, true); }

inline void batch_model::prefill(sequence_id id, std::span<const token_id> tokens) {
  const batch_entry e{id, tokens, {}, {}};
  run(std::span<const batch_entry>(&e, 1), false);
}

inline void batch_model::run(std::span<const batch_entry> batch, bool logits) {
  check(batch, logits);
  if (batch.empty()) return;
  for (std::size_t e = 0; e < batch.size(); ++e) {
    sequence& s = *seq_of_[e];
    s.pending.clear();  // a new entry discards a pending tree
    if (!batch[e].parents.empty())  // a wide tree can need more rows than max_context
      grow_cache_rows(s.k, s.v, s.size + batch[e].tokens.size(), cfg().kv_dim());
  }
  forward(batch, logits);
  for (std::size_t e = 0; e < batch.size(); ++e) {
    const batch_entry& entry = batch[e];
    sequence& s = *seq_of_[e];
    if (entry.parents.empty()) {
      s.size += entry.tokens.size();
    } else {
      s.pending.assign(entry.parents.begin(), entry.parents.end());
    }
  }
}

inline void batch_model::ensure_scratch(std::size_t n) {
  if (static_cast<std::size_t>(x_.rows()) >= n) return;
  const config& c = cfg();
  const auto rows = static_cast<Eigen::Index>(std::max<std::size_t>(n, 2 * static_cast<std::size_t>(x_.rows())));
  const auto dim = static_cast<Eigen::Index>(c.dim), kv = static_cast<Eigen::Index>(c.kv_dim());
  x_.resize(rows, dim);
  xb_.resize(rows, dim);
  q_.resize(rows, dim);
  att_.resize(rows, dim);
  k_new_.resize(rows, kv);
  v_new_.resize(rows, kv);
  h1_.setZero(rows, static_cast<Eigen::Index>(hidden_ld_));  // the padding stays 0
  h3_.setZero(rows, static_cast<Eigen::Index>(hidden_ld_));
  logits_.resize(rows, static_cast<Eigen::Index>(c.vocab_size));
}

// Each entry's new K/V rows into its cache, then attention over that cache for its rows (causal
// for a chain, each node over its ancestors for a tree); entries in parallel (each on one
// thread), or one entry's heads in parallel when it is alone.
inline void batch_model::attend(std::size_t layer, std::span<const batch_entry> batch) {
  const config& c = cfg();
  const auto kv = static_cast<Eigen::Index>(c.kv_dim());
  for (std::size_t e = 0; e < batch.size(); ++e) {
    sequence& s = *seq_of_[e];
    const auto n = static_cast<Eigen::Index>(batch[e].tokens.size());
    const auto r0 = static_cast<Eigen::Index>(first_row_[e]);
    const auto at = static_cast<Eigen::Index>(s.size);
    s.k[layer].middleRows(at, n) = k_new_.block(r0, 0, n, kv);
    s.v[layer].middleRows(at, n) = v_new_.block(r0, 0, n, kv);
  }
  const auto run = [&](std::size_t e, thread_pool* pool) {
    const sequence& s = *seq_of_[e];
    const auto r0 = static_cast<Eigen::Index>(first_row_[e]);
    const tree_layout* tree = batch[e].parents.empty() ? nullptr : &trees_[e];
    attention(pool, {.q = q_.row(r0).data(), .k = s.k[layer].data(), .v = s.v[layer].data(),
                     .out = att_.row(r0).data(), .scores = scores_.data() + score_offset_[e],
                     .n = static_cast<std::ptrdiff_t>(batch[e].tokens.size()),
                     .context = static_cast<std::ptrdiff_t>(s.size),
                     .n_heads = static_cast<std::ptrdiff_t>(c.n_heads),
                     .n_kv_heads = static_cast<std::ptrdiff_t>(c.n_kv_heads),
                     .head_size = static_cast<std::ptrdiff_t>(c.head_size()),
                     .ancestors = tree ? tree->ancestors() : nullptr,
                     .ancestor_begin = tree ? tree->ancestor_begin() : nullptr,
                     .tree_width = tree ? static_cast<std::ptrdiff_t>(tree->width()) : 0});
  };
  if (batch.size() == 1) return run(0, pool_.get());
  auto each = [&](std::size_t e) { run(e, nullptr); };
  pool_->for_each(batch.size(), each);
}

inline void batch_model::forward(std::span<const batch_entry> batch, bool logits) {
  const config& c = cfg();
  first_row_.assign(1, 0);
  positions_.clear();
  score_offset_.assign(1, 0);
  for (std::size_t e = 0; e < batch.size(); ++e) {
    const std::size_t n = batch[e].tokens.size(), ctx = seq_of_[e]->size;
    const bool tree = !batch[e].parents.empty();
    for (std::size_t i = 0; i < n; ++i)
      positions_.push_back(ctx + (tree ? trees_[e].depth(i) : i));
    first_row_.push_back(first_row_.back() + n);
    // Causal rows span the context and the entry; tree rows the context and the longest
    // ancestor list.
    const std::size_t width = ctx + (tree ? trees_[e].width() : n);
    score_offset_.push_back(score_offset_.back() + c.n_heads * attention_slice(n, width));
  }
  const std::size_t n = positions_.size();
  ensure_scratch(n);
  if (scores_.size() < score_offset_.back()) scores_.resize(score_offset_.back());
  const auto N = static_cast<std::ptrdiff_t>(n);
  const auto dim = static_cast<std::ptrdiff_t>(c.dim), hid = static_cast<std::ptrdiff_t>(c.hidden_dim);
  const auto kv = static_cast<std::ptrdiff_t>(c.kv_dim());
  const auto hld = static_cast<std::ptrdiff_t>(hidden_ld_);
  thread_pool* pool = pool_.get();

  std::size_t r = 0;
  for (const batch_entry& e : batch)
    for (const token_id t : e.tokens) x_.row(static_cast<Eigen::Index>(r++)) = w_->token_embedding().row(t);

  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const layer_weights& lw = w_->layer(l);
    rmsnorm(x_.topRows(N), lw.rms_att, xb_.topRows(N));
    const matmul_task qkv[] = {{lw.wq.data(), dim, q_.data(), dim},
                               {lw.wk.data(), kv, k_new_.data(), kv},
                               {lw.wv.data(), kv, v_new_.data(), kv}};
    matmul(pool, xb_.data(), dim, N, dim, qkv);
    rope_.rotate(q_, positions_, c.n_heads);
    rope_.rotate(k_new_, positions_, c.n_kv_heads);
    attend(l, batch);
    const matmul_task out_proj[] = {{lw.wo.data(), dim, x_.data(), dim, true}};
    matmul(pool, att_.data(), dim, N, dim, out_proj);

    rmsnorm(x_.topRows(N), lw.rms_ffn, xb_.topRows(N));
    const matmul_task up[] = {{lw.w1.data(), hid, h1_.data(), hld}, {lw.w3.data(), hid, h3_.data(), hld}};
    matmul(pool, xb_.data(), dim, N, dim, up);
    swiglu(h1_.topRows(N), h3_.topRows(N));  // SiLU(w1 x) * (w3 x)
    const matmul_task down[] = {{lw.w2.data(), dim, x_.data(), dim, true}};
    matmul(pool, h1_.data(), hld, N, hid, down);
  }

  if (!logits) return;  // prefill: only the caches were wanted
  rmsnorm(x_.topRows(N), w_->rms_final(), xb_.topRows(N));
  const auto vocab = static_cast<std::ptrdiff_t>(c.vocab_size);
  const matmul_task classify[] = {{w_->classifier().data(), vocab, logits_.data(), vocab}};
  matmul(pool, xb_.data(), dim, N, dim, classify);
  for (std::size_t e = 0; e < batch.size(); ++e)
    std::copy_n(logits_.row(static_cast<Eigen::Index>(first_row_[e])).data(),
                batch[e].logits.size(), batch[e].logits.data());
}

}  // namespace specdec::llama2c
