// llama2c/engine/checkpoint.hpp - a llama2.c checkpoint: its header, the order of its tensors, and a
// loader that keeps every tensor in the file's own layout.
//
// One place knows the file: `file_layout(config)` lists the tensors in the order llama2.c writes
// them, with their shapes. The loader, the expected file size and the checkpoint writer
// (checkpoint_writer.hpp) all walk that list; nothing else restates an offset.
//
// Loading is one read of the file into a 64-byte aligned buffer (on Linux, backed by huge pages
// where the kernel grants them): no transposes, no per-tensor copies. Each matrix stays row-major,
// one output's weights contiguous (out x in), which is the layout the kernels read
// (kernels.hpp). Weights are immutable after loading and meant to be shared through
// std::shared_ptr<const weights> by every model that runs them (target, layer-skip drafts).
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

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
  std::size_t seq_len = 0;        ///< the context length the model was trained for
  bool shared_classifier = true;  ///< the classifier is the token embedding (vocab_size > 0)

  std::size_t head_size() const noexcept { return dim / n_heads; }
  std::size_t kv_dim() const noexcept { return n_kv_heads * head_size(); }
};

/// The tensors of a checkpoint, in file order.
enum class tensor_kind {
  token_embedding,  ///< vocab x dim
  rms_att,          ///< per layer: dim
  wq,               ///< per layer: dim x dim
  wk,               ///< per layer: kv_dim x dim
  wv,               ///< per layer: kv_dim x dim
  wo,               ///< per layer: dim x dim
  rms_ffn,          ///< per layer: dim
  w1,               ///< per layer: hidden x dim
  w2,               ///< per layer: dim x hidden
  w3,               ///< per layer: hidden x dim
  rms_final,        ///< dim
  freq_cis_real,    ///< seq_len x head_size / 2 (RoPE cosines; the loader computes its own)
  freq_cis_imag,    ///< seq_len x head_size / 2 (RoPE sines)
  classifier,       ///< vocab x dim; only when the classifier is not shared
};

/// One tensor of the file: `layers` consecutive blocks (1 for a global tensor) of rows x cols
/// floats, row-major (a vector has rows = 1).
struct tensor_info {
  tensor_kind kind;
  const char* name;
  std::uint64_t layers;
  std::uint64_t rows;
  std::uint64_t cols;
  std::uint64_t block() const noexcept { return rows * cols; }  ///< floats per layer
};

/// The file's tensors in order, for a validated config (the classifier only when unshared).
inline std::vector<tensor_info> file_layout(const config& c) {
  const std::uint64_t dim = c.dim, hid = c.hidden_dim, nl = c.n_layers, kv = c.kv_dim(),
                      voc = c.vocab_size;
  std::vector<tensor_info> t{
      {tensor_kind::token_embedding, "token_embedding", 1, voc, dim},
      {tensor_kind::rms_att, "rms_att", nl, 1, dim},
      {tensor_kind::wq, "wq", nl, dim, dim},
      {tensor_kind::wk, "wk", nl, kv, dim},
      {tensor_kind::wv, "wv", nl, kv, dim},
      {tensor_kind::wo, "wo", nl, dim, dim},
      {tensor_kind::rms_ffn, "rms_ffn", nl, 1, dim},
      {tensor_kind::w1, "w1", nl, hid, dim},
      {tensor_kind::w2, "w2", nl, dim, hid},
      {tensor_kind::w3, "w3", nl, hid, dim},
      {tensor_kind::rms_final, "rms_final", 1, 1, dim},
      {tensor_kind::freq_cis_real, "freq_cis_real", 1, c.seq_len, c.head_size() / 2},
      {tensor_kind::freq_cis_imag, "freq_cis_imag", 1, c.seq_len, c.head_size() / 2},
  };
  if (!c.shared_classifier) t.push_back({tensor_kind::classifier, "classifier", 1, voc, dim});
  return t;
}

/// Bytes of the header: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
/// vocab_size (negative: unshared classifier), seq_len).
inline constexpr std::uint64_t header_bytes = 7 * sizeof(std::int32_t);

/// Read-only view of a weight matrix in the file's layout: rows = outputs, cols = inputs,
/// row-major (one output's weights contiguous).
using matrix_view =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
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

/// The floats after the header that `c` needs, with overflow checks.
inline std::uint64_t float_count(const std::filesystem::path& path, const config& c) {
  std::uint64_t count = 0;
  for (const tensor_info& t : file_layout(c))
    count =
        checked_add(path, count, checked_mul(path, t.layers, checked_mul(path, t.rows, t.cols)));
  return count;
}

