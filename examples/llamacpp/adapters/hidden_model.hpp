// llamacpp/adapters/hidden_model.hpp - a llama.cpp context as a specdec::HiddenStateTreeModel, for draft
// heads (Medusa, EAGLE-style): tree_model whose context is made with `embeddings = true` and
// pooling none, so that every llama_decode also leaves each token's embedding output, which for
// llama models is the row after the final norm: the classifier's input.
//   append(tokens, logits, hidden)          = tree_model::append + llama_get_embeddings_ith
//   prefill(tokens, hidden)                 = llama_decode, every token an output (no logits
//                                             copied) + llama_get_embeddings_ith
//   append_tree(tokens, parents, logits, h) = tree_model::append_tree + llama_get_embeddings_ith
// The heads also need the target's classifier and token embedding (V x d floats each): they are
// read from the GGUF file itself (gguf_init_from_file, then the two tensors' bytes, dequantized
// with ggml's to_float), see load_gguf_classifier.
#pragma once

#include <ggml.h>
#include <gguf.h>
#include <llama.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/concepts/hidden_state_model.hpp>
#include <specdec/types.hpp>

#include "llamacpp/adapters/tree_model.hpp"

namespace specdec::llamacpp {

/// `o` with each token's hidden row extracted (embeddings on; pooling is always none here).
inline context_options hidden_options(context_options o = tree_options(64)) {
  o.embeddings = true;
  return o;
}

/**
 * tree_model that also hands out hidden rows (specdec::HiddenStateTreeModel, with prefill):
 * row i of `hidden` is llama_get_embeddings_ith(ctx, i) of the call that scored token i, d =
 * hidden_size() floats. The context is made with embeddings on, which makes llama.cpp compute
 * every token's row of logits too, so prefill costs what append does (it asks for every row, as
 * llama.cpp would otherwise warn and override, and copies none). Bad input (also a `hidden` of
 * the wrong size) throws before llama.cpp runs and changes nothing; a call split in chunks of
 * batch_size() is undone whole when a chunk fails. Not thread-safe.
 */
class hidden_model : public tree_model {
 public:
  /// `options.embeddings` is forced on; `options.n_seq_max` bounds a tree's leaves.
  explicit hidden_model(const gguf_model& model, context_options options = hidden_options())
      : tree_model(model, hidden_options(options)), d_(model.embedding_size()) {
    const auto out = static_cast<std::size_t>(llama_model_n_embd_out(model.get()));
    if (out != d_)
      throw std::invalid_argument("hidden_model: '" + model.path() + "' has an embedding " +
                                  "output of " + std::to_string(out) + " floats and a width of " +
                                  std::to_string(d_) + "; its rows are not the classifier's input");
  }

  /// d: floats per hidden row (llama_model_n_embd).
  std::size_t hidden_size() const noexcept { return d_; }

  using tree_model::append;

  /// append(tokens, logits), and row i of `hidden` the hidden state at tokens[i].
  void append(std::span<const token_id> tokens, std::span<float> logits, std::span<float> hidden) {
    check_feed(tokens, "append");
    check_hidden(tokens.size(), hidden, "append");
    if (logits.size() != tokens.size() * vocab_)
      throw std::invalid_argument("append: logits has " + std::to_string(logits.size()) +
                                  " floats, expected tokens.size() x vocab_size() = " +
                                  std::to_string(tokens.size() * vocab_));
    decode_chunks(tokens, "append", true, [&](std::size_t done, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) copy_logits(i, logits.data() + (done + i) * vocab_);
      copy_hidden(n, hidden.data() + done * d_);
    });
  }

  /// The tokens fed without copying logits out: llama_decode in chunks of batch_size(), every
  /// token an output (an embeddings context computes every row anyway).
  void prefill(std::span<const token_id> tokens) {
    check_feed(tokens, "prefill");
    decode_chunks(tokens, "prefill", true, [](std::size_t, std::size_t) {});
  }

  /// prefill(tokens) writing the hidden rows.
  void prefill(std::span<const token_id> tokens, std::span<float> hidden) {
    check_feed(tokens, "prefill");
    check_hidden(tokens.size(), hidden, "prefill");
    decode_chunks(tokens, "prefill", true, [&](std::size_t done, std::size_t n) {
      copy_hidden(n, hidden.data() + done * d_);
    });
  }

  /// tree_model::append_tree; the tree is pending until commit().
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    tree_model::append_tree(tokens, parents, logits);
    pending_ = true;
  }

  /// append_tree(tokens, parents, logits) in one llama_decode, and node i's hidden row.
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits, std::span<float> hidden) {
    check_hidden(tokens.size(), hidden, "append_tree");
    append_tree(tokens, parents, logits);
    try {
      copy_hidden(tokens.size(), hidden.data());
    } catch (...) {
      commit(std::span<const std::int32_t>());  // drop the tree: nothing changed
      throw;
    }
  }

  /// tree_model::commit.
  void commit(std::span<const std::int32_t> path) {
    tree_model::commit(path);
    pending_ = false;
  }

 private:
  void check_hidden(std::size_t n, std::span<float> hidden, const char* who) const {
    if (hidden.size() != n * d_)
      throw std::invalid_argument(std::string(who) + ": hidden has " +
                                  std::to_string(hidden.size()) + " floats, expected " +
                                  "tokens.size() x hidden_size() = " + std::to_string(n * d_));
  }
  void check_feed(std::span<const token_id> tokens, const char* who) const {
    if (pending_)
      throw std::logic_error(std::string(who) + ": a tree is pending; commit() comes first");
    check_tokens(tokens, who);
  }

  /// Rows 0..n-1 of the last llama_decode's embedding output (llama_get_embeddings_ith).
  void copy_hidden(std::size_t n, float* out) {
    for (std::size_t i = 0; i < n; ++i) {
      const float* row = llama_get_embeddings_ith(ctx_.get(), static_cast<std::int32_t>(i));
      if (row == nullptr)
        throw llama_error("llama_get_embeddings_ith(" + std::to_string(i) +
                          ") returned no row (was the context made with embeddings on?)");
      std::memcpy(out + i * d_, row, d_ * sizeof(float));
    }
  }

  std::size_t d_;
  bool pending_ = false;  ///< a tree is pending (append_tree ... commit)
};

