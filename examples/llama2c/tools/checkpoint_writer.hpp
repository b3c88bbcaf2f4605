// llama2c/tools/checkpoint_writer.hpp - writes a llama2.c checkpoint, tensor by tensor, in the order
// that checkpoint.hpp's file_layout() gives, and never leaves a partial file under its name.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "llama2c/engine/checkpoint.hpp"

namespace specdec::llama2c {

/// Fills `out` (rows x cols floats of the file's layout) with tensor `kind` of layer `layer`.
/// Never asked for freq_cis_real / freq_cis_imag: the writer computes RoPE's tables itself.
using tensor_source =
    std::function<void(tensor_kind kind, std::size_t layer, std::span<float> out)>;

namespace detail {

[[noreturn]] inline void writer_error(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error("llama2c checkpoint writer '" + path.string() + "': " + what);
}

/// llama2.c's RoPE tables (seq_len x head_size / 2): cos or sin of pos / 10000^(2j / head_size).
inline void rope_table(const config& c, bool sines, std::span<float> out) {
  const std::size_t hs = c.head_size(), half = hs / 2;
  for (std::size_t pos = 0; pos < c.seq_len; ++pos)
    for (std::size_t j = 0; j < half; ++j) {
      const float freq =
          1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(hs));
      const float angle = static_cast<float>(pos) * freq;
      out[pos * half + j] = sines ? std::sin(angle) : std::cos(angle);
    }
}

}  // namespace detail

/**
 * Writes a checkpoint of configuration `c` to `path`: the header, then every tensor of
 * file_layout(c), each layer's block filled by `source`. The bytes go to a temporary file in
 * the same folder, renamed onto `path` only once complete, so `path` is never a partial file; on
 * any error the temporary file is removed and std::runtime_error names `path` and the cause.
 * Memory: one buffer of the largest tensor block.
 */
inline void write_checkpoint(const std::filesystem::path& path, const config& c,
                             const tensor_source& source) {
  namespace fs = std::filesystem;
  if (c.dim == 0 || c.hidden_dim == 0 || c.n_layers == 0 || c.n_heads == 0 || c.n_kv_heads == 0 ||
      c.vocab_size == 0 || c.seq_len == 0 || c.dim % c.n_heads != 0 ||
      c.n_heads % c.n_kv_heads != 0 || c.head_size() % 2 != 0)
    detail::writer_error(path,
                         "invalid configuration (every field positive, dim a multiple of "
                         "n_heads, n_heads of n_kv_heads, an even head size)");
  constexpr std::size_t int32_max = 2147483647;
  for (std::size_t v :
       {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len})
    if (v > int32_max) detail::writer_error(path, "a header field exceeds 2^31 - 1");

  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    detail::writer_error(path, "folder '" + dir.string() + "' does not exist");
  // Appended piece by piece: GCC 12 reports a false -Wrestrict for "." + std::string&&.
  std::string tmp_name(".");
  tmp_name += path.filename().string();
  tmp_name += ".partial-";
  tmp_name += std::to_string(::getpid());
  const fs::path tmp = dir / tmp_name;
  std::FILE* raw = std::fopen(tmp.c_str(), "wb");
  if (raw == nullptr)
    detail::writer_error(path, "cannot create '" + tmp.string() + "': " +
                                   std::error_code(errno, std::generic_category()).message());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(raw, &std::fclose);
  try {
    const auto put = [&](const void* data, std::size_t bytes) {
      if (bytes != 0 && std::fwrite(data, 1, bytes, out.get()) != bytes)
        detail::writer_error(
            path, "write failed: " + std::error_code(errno, std::generic_category()).message());
    };
    const auto header = detail::header_fields(c);
    put(header.data(), sizeof(header));
    std::vector<float> block;
    for (const tensor_info& t : file_layout(c)) {
      block.assign(static_cast<std::size_t>(t.block()), 0.0f);
      for (std::size_t l = 0; l < t.layers; ++l) {
        if (t.kind == tensor_kind::freq_cis_real || t.kind == tensor_kind::freq_cis_imag) {
          detail::rope_table(c, t.kind == tensor_kind::freq_cis_imag, block);
        } else {
          std::fill(block.begin(), block.end(), 0.0f);
          source(t.kind, l, block);
        }
        put(block.data(), block.size() * sizeof(float));
      }
    }
    if (std::fflush(out.get()) != 0 || ::fsync(::fileno(out.get())) != 0)
      detail::writer_error(
          path, "flush failed: " + std::error_code(errno, std::generic_category()).message());
    std::FILE* f = out.release();
    if (std::fclose(f) != 0) detail::writer_error(path, "close failed");
    fs::rename(tmp, path, ec);
    if (ec)
      detail::writer_error(path, "cannot rename the finished file into place: " + ec.message());
  } catch (...) {
    if (out) out.reset();
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace specdec::llama2c
