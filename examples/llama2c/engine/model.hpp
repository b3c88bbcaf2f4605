// llama2c/engine/model.hpp - the llama2.c transformer as a specdec::TreeLanguageModel, and its
// self-speculative layer-skip draft.
//
// A reference adapter: it shows what an engine adapter must do (batched append, O(1) truncate,
// tree attention with an ancestor mask, commit by compacting K/V rows) on a model small enough
// to read in one sitting. The weight products and attention run on a thread pool (kernels.hpp);
// norms, RoPE and the cache bookkeeping on the calling thread. One model object per calling
// thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <specdec/concepts/hidden_state_model.hpp>
#include <specdec/concepts/tree_language_model.hpp>
#include <specdec/types.hpp>

#include "llama2c/engine/checkpoint.hpp"
#include "llama2c/engine/kernels.hpp"
#include "llama2c/engine/row_ops.hpp"
#include "llama2c/engine/thread_pool.hpp"
#include "llama2c/engine/tree_rows.hpp"

namespace specdec::llama2c {

/// Options of a model; validated by its constructor (std::invalid_argument naming the field).
struct model_options {
  /// Largest context (positions) the model accepts. 0 = the checkpoint's seq_len. Raising it
  /// past seq_len is allowed (RoPE is computed for any position) but the model was not trained
  /// there. The KV cache is preallocated for this many positions.
  std::size_t max_context = 0;
  /// Transformer blocks to run, from the first: 0 = all. Fewer makes a layer-skip draft.
  std::size_t layers = 0;
  /// Threads for the matrix kernels when `pool` is null: 0 = std::thread::hardware_concurrency(),
  /// 1 = the calling thread only. A model then owns a pool of that size.
  std::size_t threads = 0;
  /// A pool to share (a target and its draft run one after the other, so one pool serves both);
  /// overrides `threads`.
  std::shared_ptr<thread_pool> pool = nullptr;
};

/**
 * The llama2.c Llama-2 transformer (RMSNorm, RoPE, grouped-query attention, SwiGLU) with a KV
 * cache, modelling specdec::LanguageModel and specdec::TreeLanguageModel.
 *
 * - `append(tokens, logits)` runs all n tokens in one batched pass (n x dim matrix products,
 *   causal mask inside the batch). Cost: one weight read per call, so n = 8 costs far less
 *   than 8 calls of n = 1.
 * - `truncate(n)` is O(1): it moves the cache length.
 * - `append_tree` / `commit` evaluate a token tree in one pass and keep one path.
 * - Bad input throws before any state changes. No heap allocation per call once the scratch
 *   buffers have grown to the largest batch seen. Not thread-safe; the weights are shared
 *   read-only, so several models on one set of weights may run on different threads.
 */
class model {
 public:
  /// Runs `w` (shared, not copied). Throws std::invalid_argument for bad options.
  explicit model(std::shared_ptr<const weights> w, model_options options = {});
  /// Loads a checkpoint and runs it (std::runtime_error for a bad file).
  explicit model(const std::filesystem::path& checkpoint, model_options options = {})
      : model(load_checkpoint(checkpoint), options) {}

  std::size_t vocab_size() const noexcept { return cfg().vocab_size; }
  /// Tokens in the committed context.
  std::size_t size() const noexcept { return size_; }
  /// The largest context: model_options::max_context, or the checkpoint's seq_len.
  std::size_t max_size() const noexcept { return max_size_; }
  /// Transformer blocks this model runs.
  std::size_t layers() const noexcept { return layers_; }
  const config& cfg() const noexcept { return w_->cfg(); }
  /// The weights, for building another model (e.g. a draft) on the same memory.
  const std::shared_ptr<const weights>& shared_weights() const noexcept { return w_; }
  /// The pool the kernels run on (never null; size 1 when single-threaded).
  const std::shared_ptr<thread_pool>& pool() const noexcept { return pool_; }
  /// True between append_tree and commit.
  bool tree_pending() const noexcept { return pending_ > 0; }
  /// Width of a hidden row (HiddenStateModel): dim, the classifier's input after the final norm.
  std::size_t hidden_size() const noexcept { return cfg().dim; }

