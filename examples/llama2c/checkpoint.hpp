// llama2c/checkpoint.hpp - loads a llama2.c checkpoint (header + float32 weights) into memory.
//
// The file is read once into one float buffer; each weight matrix is then transposed in place to
// column-major order, and `weights` exposes each tensor as an Eigen map into the buffer. Why
// column-major: a column-major W (out x in) is W^T stored row-major (in x out), so the model's
// products X * W^T (X: n x in, row-major) stream W^T's rows in place, contiguous along the
// outputs, for any n (model.hpp, detail::xwt). Weights are immutable after loading and meant to
// be shared through std::shared_ptr<const weights> by every model that runs them (full model,
// layer-skip drafts).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <specdec/types.hpp>

namespace specdec::llama2c {

static_assert(std::endian::native == std::endian::little,
              "llama2c: checkpoints are little-endian; this loader does not byte-swap");

/// The checkpoint header, validated: every field positive, dim % n_heads == 0,
/// n_heads % n_kv_heads == 0, head_size even.
struct config {
  std::size_t dim = 0;         ///< model width
  std::size_t hidden_dim = 0;  ///< SwiGLU inner width
  std::size_t n_layers = 0;
  std::size_t n_heads = 0;     ///< query heads
  std::size_t n_kv_heads = 0;  ///< key/value heads (grouped-query attention when < n_heads)
  std::size_t vocab_size = 0;
  std::size_t seq_len = 0;     ///< the context length the model was trained for
  bool shared_classifier = true;  ///< the classifier is the token embedding (vocab_size > 0)

  std::size_t head_size() const noexcept { return dim / n_heads; }
  std::size_t kv_dim() const noexcept { return n_kv_heads * head_size(); }
};

/// Read-only view of a weight matrix: rows = outputs, cols = inputs (as in llama2.c), stored
/// column-major.
using matrix_view =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>>;
/// Read-only view of a weight vector (RMSNorm gains).
using vector_view = Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>;

/// One transformer block's tensors.
struct layer_weights {
  vector_view rms_att;  ///< 1 x dim
  matrix_view wq;       ///< dim x dim
  matrix_view wk;       ///< kv_dim x dim
  matrix_view wv;       ///< kv_dim x dim
  matrix_view wo;       ///< dim x dim
  vector_view rms_ffn;  ///< 1 x dim
  matrix_view w1;       ///< hidden x dim
  matrix_view w2;       ///< dim x hidden
  matrix_view w3;       ///< hidden x dim
};

/// All tensors of a checkpoint. Immutable, not copyable (the views point into its own buffer);
/// safe to read from several threads.
class weights {
 public:
  /// Reads and validates `path`. Throws std::runtime_error naming the file and the problem when
  /// it is missing, unreadable, truncated, has a bad header, or its size does not match the header.
  explicit weights(const std::filesystem::path& path);
  weights(const weights&) = delete;
  weights& operator=(const weights&) = delete;

  const config& cfg() const noexcept { return config_; }
  /// vocab_size x dim
  const matrix_view& token_embedding() const noexcept { return *embedding_; }
  const layer_weights& layer(std::size_t l) const { return layers_.at(l); }
  /// 1 x dim
  const vector_view& rms_final() const noexcept { return *rms_final_; }
  /// vocab_size x dim; the token embedding when the classifier is shared.
  const matrix_view& classifier() const noexcept { return *classifier_; }

 private:
  config config_;
  std::vector<float> data_;
  std::unique_ptr<matrix_view> embedding_;
  std::vector<layer_weights> layers_;
  std::unique_ptr<vector_view> rms_final_;
  std::unique_ptr<matrix_view> classifier_;
};

/// Loads a checkpoint for sharing between models. Same errors as the weights constructor.
inline std::shared_ptr<const weights> load_checkpoint(const std::filesystem::path& path) {
  return std::make_shared<const weights>(path);
}

namespace detail {

[[noreturn]] inline void checkpoint_error(const std::filesystem::path& path,
                                          const std::string& what) {
  throw std::runtime_error("llama2c checkpoint '" + path.string() + "': " + what);
}

/// a * b, or an error when the product overflows (absurd header values).
inline std::uint64_t checked_mul(const std::filesystem::path& path, std::uint64_t a,
                                 std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a)
    checkpoint_error(path, "header values are too large (weight count overflows)");
  return a * b;
}

inline std::uint64_t checked_add(const std::filesystem::path& path, std::uint64_t a,
                                 std::uint64_t b) {
  if (b > std::numeric_limits<std::uint64_t>::max() - a)
    checkpoint_error(path, "header values are too large (weight count overflows)");
  return a + b;
}

}  // namespace detail

