// llamacpp/adapters/gguf_model.hpp - a GGUF file loaded by llama.cpp, and a llama_context made on it, each
// owned by a small RAII handle that turns every failing llama.cpp call into an exception naming
// that call. The adapters (context_model.hpp, tree_model.hpp, hidden_model.hpp) take a context
// made here.
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string>

namespace specdec::llamacpp {

/// A llama.cpp call that failed; what() names the call, its return code where it has one, and
/// what was asked of it.
struct llama_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// llama.cpp logs every model load to stderr; this keeps its warnings and errors only, or
/// nothing with `silent`. Process-wide, as llama_log_set is.
inline void set_llama_log_level(bool silent) {
  if (silent) {
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  } else {
    llama_log_set(
        [](ggml_log_level level, const char* text, void*) {
          if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR)
            std::fputs(text, stderr);
        },
        nullptr);
  }
}

/// Model weights loaded from a GGUF file (llama_model_load_from_file): on the CPU, or with
/// n_gpu_layers > 0 on ggml's other devices (llama.cpp's RPC servers after add_rpc_servers). Owns the
/// llama_model; contexts made on it must not outlive it. Not copyable; movable.
class gguf_model {
 public:
  /// Throws std::invalid_argument when `path` is not a readable file, llama_error when llama.cpp
  /// cannot load it. `n_gpu_layers` goes to llama_model_params (0: every layer on the CPU;
  /// nullopt: llama.cpp's default).
  explicit gguf_model(const std::string& path, std::optional<int> n_gpu_layers = 0)
      : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw std::invalid_argument("model file '" + path + "' does not exist or is not a file");
    llama_backend_init();
    llama_model_params p = llama_model_default_params();
    if (n_gpu_layers) p.n_gpu_layers = *n_gpu_layers;
    model_.reset(llama_model_load_from_file(path.c_str(), p));
    if (!model_)
      throw llama_error("llama_model_load_from_file failed for '" + path +
                        "' (not a GGUF file llama.cpp can load? its log says why)");
  }

  llama_model* get() const noexcept { return model_.get(); }
  const llama_vocab* vocab() const noexcept { return llama_model_get_vocab(model_.get()); }
  /// V: the vocabulary, which is also the length of a row of logits.
  std::size_t vocab_size() const noexcept {
    return static_cast<std::size_t>(llama_vocab_n_tokens(vocab()));
  }
  /// d: floats per hidden row (the classifier's input).
  std::size_t embedding_size() const noexcept {
    return static_cast<std::size_t>(llama_model_n_embd(model_.get()));
  }
  /// The context length the model was trained with.
  std::size_t trained_context() const noexcept {
    return static_cast<std::size_t>(llama_model_n_ctx_train(model_.get()));
  }
  const std::string& path() const noexcept { return path_; }

 private:
  struct deleter {
    void operator()(llama_model* m) const noexcept { llama_model_free(m); }
  };
  std::string path_;
  std::unique_ptr<llama_model, deleter> model_;
};

/// What a context is made with. Defaults suit one sequence decoded on the CPU.
struct context_options {
  std::size_t n_ctx = 0;       ///< tokens of KV cache; 0 = the model's trained context
  std::size_t n_batch = 512;   ///< most tokens one llama_decode takes (>= 1)
  std::size_t n_threads = 0;   ///< 0 = llama.cpp's default
  std::size_t n_seq_max = 1;   ///< sequences (tree_model: the most leaves a tree may have)
  bool embeddings = false;     ///< also extract each row's hidden state (pooling none)
  bool kv_unified = true;      ///< one KV buffer for all sequences: trees share their context
  /// llama.cpp's flash attention. Off by default: its online softmax sums the cells in cache
  /// order at F16 precision, so after a tree commit (which leaves holes that later tokens fill)
  /// the same context gives logits differing by up to 0.02 (measured, Q8_0 model); without it
  /// the Q8_0 model's rows are bit-identical however the cells lie (docs/llamacpp.md).
  llama_flash_attn_type flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
};