  /**
   * Feeds `tokens` (n >= 1) after the context and writes n rows of vocab_size() logits.
   * Throws std::invalid_argument (empty tokens, wrong logits size), std::out_of_range (a token
   * outside [0, vocab_size())), std::length_error (size() + n > max_size()); nothing changes
   * then. Discards a pending tree.
   */
  void append(std::span<const token_id> tokens, std::span<float> logits);
  /// append that also writes each position's hidden row (n x hidden_size(), the classifier's
  /// input) into `hidden` (specdec::HiddenStateModel); std::invalid_argument for a wrong size.
  void append(std::span<const token_id> tokens, std::span<float> logits, std::span<float> hidden) {
    with_hidden("append", tokens.size(), hidden, [&] { append(tokens, logits); });
  }
  /// append without logits (specdec::PrefillLanguageModel): the same context afterwards. Only
  /// the K/V caches are computed: the last layer stops once its K/V are written (its attention
  /// and FFN feed only the classifier), and the final norm and classifier are skipped for every
  /// row (n x dim x vocab multiply-adds and the n x vocab output saved). Throws as append;
  /// nothing changes then.
  void prefill(std::span<const token_id> tokens);
  /// prefill that writes each position's hidden row (as append with hidden rows; the final norm
  /// runs, the classifier does not).
  void prefill(std::span<const token_id> tokens, std::span<float> hidden) {
    with_hidden("prefill", tokens.size(), hidden, [&] { prefill(tokens); });
  }

  /// Keeps the first n tokens (n <= size(), else std::out_of_range). O(1). Discards a pending
  /// tree.
  void truncate(std::size_t n);

  /// The most nodes append_tree accepts. Memory and time grow with nodes x (context + depth):
  /// the score rows, the scratch rows (nodes x hidden_dim) and the cache rows, so a tree at the
  /// bound on the 110M shape needs a few hundred MB; the shapes decoding uses (4x2x2 = 28 nodes,
  /// a few hundred at most) stay cheap.
  static constexpr std::size_t max_tree_nodes = tree_node_limit;

  /**
   * Evaluates a token tree in one pass (see specdec::TreeLanguageModel): node i sits at position
   * size() + depth(i) and attends to the context, its ancestors and itself (a list per node:
   * O(nodes x depth) to build, never nodes x nodes). Its K/V go to cache row size() + i. size()
   * is unchanged until commit. Throws std::invalid_argument for more than max_tree_nodes nodes
   * (before reading them), a bad parent or sizes, std::out_of_range for a bad token,
   * std::length_error when the deepest node would pass max_size(); nothing changes then.
   */
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits);
  /// append_tree that also writes each node's hidden row into `hidden` (nodes x hidden_size()).
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits, std::span<float> hidden) {
    with_hidden("append_tree", tokens.size(), hidden,
                [&] { append_tree(tokens, parents, logits); });
  }

  /// Keeps the root-to-node `path` of the pending tree (may be empty) by moving its K/V rows into
  /// place: O(path length * layers * kv_dim). Throws std::logic_error without a pending tree and
  /// std::invalid_argument for a path that is not a chain from a root; the tree stays pending then.
  void commit(std::span<const std::int32_t> path);

 private:
  void check_tokens(const char* where, std::span<const token_id> tokens) const;
  void check_logits(const char* where, std::size_t n, std::span<float> logits) const;
  void ensure_cache_rows(std::size_t rows);
  void ensure_scratch(std::size_t n);
  void feed(const char* where, std::span<const token_id> tokens, std::span<float> logits);
  // The pass over `tokens`; an empty `logits` skips the classifier, and without hidden rows
  // also the final norm and the last layer's work after its K/V.
  void forward(std::span<const token_id> tokens, bool tree, std::span<float> logits);
  // Runs `call` with forward() copying the final normed rows into `hidden` (n rows).
  template <class Call>
  void with_hidden(const char* where, std::size_t n, std::span<float> hidden, Call&& call) {
    if (hidden.size() != n * hidden_size())
      throw std::invalid_argument(std::string("llama2c::model::") + where + ": hidden.size() = " +
                                  std::to_string(hidden.size()) + ", expected " +
                                  std::to_string(n) + " * hidden_size " +
                                  std::to_string(hidden_size()));
    hidden_out_ = hidden.data();
    try {
      call();
    } catch (...) {
      hidden_out_ = nullptr;
      throw;
    }
    hidden_out_ = nullptr;
  }

  std::shared_ptr<const weights> w_;
  std::shared_ptr<thread_pool> pool_;
  std::size_t layers_ = 0;
  std::size_t max_size_ = 0;
  std::size_t size_ = 0;
  std::size_t pending_ = 0;               // nodes of a pending tree
  std::vector<std::int32_t> parents_;     // of the pending tree
  std::vector<std::size_t> positions_;    // per row of the current pass
  tree_layout tree_;                      // depths and ancestor lists of the last tree
  rope_table rope_;                       // RoPE angles of positions [0, max_size)
  std::vector<row_matrix> k_cache_, v_cache_;  // per layer: rows x kv_dim
  // Scratch, grown on demand; a pass of n tokens uses the top n rows.
  row_matrix x_, xb_, q_, att_, h1_, h3_;
  // Attention scores: n_heads slices of n x (context + n), each 64-byte aligned, so results do
  // not depend on where the buffer happens to be allocated (Eigen peels unaligned heads).
  std::vector<float, Eigen::aligned_allocator<float>> scores_;
  float* hidden_out_ = nullptr;  // where forward() copies the hidden rows, when asked
};