inline weights::weights(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) detail::checkpoint_error(path, "file not found");
  if (!fs::is_regular_file(path, ec)) detail::checkpoint_error(path, "not a regular file");
  const std::uintmax_t file_size = fs::file_size(path, ec);
  if (ec) detail::checkpoint_error(path, "cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::checkpoint_error(path, "cannot open for reading");

  constexpr std::size_t header_fields = 7;
  constexpr std::uint64_t header_bytes = header_fields * sizeof(std::int32_t);
  if (file_size < header_bytes)
    detail::checkpoint_error(path, "truncated header: file has " + std::to_string(file_size) +
                                       " bytes, the header needs " +
                                       std::to_string(header_bytes));
  std::int32_t h[header_fields];
  in.read(reinterpret_cast<char*>(h), header_bytes);
  if (!in) detail::checkpoint_error(path, "cannot read the header");

  const char* names[header_fields] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                      "n_kv_heads", "vocab_size", "seq_len"};
  for (std::size_t i = 0; i < header_fields; ++i) {
    const bool ok = (i == 5) ? (h[i] != 0 && h[i] != std::numeric_limits<std::int32_t>::min())
                             : h[i] > 0;
    if (!ok)
      detail::checkpoint_error(path, std::string("bad header: ") + names[i] + " = " +
                                         std::to_string(h[i]) + " (must be positive" +
                                         (i == 5 ? "; negative marks an unshared classifier)"
                                                 : ")"));
  }
  config& c = config_;
  c.dim = static_cast<std::size_t>(h[0]);
  c.hidden_dim = static_cast<std::size_t>(h[1]);
  c.n_layers = static_cast<std::size_t>(h[2]);
  c.n_heads = static_cast<std::size_t>(h[3]);
  c.n_kv_heads = static_cast<std::size_t>(h[4]);
  c.shared_classifier = h[5] > 0;
  c.vocab_size = static_cast<std::size_t>(h[5] > 0 ? h[5] : -static_cast<std::int64_t>(h[5]));
  c.seq_len = static_cast<std::size_t>(h[6]);
  if (c.dim % c.n_heads != 0)
    detail::checkpoint_error(path, "bad header: dim = " + std::to_string(c.dim) +
                                       " is not divisible by n_heads = " +
                                       std::to_string(c.n_heads));
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    detail::checkpoint_error(path, "bad header: n_heads = " + std::to_string(c.n_heads) +
                                       " is not a multiple of n_kv_heads = " +
                                       std::to_string(c.n_kv_heads));
  if (c.head_size() % 2 != 0)
    detail::checkpoint_error(path, "bad header: head size dim / n_heads = " +
                                       std::to_string(c.head_size()) +
                                       " is odd (RoPE rotates pairs)");

  // Float count in llama2.c's order; see the offsets below.
  const std::uint64_t dim = c.dim, hid = c.hidden_dim, nl = c.n_layers, kv = c.kv_dim(),
                      voc = c.vocab_size, hs = c.head_size();
  const auto& p = path;
  using detail::checked_add;
  using detail::checked_mul;
  std::uint64_t count = checked_mul(p, voc, dim);                            // embedding
  count = checked_add(p, count, checked_mul(p, nl, dim));                    // rms_att
  count = checked_add(p, count, checked_mul(p, nl, checked_mul(p, dim, dim)));  // wq
  count = checked_add(p, count, checked_mul(p, 2 * nl, checked_mul(p, kv, dim)));  // wk, wv
  count = checked_add(p, count, checked_mul(p, nl, checked_mul(p, dim, dim)));  // wo
  count = checked_add(p, count, checked_mul(p, nl, dim));                       // rms_ffn
  count = checked_add(p, count, checked_mul(p, 3 * nl, checked_mul(p, hid, dim)));  // w1 w2 w3
  count = checked_add(p, count, dim);                                               // rms_final
  count = checked_add(p, count, checked_mul(p, c.seq_len, hs));  // freq_cis real + imag
  if (!c.shared_classifier) count = checked_add(p, count, checked_mul(p, voc, dim));  // wcls
  const std::uint64_t expected = checked_add(p, header_bytes, checked_mul(p, count, 4));
  if (file_size != expected)
    detail::checkpoint_error(
        path, std::string(file_size < expected ? "truncated" : "malformed") + ": file has " +
                  std::to_string(file_size) + " bytes but its header (dim " +
                  std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.hidden_dim) +
                  ", n_layers " + std::to_string(c.n_layers) + ", n_heads " +
                  std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) +
                  ", vocab_size " + std::to_string(h[5]) + ", seq_len " +
                  std::to_string(c.seq_len) + ") needs " + std::to_string(expected));

  data_.resize(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(data_.data()),
          static_cast<std::streamsize>(count * sizeof(float)));
  if (!in) detail::checkpoint_error(path, "read failed while loading the weights");

  float* ptr = data_.data();
  std::vector<float> tmp;
  // Returns the next n floats; a matrix (rows x cols, row-major in the file) is transposed in
  // place to column-major.
  const auto take = [&ptr, &tmp](std::uint64_t n, std::uint64_t rows = 0, std::uint64_t cols = 0) {
    float* at = ptr;
    ptr += n;
    if (rows != 0) {
      using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      using col_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
      const auto r = static_cast<Eigen::Index>(rows), c = static_cast<Eigen::Index>(cols);
      tmp.assign(at, at + n);
      Eigen::Map<col_major>(at, r, c) = Eigen::Map<const row_major>(tmp.data(), r, c);
    }
    return static_cast<const float*>(at);
  };
  const auto idim = static_cast<Eigen::Index>(c.dim), ihid = static_cast<Eigen::Index>(c.hidden_dim),
             ikv = static_cast<Eigen::Index>(kv), ivoc = static_cast<Eigen::Index>(voc);
  embedding_ = std::make_unique<matrix_view>(take(voc * dim, voc, dim), ivoc, idim);
  // Per-tensor blocks for all layers are contiguous: layer l's slice is at base + l * size.
  const float* rms_att = take(nl * dim);
  const auto take_layers = [&](std::uint64_t rows, std::uint64_t cols) {
    const float* first = ptr;
    for (std::uint64_t l = 0; l < nl; ++l) take(rows * cols, rows, cols);
    return first;
  };
  const float* wq = take_layers(dim, dim);
  const float* wk = take_layers(kv, dim);
  const float* wv = take_layers(kv, dim);
  const float* wo = take_layers(dim, dim);
  const float* rms_ffn = take(nl * dim);
  const float* w1 = take_layers(hid, dim);
  const float* w2 = take_layers(dim, hid);
  const float* w3 = take_layers(hid, dim);
  rms_final_ = std::make_unique<vector_view>(take(dim), idim);
  take(c.seq_len * hs);  // freq_cis_real and freq_cis_imag: RoPE is computed, not read
  const float* wcls = c.shared_classifier ? embedding_->data() : take(voc * dim, voc, dim);
  classifier_ = std::make_unique<matrix_view>(wcls, ivoc, idim);
  std::vector<float>().swap(tmp);
  layers_.reserve(c.n_layers);
  for (std::uint64_t l = 0; l < nl; ++l) {
    layers_.push_back(layer_weights{
        vector_view(rms_att + l * dim, idim),
        matrix_view(wq + l * dim * dim, idim, idim),
        matrix_view(wk + l * kv * dim, ikv, idim),
        matrix_view(wv + l * kv * dim, ikv, idim),
        matrix_view(wo + l * dim * dim, idim, idim),
        vector_view(rms_ffn + l * dim, idim),
        matrix_view(w1 + l * hid * dim, ihid, idim),
        matrix_view(w2 + l * dim * hid, idim, ihid),
        matrix_view(w3 + l * hid * dim, ihid, idim),
    });
  }
}

}  // namespace specdec::llama2c