/// Parses and validates the seven header fields.
inline config parse_header(const std::filesystem::path& path,
                           const std::array<std::int32_t, 7>& h) {
  const char* names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                          "n_kv_heads", "vocab_size", "seq_len"};
  for (std::size_t i = 0; i < 7; ++i) {
    const bool ok =
        (i == 5) ? (h[i] != 0 && h[i] != std::numeric_limits<std::int32_t>::min()) : h[i] > 0;
    if (!ok)
      checkpoint_error(path, std::string("bad header: ") + names[i] + " = " + std::to_string(h[i]) +
                                 " (must be positive" +
                                 (i == 5 ? "; negative marks an unshared classifier)" : ")"));
  }
  config c;
  c.dim = static_cast<std::size_t>(h[0]);
  c.hidden_dim = static_cast<std::size_t>(h[1]);
  c.n_layers = static_cast<std::size_t>(h[2]);
  c.n_heads = static_cast<std::size_t>(h[3]);
  c.n_kv_heads = static_cast<std::size_t>(h[4]);
  c.shared_classifier = h[5] > 0;
  c.vocab_size = static_cast<std::size_t>(h[5] > 0 ? h[5] : -static_cast<std::int64_t>(h[5]));
  c.seq_len = static_cast<std::size_t>(h[6]);
  if (c.dim % c.n_heads != 0)
    checkpoint_error(path, "bad header: dim = " + std::to_string(c.dim) +
                               " is not divisible by n_heads = " + std::to_string(c.n_heads));
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0)
    checkpoint_error(path,
                     "bad header: n_heads = " + std::to_string(c.n_heads) +
                         " is not a multiple of n_kv_heads = " + std::to_string(c.n_kv_heads));
  if (c.head_size() % 2 != 0)
    checkpoint_error(path, "bad header: head size dim / n_heads = " +
                               std::to_string(c.head_size()) + " is odd (RoPE rotates pairs)");
  return c;
}

/// The header fields of `c`, as the file stores them.
inline std::array<std::int32_t, 7> header_fields(const config& c) {
  const auto i32 = [](std::size_t v) { return static_cast<std::int32_t>(v); };
  const std::int32_t vocab = c.shared_classifier ? i32(c.vocab_size) : -i32(c.vocab_size);
  return {i32(c.dim), i32(c.hidden_dim), i32(c.n_layers), i32(c.n_heads), i32(c.n_kv_heads),
          vocab,      i32(c.seq_len)};
}

/// Frees an aligned_alloc'ed float buffer.
struct aligned_free {
  void operator()(float* p) const noexcept { std::free(p); }
};

/// An uninitialised float buffer of n floats, aligned for the kernels; large buffers are aligned
/// to 2 MiB and offered to the kernel as transparent huge pages (fewer TLB misses while the
/// weights stream).
inline std::unique_ptr<float[], aligned_free> allocate_floats(std::uint64_t n) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  const std::size_t align = bytes >= huge ? huge : 64;
  const std::size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == huge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return std::unique_ptr<float[], aligned_free>(static_cast<float*>(p));
}

}  // namespace detail

/// All tensors of a checkpoint, in the file's layout. Immutable, not copyable (the views point
/// into its own buffer); safe to read from several threads.
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
  /// The floats of tensor `kind` in layer `l` (0 for a global tensor), as the file stores them.
  /// Throws std::out_of_range for a layer past the tensor's count or an absent classifier.
  std::span<const float> tensor(tensor_kind kind, std::size_t l = 0) const;
  /// Bytes of weights read from the file (header excluded).
  std::uint64_t bytes() const noexcept { return floats_ * sizeof(float); }
  /// Wall-clock seconds the constructor took (read and validation).
  double load_seconds() const noexcept { return load_seconds_; }

 private:
  config config_;
  std::unique_ptr<float[], detail::aligned_free> data_;
  std::uint64_t floats_ = 0;
  std::vector<tensor_info> layout_;
  std::vector<std::uint64_t> offsets_;  // per layout_ entry: first float of its first layer
  std::unique_ptr<matrix_view> embedding_;
  std::vector<layer_weights> layers_;
  std::unique_ptr<vector_view> rms_final_;
  std::unique_ptr<matrix_view> classifier_;
  double load_seconds_ = 0.0;
};

/// Loads a checkpoint for sharing between models. Same errors as the weights constructor.
inline std::shared_ptr<const weights> load_checkpoint(const std::filesystem::path& path) {
  return std::make_shared<const weights>(path);
}