/**
 * A self-speculative draft: the first `layers` blocks of a target's weights (shared, not
 * copied), then the final norm and classifier, with its own KV cache. A full model of its own
 * kind (LanguageModel and TreeLanguageModel); costs about layers / n_layers of the target per
 * token, and agrees with it less as fewer layers run.
 */
class layer_skip_draft : public model {
 public:
  /// Throws std::invalid_argument unless 1 <= layers <= target.cfg().n_layers. The draft's
  /// max_size() is the target's.
  layer_skip_draft(const model& target, std::size_t layers)
      : layer_skip_draft(target.shared_weights(), layers,
                         {.max_context = target.max_size(), .pool = target.pool()}) {}
  /// Same, from weights; `options.layers` is ignored (`layers` wins).
  layer_skip_draft(std::shared_ptr<const weights> w, std::size_t layers, model_options options = {})
      : model(w, checked(w, layers, options)) {}

 private:
  static model_options checked(const std::shared_ptr<const weights>& w, std::size_t layers,
                               model_options options) {
    if (!w) throw std::invalid_argument("llama2c::layer_skip_draft: weights is null");
    if (layers < 1 || layers > w->cfg().n_layers)
      throw std::invalid_argument("llama2c::layer_skip_draft: layers = " +
                                  std::to_string(layers) + " outside [1, n_layers = " +
                                  std::to_string(w->cfg().n_layers) + "]");
    options.layers = layers;
    return options;
  }
};

static_assert(specdec::TreeLanguageModel<model>);
static_assert(specdec::TreeLanguageModel<layer_skip_draft>);
static_assert(specdec::HiddenStateTreeModel<model>);
static_assert(specdec::PrefillLanguageModel<model>);

// ---------------------------------------------------------------------------------------------

inline model::model(std::shared_ptr<const weights> w, model_options options) : w_(std::move(w)) {
  if (!w_) throw std::invalid_argument("llama2c::model: weights is null");
  const config& c = w_->cfg();
  if (options.layers > c.n_layers)
    throw std::invalid_argument("llama2c::model: model_options::layers = " +
                                std::to_string(options.layers) + " exceeds n_layers = " +
                                std::to_string(c.n_layers) + " (0 means all)");
  layers_ = options.layers == 0 ? c.n_layers : options.layers;
  if (options.threads > 256)
    throw std::invalid_argument("llama2c::model: model_options::threads = " +
                                std::to_string(options.threads) + " exceeds 256");
  pool_ = options.pool ? std::move(options.pool) : std::make_shared<thread_pool>(options.threads);
  max_size_ = options.max_context == 0 ? c.seq_len : options.max_context;
  rope_ = rope_table(max_size_, c.head_size());  // computed once, not per call
  k_cache_.resize(layers_);
  v_cache_.resize(layers_);
  ensure_cache_rows(max_size_);
  ensure_scratch(8);
}

