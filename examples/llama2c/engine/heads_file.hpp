// llama2c/engine/heads_file.hpp - the file format of trained draft heads (Medusa or EAGLE-style), its
// writer and its loader, which checks every size against the file and against the target, and
// widens heads trained on a model for a target reshaped from it (reshape.hpp).
//
// Format (little-endian; docs/llama2c.md "Heads files"):
//   char[8]  magic "SDHEADS1"
//   u32 version (2; 1 is read too), kind (1 = medusa, 2 = eagle), hidden d, vocab V,
//       heads H (eagle: 1), inner m (eagle: the MLP's width; medusa: 0), own_classifier
//       (medusa: 0 or 1; eagle: 0), accuracy rows A, accuracy cols R, training tokens
//   f32 training seconds
//   version 2 only: u32 attention heads Ha (eagle: 0 = none; medusa: 0), attention width w
//       (0 when Ha = 0), rotary (0 or 1; 0 when Ha = 0; rotary base 10000)
//   f32 accuracy[A x R]   medusa: head k's rank-r accuracy; eagle: row 0 = top-1 by depth
//   medusa, per head: f32 w[d x d], b[d], (own_classifier) classifier[V x d]
//   eagle:            f32 w1[m x 2d], b1[m], w2[d x m], b2[d],
//                     (Ha > 0) wq[Ha w x 2d], wk[Ha w x 2d], wv[Ha w x 2d], wo[d x Ha w]
// Nothing may follow. Every float must be finite.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/draft/eagle_head.hpp>
#include <specdec/draft/medusa_heads.hpp>

#include "llama2c/engine/checkpoint.hpp"

namespace specdec::llama2c {

/// Which drafter a heads file holds.
enum class heads_kind : std::uint32_t { medusa = 1, eagle = 2 };

/// The file's contents, as trained (before fitting to a target).
struct heads_record {
  heads_kind kind = heads_kind::medusa;
  std::size_t hidden = 0, vocab = 0;
  row_matrix accuracy;        ///< see the format comment
  std::uint32_t train_tokens = 0;
  float train_seconds = 0.0f;
  medusa_weights medusa;      ///< kind == medusa
  eagle_weights eagle;        ///< kind == eagle
};

inline constexpr char heads_magic[8] = {'S', 'D', 'H', 'E', 'A', 'D', 'S', '1'};
inline constexpr std::uint32_t heads_version = 2;
/// Bounds the loader enforces before allocating anything.
inline constexpr std::size_t max_heads_width = 65536, max_heads_vocab = 1 << 20,
                             max_heads_count = 64, max_heads_accuracy = 4096;

namespace detail {
struct heads_writer {
  std::vector<char> bytes;
  void u32(std::uint32_t v) { raw(&v, 4); }
  void f32(float v) { raw(&v, 4); }
  void raw(const void* p, std::size_t n) {
    const auto* c = static_cast<const char*>(p);
    bytes.insert(bytes.end(), c, c + n);
  }
  template <class M>
  void matrix(const M& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) f32(m(i, j));
  }
};

struct heads_reader {
  std::span<const char> bytes;
  std::size_t at = 0;
  std::string name;
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("heads file '" + name + "': " + why);
  }
  std::uint32_t u32() {
    std::uint32_t v;
    take(&v, 4);
    return v;
  }
  float f32() {
    float v;
    take(&v, 4);
    return v;
  }
  void take(void* out, std::size_t n) {
    if (n == 0) return;  // an empty matrix has no storage (memcpy must not see a null pointer)
    if (bytes.size() - at < n) fail("truncated at byte " + std::to_string(at));
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  }
  void matrix(row_matrix& m, std::size_t rows, std::size_t cols, const char* what) {
    m.resize(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
    take(m.data(), rows * cols * sizeof(float));
    if (!m.allFinite()) fail(std::string(what) + " holds NaN or infinity");
  }
  void vector(prob_row& v, std::size_t n, const char* what) {
    v.resize(static_cast<Eigen::Index>(n));
    take(v.data(), n * sizeof(float));
    if (!v.allFinite()) fail(std::string(what) + " holds NaN or infinity");
  }
};
}  // namespace detail

