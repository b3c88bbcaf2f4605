// llama2c/tools/reshape.hpp - writes a larger llama2.c checkpoint that computes the same function as a
// smaller one (a real model's predictions at a larger model's forward cost), and truncates a
// checkpoint to its first layers (a separate, cheap draft model).
//
// The construction, for IN (dim d, hidden h, L layers, H heads, Hkv kv heads, head size
// hs = d / H, group g = H / Hkv) and OUT (D, Hd, L', H', Hkv', hs' = D / H', g' = H' / Hkv',
// r = hs' / hs, alpha = sqrt(D / d)):
// - Residual stream: OUT's is alpha * [IN's, 0...]. Then mean(x'^2) over D equals mean(x^2) over d
//   exactly, so RMSNorm (eps included) normalises by the same factor: embedding x alpha, block
//   norm gains / alpha (the normed activations equal IN's), wo and w2 x alpha (each block adds
//   alpha x IN's update), final gain / alpha^2 with a shared classifier (alpha x embedding) or
//   / alpha with a separate one.
// - Heads: when g' >= g, kv head j -> j, query head j*g + i -> j*g' + i (same kv head). When
//   g' < g (g a multiple of g'; e.g. a grouped-query IN such as stories260K, 8 query heads on 4
//   kv heads, into the 110M shape's 12 on 12), c = g / g' copies of each kv head: kv head j ->
//   j*c .. j*c + c - 1, query head j*g + i -> j*g + i, whose kv head (j*g + i) / g' = j*c + i / g'
//   is a copy of j. Within a head, IN's
//   dimension t -> (t / 2) * 2r + t % 2: IN's RoPE pair p becomes OUT's pair p*r, whose frequency
//   10000^(-2pr / (hs r)) is IN's (bit for bit in float: both quotients round the same real).
//   wq x sqrt(r) compensates the score scale 1 / sqrt(hs').
// - FFN: w1, w3, w2 in the top-left corner (SiLU(0) * 0 = 0 in the padding).
// - Layers: IN's layer i at OUT's floor(i L' / L); the others are identity layers (zero weights,
//   so the residual passes through; norm gains 1). Spread evenly, the first k layers of OUT hold
//   about k / L' of IN's computation, as a layer-skip of a real model would.
// Everything else is zero. Vocabulary, tokenizer and classifier sharing are unchanged.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "llama2c/engine/checkpoint.hpp"
#include "llama2c/tools/checkpoint_writer.hpp"