inline void model::check_tokens(const char* where, std::span<const token_id> tokens) const {
  if (tokens.empty())
    throw std::invalid_argument(std::string("llama2c::model::") + where + ": tokens is empty");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= vocab_size())
      throw std::out_of_range(std::string("llama2c::model::") + where + ": token " +
                              std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                              " outside the vocabulary [0, " + std::to_string(vocab_size()) +
                              ")");
}

inline void model::check_logits(const char* where, std::size_t n, std::span<float> logits) const {
  if (logits.size() != n * vocab_size())
    throw std::invalid_argument(std::string("llama2c::model::") + where + ": logits.size() = " +
                                std::to_string(logits.size()) + ", expected " +
                                std::to_string(n) + " * vocab_size " +
                                std::to_string(vocab_size()) + " = " +
                                std::to_string(n * vocab_size()));
}

inline void model::append(std::span<const token_id> tokens, std::span<float> logits) {
  check_tokens("append", tokens);
  check_logits("append", tokens.size(), logits);
  feed("append", tokens, logits);
}

inline void model::prefill(std::span<const token_id> tokens) {
  check_tokens("prefill", tokens);
  feed("prefill", tokens, {});
}

inline void model::feed(const char* where, std::span<const token_id> tokens,
                        std::span<float> logits) {
  if (tokens.size() > max_size_ - size_)
    throw std::length_error(std::string("llama2c::model::") + where + ": " + std::to_string(size_) + " + " +
                            std::to_string(tokens.size()) + " tokens exceed max_size() = " +
                            std::to_string(max_size_) +
                            " (the checkpoint's seq_len unless model_options::max_context "
                            "raises it)");
  pending_ = 0;
  positions_.resize(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) positions_[i] = size_ + i;
  forward(tokens, false, logits);
  size_ += tokens.size();
}

inline void model::truncate(std::size_t n) {
  if (n > size_)
    throw std::out_of_range("llama2c::model::truncate: n = " + std::to_string(n) +
                            " exceeds size() = " + std::to_string(size_));
  pending_ = 0;
  size_ = n;
}

inline void model::append_tree(std::span<const token_id> tokens,
                               std::span<const std::int32_t> parents, std::span<float> logits) {
  const std::size_t n = tokens.size();
  const auto where = [] { return std::string("llama2c::model::append_tree: "); };
  check_node_count(n, where);
  check_tokens("append_tree", tokens);
  check_parents(parents, n, where);
  check_logits("append_tree", n, logits);
  // Validation done except capacity, which needs the depths; tree_ holds no state between calls.
  tree_.assign(parents);
  check_tree_fits(tree_, size_, max_size_, where);
  positions_.resize(n);
  for (std::size_t i = 0; i < n; ++i) positions_[i] = size_ + tree_.depth(i);
  ensure_cache_rows(size_ + n);  // a wide tree can need more rows than positions
  pending_ = 0;
  forward(tokens, true, logits);
  parents_.assign(parents.begin(), parents.end());
  pending_ = n;
}

inline void model::commit(std::span<const std::int32_t> path) {
  if (pending_ == 0)
    throw std::logic_error("llama2c::model::commit: no pending tree (call append_tree first)");
  check_path(std::span<const std::int32_t>(parents_).first(pending_), path,
             [] { return std::string("llama2c::model::commit: "); });
  keep_path_rows(k_cache_, v_cache_, size_, path);
  size_ += path.size();
  pending_ = 0;
}

inline void model::ensure_cache_rows(std::size_t rows) {
  grow_cache_rows(k_cache_, v_cache_, rows, cfg().kv_dim());
}

inline void model::ensure_scratch(std::size_t n) {
  const auto have = x_.rows();
  if (static_cast<std::size_t>(have) >= n) return;
  const auto rows = static_cast<Eigen::Index>(std::max<std::size_t>(n, 2 * static_cast<std::size_t>(have)));
  const config& c = cfg();
  const auto dim = static_cast<Eigen::Index>(c.dim), hid = static_cast<Eigen::Index>(c.hidden_dim);
  x_.resize(rows, dim);
  xb_.resize(rows, dim);
  q_.resize(rows, dim);
  att_.resize(rows, dim);
  h1_.resize(rows, hid);
  h3_.resize(rows, hid);
}