/// The file's bytes for `r` (its weights at their own width).
inline std::vector<char> heads_bytes(const heads_record& r) {
  detail::heads_writer w;
  w.raw(heads_magic, 8);
  const bool medusa = r.kind == heads_kind::medusa;
  const bool own = medusa && !r.medusa.heads.empty() && r.medusa.heads[0].classifier.size() != 0;
  w.u32(heads_version);
  w.u32(static_cast<std::uint32_t>(r.kind));
  w.u32(static_cast<std::uint32_t>(r.hidden));
  w.u32(static_cast<std::uint32_t>(r.vocab));
  w.u32(medusa ? static_cast<std::uint32_t>(r.medusa.heads.size()) : 1u);
  w.u32(medusa ? 0u : static_cast<std::uint32_t>(r.eagle.inner()));
  w.u32(own ? 1u : 0u);
  w.u32(static_cast<std::uint32_t>(r.accuracy.rows()));
  w.u32(static_cast<std::uint32_t>(r.accuracy.cols()));
  w.u32(r.train_tokens);
  w.f32(r.train_seconds);
  const eagle_attention& a = r.eagle.attention;
  const bool attention = !medusa && a.enabled();
  w.u32(attention ? static_cast<std::uint32_t>(a.heads) : 0u);
  w.u32(attention ? static_cast<std::uint32_t>(a.width()) : 0u);
  w.u32(attention && a.rope ? 1u : 0u);
  w.matrix(r.accuracy);
  if (medusa) {
    for (const medusa_head& h : r.medusa.heads) {
      w.matrix(h.w);
      w.matrix(h.b);
      if (own) w.matrix(h.classifier);
    }
  } else {
    w.matrix(r.eagle.w1);
    w.matrix(r.eagle.b1);
    w.matrix(r.eagle.w2);
    w.matrix(r.eagle.b2);
    if (attention)
      for (const row_matrix* m : {&a.wq, &a.wk, &a.wv, &a.wo}) w.matrix(*m);
  }
  return w.bytes;
}

/// Writes `r` to `path` (std::runtime_error when it cannot).
inline void save_heads(const std::filesystem::path& path, const heads_record& r) {
  const auto bytes = heads_bytes(r);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("heads file '" + path.string() + "': cannot be written");
}

/**
 * Parses a heads file's bytes. std::runtime_error naming `name` and what is wrong: the magic,
 * the version, the kind, a size out of bounds or inconsistent with the kind, a file shorter or
 * longer than its sizes say, a weight that is NaN or infinite. Allocates only after the sizes
 * have been checked against the file's length.
 */