namespace specdec::llama2c {

/// OUT's shape. A field of 0 keeps IN's value.
struct reshape_options {
  std::size_t dim = 0;
  std::size_t hidden_dim = 0;
  std::size_t n_layers = 0;
  std::size_t n_heads = 0;
  std::size_t n_kv_heads = 0;
  std::size_t seq_len = 0;  ///< may raise IN's context (RoPE is computed for any position)
};

/// A named shape: the public TinyStories llama2.c models' (seq_len kept).
struct named_shape {
  std::string_view name;
  reshape_options shape;
};

inline constexpr std::array<named_shape, 3> named_shapes{{
    {"15M", {.dim = 288, .hidden_dim = 768, .n_layers = 6, .n_heads = 6, .n_kv_heads = 6}},
    {"42M", {.dim = 512, .hidden_dim = 1376, .n_layers = 8, .n_heads = 8, .n_kv_heads = 8}},
    {"110M", {.dim = 768, .hidden_dim = 2048, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12}},
}};

/// The named shape `name` (15M, 42M, 110M); std::invalid_argument listing the names otherwise.
inline reshape_options shape_named(std::string_view name) {
  std::string names;
  for (const named_shape& s : named_shapes) {
    if (s.name == name) return s.shape;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw std::invalid_argument("llama2c::shape_named: unknown shape '" + std::string(name) +
                              "' (known: " + names + ")");
}

/// What a reshape or a truncation wrote.
struct reshape_result {
  config shape;                          ///< OUT's configuration
  std::uint64_t bytes = 0;               ///< OUT's size
  double seconds = 0.0;                  ///< load, fill and write, wall clock
  std::vector<std::size_t> real_layers;  ///< OUT's index of each of IN's layers
};

/// OUT's index of IN's layer i when IN's `in_layers` are spread over `out_layers`:
/// floor(i * out_layers / in_layers), distinct for distinct i since out_layers >= in_layers.
inline std::size_t reshaped_layer(std::size_t i, std::size_t in_layers, std::size_t out_layers) {
  return i * out_layers / in_layers;
}

namespace detail {

[[noreturn]] inline void reshape_refused(const std::string& field, std::size_t out,
                                         const std::string& relation, std::size_t in) {
  throw std::invalid_argument("llama2c::reshape: " + field + " = " + std::to_string(out) + " " +
                              relation + " IN's " + field + " = " + std::to_string(in));
}

/// Refuses `out` when it names the same file as `in` (also through links); never loads anything.
inline void check_distinct(const std::filesystem::path& in, const std::filesystem::path& out,
                           const char* who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (fs::is_directory(out, ec))
    throw std::runtime_error(std::string("llama2c::") + who + ": OUT '" + out.string() +
                             "' is a folder");
  if (fs::equivalent(in, out, ec))
    throw std::invalid_argument(std::string("llama2c::") + who + ": OUT '" + out.string() +
                                "' is the same file as IN '" + in.string() + "'");
}

/// The file's bytes for `c` (header included).
inline std::uint64_t checkpoint_bytes(const std::filesystem::path& path, const config& c) {
  return header_bytes + float_count(path, c) * sizeof(float);
}

}  // namespace detail

/// OUT's configuration for IN `in` and `options`: std::invalid_argument naming the field and
/// both values when the shape cannot hold IN (see the header comment for the conditions).
inline config reshaped_config(const config& in, const reshape_options& options) {
  config out = in;
  const auto pick = [](std::size_t given, std::size_t kept) { return given == 0 ? kept : given; };
  out.dim = pick(options.dim, in.dim);
  out.hidden_dim = pick(options.hidden_dim, in.hidden_dim);
  out.n_layers = pick(options.n_layers, in.n_layers);
  out.n_heads = pick(options.n_heads, in.n_heads);
  out.n_kv_heads = pick(options.n_kv_heads, in.n_kv_heads);
  out.seq_len = pick(options.seq_len, in.seq_len);

  if (out.dim < in.dim) detail::reshape_refused("dim", out.dim, "is smaller than", in.dim);
  if (out.hidden_dim < in.hidden_dim)
    detail::reshape_refused("hidden_dim", out.hidden_dim, "is smaller than", in.hidden_dim);
  if (out.n_layers < in.n_layers)
    detail::reshape_refused("n_layers", out.n_layers, "is fewer than", in.n_layers);
  if (out.n_heads < in.n_heads)
    detail::reshape_refused("n_heads", out.n_heads, "is fewer than", in.n_heads);
  if (out.n_kv_heads < in.n_kv_heads)
    detail::reshape_refused("n_kv_heads", out.n_kv_heads, "is fewer than", in.n_kv_heads);
  if (out.seq_len < in.seq_len)
    detail::reshape_refused("seq_len", out.seq_len, "is shorter than", in.seq_len);
  if (out.dim % out.n_heads != 0)
    throw std::invalid_argument("llama2c::reshape: dim = " + std::to_string(out.dim) +
                                " is not divisible by n_heads = " + std::to_string(out.n_heads));
  if (out.head_size() % 2 != 0)
    throw std::invalid_argument("llama2c::reshape: head size dim / n_heads = " +
                                std::to_string(out.head_size()) + " is odd (RoPE rotates pairs)");
  if (out.head_size() % in.head_size() != 0)
    throw std::invalid_argument(
        "llama2c::reshape: head size dim / n_heads = " + std::to_string(out.head_size()) +
        " is not a multiple of IN's head size = " + std::to_string(in.head_size()));
  if (out.n_heads % out.n_kv_heads != 0)
    throw std::invalid_argument(
        "llama2c::reshape: n_heads = " + std::to_string(out.n_heads) +
        " is not a multiple of n_kv_heads = " + std::to_string(out.n_kv_heads));
  const std::size_t group = out.n_heads / out.n_kv_heads, in_group = in.n_heads / in.n_kv_heads;
  // A smaller group copies each kv head in_group / group times (see the header comment).
  if (group < in_group && in_group % group != 0)
    throw std::invalid_argument(
        "llama2c::reshape: group size n_heads / n_kv_heads = " + std::to_string(group) +
        " is smaller than IN's group size = " + std::to_string(in_group) + " and does not divide it");
  constexpr std::size_t int32_max = 2147483647;
  for (std::size_t v :
       {out.dim, out.hidden_dim, out.n_layers, out.n_heads, out.n_kv_heads, out.seq_len})
    if (v > int32_max)
      throw std::invalid_argument("llama2c::reshape: a field exceeds the header's 2^31 - 1");
  return out;
}

/**
 * The tensor source (checkpoint_writer.hpp) of OUT = `out` (from reshaped_config) filled from IN =
 * `in`, by the construction in this header's comment. `in` must outlive the source. Each call
 * costs O(the block's IN floats); the writer has zeroed the block.
 */
inline tensor_source reshape_source(const weights& in, const config& out) {
  const config& c = in.cfg();
  const std::size_t d = c.dim, h = c.hidden_dim, hs = c.head_size(), D = out.dim,
                    Hd = out.hidden_dim, hs2 = out.head_size(), r = hs2 / hs,
                    g = c.n_heads / c.n_kv_heads, g2 = out.n_heads / out.n_kv_heads;
  const double alpha = std::sqrt(static_cast<double>(D) / static_cast<double>(d));
  const double alpha2 = static_cast<double>(D) / static_cast<double>(d);
  const double q_scale = std::sqrt(static_cast<double>(r));
  // IN's layer of each of OUT's layers, or -1 for an identity layer.
  std::vector<std::ptrdiff_t> source_layer(out.n_layers, -1);
  for (std::size_t i = 0; i < c.n_layers; ++i)
    source_layer[reshaped_layer(i, c.n_layers, out.n_layers)] = static_cast<std::ptrdiff_t>(i);
  // Copies of each kv head in OUT: 1, or g / g2 when OUT's group is smaller than IN's.
  const std::size_t copies = g2 < g ? g / g2 : 1;
  // OUT's row of IN's row s of a query (group g -> max(g, g2)) or kv (group 1 -> 1, head j ->
  // j * copies + copy) projection.
  const auto head_row = [=](std::size_t s, std::size_t in_group, std::size_t out_group,
                            std::size_t copy = 0) {
    const std::size_t head = s / hs, t = s % hs;
    const std::size_t big_head = (head / in_group) * out_group + head % in_group + copy;
    return big_head * hs2 + (t / 2) * 2 * r + t % 2;
  };
  const std::size_t q_group = std::max(g, g2);
  const auto scaled = [](float v, double s) { return static_cast<float>(v * s); };

  return [&in, c, d, h, D, Hd, g, q_group, copies, alpha, alpha2, q_scale, source_layer, head_row,
          scaled](
             tensor_kind kind, std::size_t layer, std::span<float> o) {
    if (kind == tensor_kind::token_embedding || kind == tensor_kind::classifier) {
      const bool embedding = kind == tensor_kind::token_embedding;  // else IN's own classifier
      const std::span<const float> w = in.tensor(kind);
      for (std::size_t v = 0; v < c.vocab_size; ++v)
        for (std::size_t k = 0; k < d; ++k)
          o[v * D + k] = embedding ? scaled(w[v * d + k], alpha) : w[v * d + k];
      return;
    }
    if (kind == tensor_kind::rms_final) {
      const std::span<const float> w = in.tensor(kind);
      for (std::size_t k = 0; k < d; ++k)
        o[k] = scaled(w[k], 1.0 / (c.shared_classifier ? alpha2 : alpha));
      return;
    }
    const std::ptrdiff_t src = source_layer.at(layer);
    if (src < 0) {  // identity layer: zero weights, unit norm gains
      if (kind == tensor_kind::rms_att || kind == tensor_kind::rms_ffn)
        std::fill(o.begin(), o.end(), 1.0f);
      return;
    }
    const std::span<const float> w = in.tensor(kind, static_cast<std::size_t>(src));
    switch (kind) {
      case tensor_kind::rms_att:
      case tensor_kind::rms_ffn:
        for (std::size_t k = 0; k < d; ++k) o[k] = scaled(w[k], 1.0 / alpha);
        break;
      case tensor_kind::wq:
        for (std::size_t s = 0; s < d; ++s)
          for (std::size_t k = 0; k < d; ++k)
            o[head_row(s, g, q_group) * D + k] = scaled(w[s * d + k], q_scale);
        break;
      case tensor_kind::wk:
      case tensor_kind::wv:
        for (std::size_t copy = 0; copy < copies; ++copy)
          for (std::size_t s = 0; s < c.kv_dim(); ++s)
            for (std::size_t k = 0; k < d; ++k)
              o[head_row(s, 1, copies, copy) * D + k] = w[s * d + k];
        break;
      case tensor_kind::wo:
        for (std::size_t i = 0; i < d; ++i)
          for (std::size_t s = 0; s < d; ++s)
            o[i * D + head_row(s, g, q_group)] = scaled(w[i * d + s], alpha);
        break;
      case tensor_kind::w1:
      case tensor_kind::w3:
        for (std::size_t j = 0; j < h; ++j)
          for (std::size_t k = 0; k < d; ++k) o[j * D + k] = w[j * d + k];
        break;
      case tensor_kind::w2:
        for (std::size_t i = 0; i < d; ++i)
          for (std::size_t j = 0; j < h; ++j) o[i * Hd + j] = scaled(w[i * h + j], alpha);
        break;
      default:
        throw std::logic_error(std::string("llama2c::reshape_source: unexpected tensor"));
    }
  };
}

/**
 * Writes OUT = a checkpoint of `options`' shape computing IN's function (see the header comment).
 * Throws std::invalid_argument for a shape that cannot hold IN or OUT naming IN's file, and
 * std::runtime_error for a missing, truncated or corrupted IN or an OUT that cannot be written;
 * OUT is then untouched (never a partial file). Memory: IN plus one block of OUT.
 */
inline reshape_result reshape_checkpoint(const std::filesystem::path& in_path,
                                         const std::filesystem::path& out_path,
                                         const reshape_options& options) {
  const auto started = std::chrono::steady_clock::now();
  detail::check_distinct(in_path, out_path, "reshape_checkpoint");
  const weights in(in_path);
  reshape_result result;
  result.shape = reshaped_config(in.cfg(), options);
  result.bytes = detail::checkpoint_bytes(out_path, result.shape);
  for (std::size_t i = 0; i < in.cfg().n_layers; ++i)
    result.real_layers.push_back(reshaped_layer(i, in.cfg().n_layers, result.shape.n_layers));
  write_checkpoint(out_path, result.shape, reshape_source(in, result.shape));
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

/**
 * Writes OUT = the first `layers` layers of IN with IN's final norm and classifier: the same
 * computation as layer_skip_draft(IN, layers), as a separate checkpoint. Throws
 * std::invalid_argument unless 1 <= layers <= IN's n_layers, and the errors of
 * reshape_checkpoint otherwise; OUT is then untouched.
 */
inline reshape_result keep_layers(const std::filesystem::path& in_path,
                                  const std::filesystem::path& out_path, std::size_t layers) {
  const auto started = std::chrono::steady_clock::now();
  detail::check_distinct(in_path, out_path, "keep_layers");
  const weights in(in_path);
  if (layers < 1 || layers > in.cfg().n_layers)
    throw std::invalid_argument(
        "llama2c::keep_layers: layers = " + std::to_string(layers) +
        " outside [1, IN's n_layers = " + std::to_string(in.cfg().n_layers) + "]");
  reshape_result result;
  result.shape = in.cfg();
  result.shape.n_layers = layers;
  result.bytes = detail::checkpoint_bytes(out_path, result.shape);
  for (std::size_t i = 0; i < layers; ++i) result.real_layers.push_back(i);
  write_checkpoint(out_path, result.shape,
                   [&in](tensor_kind kind, std::size_t layer, std::span<float> o) {
                     const std::span<const float> w = in.tensor(kind, layer);
                     std::copy(w.begin(), w.end(), o.begin());
                   });
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace specdec::llama2c