inline void model::forward(std::span<const token_id> tokens, bool tree, std::span<float> logits) {
  const config& c = cfg();
  const std::size_t n = tokens.size();
  ensure_scratch(n);
  // Causal rows span the context and the batch; tree rows the context and the longest
  // ancestor list.
  const std::size_t score_floats =
      c.n_heads * attention_slice(n, size_ + (tree ? tree_.width() : n));
  if (scores_.size() < score_floats) scores_.resize(std::max(score_floats, 2 * scores_.size()));
  const auto N = static_cast<Eigen::Index>(n);
  const auto base = static_cast<Eigen::Index>(size_);
  const std::size_t hs = c.head_size();
  const auto ihs = static_cast<Eigen::Index>(hs);
  const auto dim = static_cast<std::ptrdiff_t>(c.dim);
  const auto hid = static_cast<std::ptrdiff_t>(c.hidden_dim);
  thread_pool* pool = pool_.get();
  const bool caches_only = logits.empty() && !hidden_out_;  // prefill without hidden rows

  auto x = x_.topRows(N);
  auto xb = xb_.topRows(N);
  auto q = q_.topRows(N);
  auto att = att_.topRows(N);
  auto h1 = h1_.topRows(N);
  auto h3 = h3_.topRows(N);
  for (Eigen::Index i = 0; i < N; ++i)
    x.row(i) = w_->token_embedding().row(tokens[static_cast<std::size_t>(i)]);

  for (std::size_t l = 0; l < layers_; ++l) {
    const layer_weights& lw = w_->layer(l);
    row_matrix& kc = k_cache_[l];
    row_matrix& vc = v_cache_[l];
    rmsnorm(x, lw.rms_att, xb);
    const std::ptrdiff_t ikv = static_cast<std::ptrdiff_t>(c.kv_dim());
    const matmul_task qkv[] = {{lw.wq.data(), dim, q.data(), dim},
                               {lw.wk.data(), ikv, kc.row(base).data(), ikv},
                               {lw.wv.data(), ikv, vc.row(base).data(), ikv}};
    matmul(pool, xb.data(), dim, N, dim, qkv);
    rope_.rotate(q, positions_, c.n_heads);
    rope_.rotate(kc.middleRows(base, N), positions_, c.n_kv_heads);
    // prefill: the last layer's K/V are in the cache; its attention and FFN feed only the
    // classifier.
    if (caches_only && l + 1 == layers_) return;

    attention(pool, {.q = q.data(), .k = kc.data(), .v = vc.data(), .out = att.data(),
                     .scores = scores_.data(), .n = N, .context = base,
                     .n_heads = static_cast<std::ptrdiff_t>(c.n_heads),
                     .n_kv_heads = static_cast<std::ptrdiff_t>(c.n_kv_heads),
                     .head_size = ihs,
                     .ancestors = tree ? tree_.ancestors() : nullptr,
                     .ancestor_begin = tree ? tree_.ancestor_begin() : nullptr,
                     .tree_width = tree ? static_cast<std::ptrdiff_t>(tree_.width()) : 0});
    const matmul_task out_proj[] = {{lw.wo.data(), dim, x.data(), dim, true}};
    matmul(pool, att.data(), dim, N, dim, out_proj);

    rmsnorm(x, lw.rms_ffn, xb);
    const matmul_task up[] = {{lw.w1.data(), hid, h1.data(), hid},
                              {lw.w3.data(), hid, h3.data(), hid}};
    matmul(pool, xb.data(), dim, N, dim, up);
    swiglu(h1, h3);  // SiLU(w1 x) * (w3 x)
    const matmul_task down[] = {{lw.w2.data(), dim, x.data(), dim, true}};
    matmul(pool, h1.data(), hid, N, hid, down);
  }

  rmsnorm(x, w_->rms_final(), xb);
  if (hidden_out_) Eigen::Map<row_matrix>(hidden_out_, N, xb.cols()) = xb;
  if (logits.empty()) return;
  const auto vocab = static_cast<std::ptrdiff_t>(c.vocab_size);
  const matmul_task classify[] = {{w_->classifier().data(), vocab, logits.data(), vocab}};
  matmul(pool, xb.data(), dim, N, dim, classify);
}

}  // namespace specdec::llama2c