static_assert(HiddenStateTreeModel<hidden_model> && PrefillLanguageModel<hidden_model>);

/**
 * The target's classifier and token embedding as V x d float matrices, read from its GGUF file:
 * what draft heads multiply their rows with (medusa_drafter, eagle_drafter take them as
 * weight_view). `output.weight` is the classifier (`token_embd.weight` when the file has none: a
 * tied model); both are dequantized with ggml's to_float for their type, so F32, F16 and Q8_0
 * files all work. `shared` is true when the two hold the same values (a llama2.c checkpoint with
 * a shared classifier converts to two equal tensors).
 */
struct gguf_classifier {
  row_matrix classifier;  ///< V x d
  row_matrix embedding;   ///< V x d
  bool shared = false;
};

namespace detail {

/// The named V x d tensor of `file` (ggml's ne = {d, V}) as floats. std::runtime_error naming
/// the file and the tensor when it is missing, of another shape or unreadable.
inline row_matrix read_gguf_matrix(const gguf_context* meta, const std::string& file,
                                   const char* name, std::size_t d, std::size_t v) {
  const auto fail = [&](const std::string& why) -> row_matrix {
    throw std::runtime_error("'" + file + "': tensor " + name + ": " + why);
  };
  const std::int64_t id = gguf_find_tensor(meta, name);
  if (id < 0) return fail("not in the file");
  const std::int64_t* ne = gguf_get_tensor_ne(meta, id);
  if (ne[0] != static_cast<std::int64_t>(d) || ne[1] != static_cast<std::int64_t>(v) ||
      ne[2] != 1 || ne[3] != 1)
    return fail("shape " + std::to_string(ne[0]) + " x " + std::to_string(ne[1]) +
                ", expected hidden " + std::to_string(d) + " x vocabulary " + std::to_string(v));
  const ggml_type type = gguf_get_tensor_type(meta, id);
  const ggml_type_traits* traits = ggml_get_type_traits(type);
  if (traits == nullptr || (type != GGML_TYPE_F32 && traits->to_float == nullptr))
    return fail(std::string("type ") + ggml_type_name(type) + " cannot be converted to floats");
  const std::size_t bytes = gguf_get_tensor_size(meta, id), row_bytes = bytes / v;
  std::vector<char> raw(bytes);
  std::ifstream in(file, std::ios::binary);
  in.seekg(
      static_cast<std::streamoff>(gguf_get_data_offset(meta) + gguf_get_tensor_offset(meta, id)));
  in.read(raw.data(), static_cast<std::streamsize>(bytes));
  if (!in) return fail("cannot be read (truncated file?)");
  row_matrix m(static_cast<Eigen::Index>(v), static_cast<Eigen::Index>(d));
  for (std::size_t r = 0; r < v; ++r) {
    float* dst = m.data() + r * d;
    if (type == GGML_TYPE_F32)
      std::memcpy(dst, raw.data() + r * row_bytes, d * sizeof(float));
    else
      traits->to_float(raw.data() + r * row_bytes, dst, static_cast<std::int64_t>(d));
  }
  if (!m.allFinite()) return fail("holds NaN or infinity");
  return m;
}

}  // namespace detail

/// Reads `model`'s classifier and embedding from its file (gguf_init_from_file, metadata only,
/// then the two tensors' bytes). O(V d). Throws llama_error when gguf cannot parse the file,
/// std::runtime_error naming the tensor when one is missing or of the wrong shape.
inline gguf_classifier load_gguf_classifier(const gguf_model& model) {
  struct deleter {
    void operator()(gguf_context* c) const noexcept { gguf_free(c); }
  };
  const gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  const std::unique_ptr<gguf_context, deleter> meta(
      gguf_init_from_file(model.path().c_str(), params));
  if (!meta) throw llama_error("gguf_init_from_file failed for '" + model.path() + "'");
  const std::size_t d = model.embedding_size(), v = model.vocab_size();
  gguf_classifier out;
  out.embedding = detail::read_gguf_matrix(meta.get(), model.path(), "token_embd.weight", d, v);
  if (gguf_find_tensor(meta.get(), "output.weight") >= 0) {
    out.classifier = detail::read_gguf_matrix(meta.get(), model.path(), "output.weight", d, v);
    out.shared = out.classifier == out.embedding;
  } else {
    out.classifier = out.embedding;
    out.shared = true;
  }
  return out;
}

}  // namespace specdec::llamacpp