/// One llama_context on a gguf_model (llama_init_from_model). Owns it. Not copyable; movable.
class llama_context_handle {
 public:
  /// Throws std::invalid_argument naming a bad option, llama_error when llama_init_from_model
  /// fails (e.g. n_ctx too large for memory).
  llama_context_handle(const gguf_model& model, const context_options& o) {
    if (o.n_batch == 0) throw std::invalid_argument("context_options.n_batch: must be >= 1");
    if (o.n_seq_max == 0 || o.n_seq_max > 256)
      throw std::invalid_argument("context_options.n_seq_max: must be in [1, 256] (llama.cpp's "
                                  "LLAMA_MAX_SEQ), is " + std::to_string(o.n_seq_max));
    llama_context_params p = llama_context_default_params();
    p.n_ctx = static_cast<std::uint32_t>(o.n_ctx == 0 ? model.trained_context() : o.n_ctx);
    // llama.cpp asserts (aborts) when n_batch exceeds n_ctx: clamp it here.
    p.n_batch = static_cast<std::uint32_t>(std::min<std::size_t>(o.n_batch, p.n_ctx));
    if (p.n_batch < o.n_seq_max)  // llama.cpp aborts (GGML_ASSERT in output_reserve) otherwise
      throw std::invalid_argument("context_options: n_batch " + std::to_string(p.n_batch) +
                                  " (at most n_ctx) is below n_seq_max " +
                                  std::to_string(o.n_seq_max) + "; raise n_ctx or lower n_seq_max");
    p.n_ubatch = p.n_batch;
    p.n_seq_max = static_cast<std::uint32_t>(o.n_seq_max);
    if (o.n_threads > 0) {
      p.n_threads = static_cast<std::int32_t>(o.n_threads);
      p.n_threads_batch = p.n_threads;
    }
    p.embeddings = o.embeddings;
    p.pooling_type = LLAMA_POOLING_TYPE_NONE;
    p.kv_unified = o.kv_unified;
    p.flash_attn_type = o.flash_attn;
    p.no_perf = true;
    ctx_.reset(llama_init_from_model(model.get(), p));
    if (!ctx_)
      throw llama_error("llama_init_from_model failed for '" + model.path() + "' (n_ctx " +
                        std::to_string(p.n_ctx) + ", n_batch " + std::to_string(p.n_batch) +
                        ", n_seq_max " + std::to_string(p.n_seq_max) + ")");
  }

  llama_context* get() const noexcept { return ctx_.get(); }
  llama_memory_t memory() const noexcept { return llama_get_memory(ctx_.get()); }

 private:
  struct deleter {
    void operator()(llama_context* c) const noexcept { llama_free(c); }
  };
  std::unique_ptr<llama_context, deleter> ctx_;
};

/// A llama_batch of room for `tokens` tokens, each in up to `seq_ids` sequences
/// (llama_batch_init / llama_batch_free). Not copyable.
class batch_handle {
 public:
  batch_handle(std::size_t tokens, std::size_t seq_ids)
      : batch_(llama_batch_init(static_cast<std::int32_t>(tokens), 0,
                                static_cast<std::int32_t>(seq_ids))),
        capacity_(tokens) {}
  batch_handle(const batch_handle&) = delete;
  batch_handle& operator=(const batch_handle&) = delete;
  ~batch_handle() { llama_batch_free(batch_); }

  llama_batch& get() noexcept { return batch_; }
  std::size_t capacity() const noexcept { return capacity_; }

  /// Empties the batch, then adds tokens with add().
  void clear() noexcept { batch_.n_tokens = 0; }
  /// Token `t` at position `pos` in the sequences `seqs`, with a row of logits when `logits`.
  template <class Seqs>
  void add(llama_token t, llama_pos pos, const Seqs& seqs, bool logits) noexcept {
    const std::int32_t i = batch_.n_tokens++;
    batch_.token[i] = t;
    batch_.pos[i] = pos;
    batch_.n_seq_id[i] = 0;
    for (const auto s : seqs) batch_.seq_id[i][batch_.n_seq_id[i]++] = static_cast<llama_seq_id>(s);
    batch_.logits[i] = logits ? 1 : 0;
  }

 private:
  llama_batch batch_;
  std::size_t capacity_;
};

}  // namespace specdec::llamacpp