inline heads_record parse_heads(std::span<const char> bytes, const std::string& name) {
  detail::heads_reader in{bytes, 0, name};
  char magic[8];
  if (bytes.size() < 8 || std::memcmp(bytes.data(), heads_magic, 8) != 0)
    in.fail("not a heads file (the magic \"SDHEADS1\" is missing)");
  in.take(magic, 8);
  const std::uint32_t version = in.u32();
  if (version != 1 && version != heads_version)
    in.fail("version " + std::to_string(version) + ", this loader reads versions 1 and " +
            std::to_string(heads_version));
  heads_record r;
  const std::uint32_t kind = in.u32();
  if (kind != 1 && kind != 2) in.fail("kind " + std::to_string(kind) + " is not 1 (medusa) or 2 (eagle)");
  r.kind = static_cast<heads_kind>(kind);
  const std::size_t d = in.u32(), v = in.u32(), heads = in.u32(), inner = in.u32(),
                    own = in.u32(), arows = in.u32(), acols = in.u32();
  r.train_tokens = in.u32();
  r.train_seconds = in.f32();
  const std::size_t attn_heads = version >= 2 ? in.u32() : 0,
                    attn_width = version >= 2 ? in.u32() : 0, rope = version >= 2 ? in.u32() : 0;
  const auto bound = [&](std::size_t value, std::size_t lo, std::size_t hi, const char* field) {
    if (value < lo || value > hi)
      in.fail(std::string(field) + " = " + std::to_string(value) + " outside [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  bound(d, 1, max_heads_width, "hidden");
  bound(v, 1, max_heads_vocab, "vocab");
  bound(arows, 0, max_heads_accuracy, "accuracy rows");
  bound(acols, 0, max_heads_accuracy, "accuracy cols");
  bound(own, 0, 1, "own_classifier");
  bound(attn_heads, 0, max_heads_count, "attention heads");
  bound(rope, 0, 1, "rotary");
  if (attn_heads == 0 && (attn_width != 0 || rope != 0))
    in.fail("attention width and rotary must be 0 without attention heads");
  if (attn_heads > 0) {
    bound(attn_width, 1, max_heads_width, "attention width");
    if (rope && attn_width % 2 != 0)
      in.fail("attention width = " + std::to_string(attn_width) + " must be even with rotary");
  }
  const bool medusa = r.kind == heads_kind::medusa;
  if (medusa) {
    bound(heads, 1, max_heads_count, "heads");
    if (inner != 0) in.fail("inner = " + std::to_string(inner) + " must be 0 for medusa heads");
    if (attn_heads != 0) in.fail("attention heads must be 0 for medusa heads");
  } else {
    if (heads != 1) in.fail("heads = " + std::to_string(heads) + " must be 1 for eagle");
    bound(inner, 1, max_heads_width, "inner");
    if (own != 0) in.fail("own_classifier must be 0 for eagle");
  }
  if (arows != 0 && arows != (medusa ? heads : 1))
    in.fail("accuracy rows = " + std::to_string(arows) + " must be 0 or " +
            (medusa ? "one per head (" + std::to_string(heads) + ")" : std::string("1")));
  // Floats the sizes announce (all factors < 2^23, so no product overflows 64 bits).
  const std::uint64_t D = d, V = v, M = inner, Aw = std::uint64_t{attn_heads} * attn_width;
  const std::uint64_t floats =
      std::uint64_t{arows} * acols +
      (medusa ? heads * (D * D + D + (own ? V * D : 0))
              : M * 2 * D + M + D * M + D + Aw * (3 * 2 * D + D));
  const std::uint64_t expected = in.at + floats * sizeof(float);
  if (expected != bytes.size())
    in.fail("the sizes in its header (hidden " + std::to_string(d) + ", vocab " +
            std::to_string(v) + ", heads " + std::to_string(heads) + ", inner " +
            std::to_string(inner) +
            (attn_heads ? ", attention " + std::to_string(attn_heads) + " x " +
                              std::to_string(attn_width)
                        : std::string()) +
            ") need " + std::to_string(expected) + " bytes, the file has " +
            std::to_string(bytes.size()) + (bytes.size() < expected ? " (truncated)" : ""));
  r.hidden = d;
  r.vocab = v;
  in.matrix(r.accuracy, arows, acols, "the accuracy table");
  if (medusa) {
    r.medusa.heads.resize(heads);
    for (medusa_head& h : r.medusa.heads) {
      in.matrix(h.w, d, d, "a head's w");
      in.vector(h.b, d, "a head's b");
      if (own) in.matrix(h.classifier, v, d, "a head's classifier");
    }
    r.medusa.rank_accuracy = r.accuracy;
  } else {
    in.matrix(r.eagle.w1, inner, 2 * d, "w1");
    in.vector(r.eagle.b1, inner, "b1");
    in.matrix(r.eagle.w2, d, inner, "w2");
    in.vector(r.eagle.b2, d, "b2");
    eagle_attention& a = r.eagle.attention;
    a.heads = attn_heads;
    a.rope = rope == 1;
    if (attn_heads > 0) {
      in.matrix(a.wq, Aw, 2 * d, "wq");
      in.matrix(a.wk, Aw, 2 * d, "wk");
      in.matrix(a.wv, Aw, 2 * d, "wv");
      in.matrix(a.wo, d, Aw, "wo");
    }
    for (Eigen::Index j = 0; r.accuracy.rows() > 0 && j < r.accuracy.cols(); ++j)
      r.eagle.depth_accuracy.push_back(r.accuracy(0, j));
  }
  return r;
}

/// Reads and parses a heads file (std::runtime_error when it cannot be read or is refused).
inline heads_record read_heads(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("heads file '" + path.string() + "': cannot be read");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  return parse_heads(bytes, path.string());
}

/**
 * Fits heads to a target: the same width and vocabulary, or a target reshaped from the model the
 * heads were trained on (width D > d; reshape.hpp): its hidden state is [h, 0] / sqrt(D / d) with
 * a shared classifier ([h, 0] otherwise) and its embedding sqrt(D / d) [e, 0], so the weights are
 * padded with zeros, the EAGLE embedding columns divided by sqrt(D / d) and input_scale set to
 * undo the hidden state's factor; the heads then compute the same function. std::runtime_error
 * naming both values for another vocabulary or a narrower target.
 */
inline void fit_heads(heads_record& r, const config& target, const std::string& name) {
  const auto fail = [&](const std::string& why) {
    throw std::runtime_error("heads file '" + name + "': " + why);
  };
  if (r.vocab != target.vocab_size)
    fail("trained for a vocabulary of " + std::to_string(r.vocab) + " tokens, the model has " +
         std::to_string(target.vocab_size));
  const std::size_t d = r.hidden, D = target.dim;
  if (D < d)
    fail("trained for hidden width " + std::to_string(d) + ", the model's is " +
         std::to_string(D) + " (narrower: heads are widened, never narrowed)");
  if (D == d) return;
  const float alpha = std::sqrt(static_cast<float>(D) / static_cast<float>(d));
  const float scale = target.shared_classifier ? alpha : 1.0f;  // 1 / the hidden state's factor
  const auto Di = static_cast<Eigen::Index>(D), di = static_cast<Eigen::Index>(d);
  const auto pad = [&](const row_matrix& m, Eigen::Index rows, Eigen::Index cols) {
    row_matrix out = row_matrix::Zero(rows, cols);
    out.topLeftCorner(m.rows(), m.cols()) = m;
    return out;
  };
  const auto pad_row = [&](const prob_row& v, Eigen::Index n) {
    prob_row out = prob_row::Zero(n);
    out.head(v.size()) = v;
    return out;
  };
  if (r.kind == heads_kind::medusa) {
    for (medusa_head& h : r.medusa.heads) {
      h.w = pad(h.w, Di, Di);
      h.b = pad_row(h.b, Di);
      if (h.classifier.size() != 0) h.classifier = pad(h.classifier, h.classifier.rows(), Di);
    }
    r.medusa.input_scale *= scale;
  } else {
    eagle_weights& e = r.eagle;
    row_matrix w1 = row_matrix::Zero(e.w1.rows(), 2 * Di);
    w1.leftCols(di) = e.w1.leftCols(di);
    w1.middleCols(Di, di) = e.w1.rightCols(di) / alpha;
    e.w1 = std::move(w1);
    e.w2 = pad(e.w2, Di, e.w2.cols());
    for (row_matrix* m : {&e.attention.wq, &e.attention.wk, &e.attention.wv}) {
      if (m->size() == 0) continue;  // no attention layer
      row_matrix wide = row_matrix::Zero(m->rows(), 2 * Di);  // read [f, e] as w1 does
      wide.leftCols(di) = m->leftCols(di);
      wide.middleCols(Di, di) = m->rightCols(di) / alpha;
      *m = std::move(wide);
    }
    if (e.attention.wo.size() != 0) e.attention.wo = pad(e.attention.wo, Di, e.attention.wo.cols());
    e.b2 = pad_row(e.b2, Di);
    e.input_scale *= scale;
  }
  r.hidden = D;
}

/// One line on what a record holds: kind, sizes, training and its held-out top-1 accuracy.
inline std::string heads_summary(const heads_record& r) {
  const bool medusa = r.kind == heads_kind::medusa;
  std::string s = medusa ? "medusa heads: " + std::to_string(r.medusa.size()) + " heads, " +
                               (r.medusa.heads.at(0).classifier.size() ? "own" : "shared") +
                               " classifiers"
                         : "eagle-style predictor: MLP width " + std::to_string(r.eagle.inner()) +
                               (r.eagle.attention.enabled()
                                    ? ", attention " + std::to_string(r.eagle.attention.heads) +
                                          " heads x " + std::to_string(r.eagle.attention.width()) +
                                          (r.eagle.attention.rope ? " (rotary)" : " (no positions)")
                                    : std::string());
  s += ", hidden " + std::to_string(r.hidden) + "; trained on " + std::to_string(r.train_tokens) +
       " positions in " + std::to_string(static_cast<int>(r.train_seconds)) + " s";
  if (r.accuracy.size()) {
    s += "; held-out top-1 by " + std::string(medusa ? "head" : "depth") + ":";
    for (Eigen::Index k = 0; k < (medusa ? r.accuracy.rows() : r.accuracy.cols()); ++k) {
      char buf[16];
      std::snprintf(buf, sizeof buf, " %.2f", static_cast<double>(medusa ? r.accuracy(k, 0) : r.accuracy(0, k)));
      s += buf;
    }
  }
  return s;
}

}  // namespace specdec::llama2c