inline weights::weights(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::exists(path, ec)) detail::checkpoint_error(path, "file not found");
  if (!fs::is_regular_file(path, ec)) detail::checkpoint_error(path, "not a regular file");
  const std::uintmax_t file_size = fs::file_size(path, ec);
  if (ec) detail::checkpoint_error(path, "cannot read its size: " + ec.message());
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"),
                                                           &std::fclose);
  if (!in) detail::checkpoint_error(path, "cannot open for reading");
  std::setvbuf(in.get(), nullptr, _IONBF, 0);  // one read into our buffer, no stdio copy

  if (file_size < header_bytes)
    detail::checkpoint_error(path, "truncated header: file has " + std::to_string(file_size) +
                                       " bytes, the header needs " + std::to_string(header_bytes));
  std::array<std::int32_t, 7> h{};
  if (std::fread(h.data(), sizeof(std::int32_t), h.size(), in.get()) != h.size())
    detail::checkpoint_error(path, "cannot read the header");
  config_ = detail::parse_header(path, h);
  const config& c = config_;

  const std::uint64_t count = detail::float_count(path, c);
  const std::uint64_t expected =
      detail::checked_add(path, header_bytes, detail::checked_mul(path, count, sizeof(float)));
  if (file_size != expected)
    detail::checkpoint_error(
        path, std::string(file_size < expected ? "truncated" : "malformed") + ": file has " +
                  std::to_string(file_size) + " bytes but its header (dim " +
                  std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.hidden_dim) +
                  ", n_layers " + std::to_string(c.n_layers) + ", n_heads " +
                  std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) +
                  ", vocab_size " + std::to_string(h[5]) + ", seq_len " +
                  std::to_string(c.seq_len) + ") needs " + std::to_string(expected));

  // The size matches the file, so the allocation is no larger than the file.
  data_ = detail::allocate_floats(count);
  floats_ = count;
  if (std::fread(data_.get(), sizeof(float), static_cast<std::size_t>(count), in.get()) != count)
    detail::checkpoint_error(path, "read failed while loading the weights");

  layout_ = file_layout(c);
  std::uint64_t at = 0;
  for (const tensor_info& t : layout_) {
    offsets_.push_back(at);
    at += t.layers * t.block();
  }
  const auto idim = static_cast<Eigen::Index>(c.dim),
             ihid = static_cast<Eigen::Index>(c.hidden_dim),
             ikv = static_cast<Eigen::Index>(c.kv_dim()),
             ivoc = static_cast<Eigen::Index>(c.vocab_size);
  embedding_ =
      std::make_unique<matrix_view>(tensor(tensor_kind::token_embedding).data(), ivoc, idim);
  rms_final_ = std::make_unique<vector_view>(tensor(tensor_kind::rms_final).data(), idim);
  classifier_ = std::make_unique<matrix_view>(
      c.shared_classifier ? embedding_->data() : tensor(tensor_kind::classifier).data(), ivoc,
      idim);
  layers_.reserve(c.n_layers);
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const auto m = [&](tensor_kind k, Eigen::Index rows, Eigen::Index cols) {
      return matrix_view(tensor(k, l).data(), rows, cols);
    };
    const auto v = [&](tensor_kind k) { return vector_view(tensor(k, l).data(), idim); };
    layers_.push_back(layer_weights{v(tensor_kind::rms_att), m(tensor_kind::wq, idim, idim),
                                    m(tensor_kind::wk, ikv, idim), m(tensor_kind::wv, ikv, idim),
                                    m(tensor_kind::wo, idim, idim), v(tensor_kind::rms_ffn),
                                    m(tensor_kind::w1, ihid, idim), m(tensor_kind::w2, idim, ihid),
                                    m(tensor_kind::w3, ihid, idim)});
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

inline std::span<const float> weights::tensor(tensor_kind kind, std::size_t l) const {
  for (std::size_t i = 0; i < layout_.size(); ++i) {
    const tensor_info& t = layout_[i];
    if (t.kind != kind) continue;
    if (l >= t.layers)
      throw std::out_of_range(std::string("llama2c::weights::tensor: ") + t.name + " has " +
                              std::to_string(t.layers) + " layer(s), asked for layer " +
                              std::to_string(l));
    return {data_.get() + offsets_[i] + l * t.block(), static_cast<std::size_t>(t.block())};
  }
  throw std::out_of_range(
      "llama2c::weights::tensor: the checkpoint has no such tensor (a "
      "shared classifier is the token embedding)");
}

}  // namespace specdec::llama2c
