// specdec/draft/eagle_attention.hpp - the optional attention layer of the EAGLE-style predictor:
// its weights, the rotary positions, the cache of the committed context's keys and values, and
// one query's attention over that context and the drafted path.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/detail/weight_product.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * One causal attention layer over the predictor's inputs u_p = [f_p, e_{p+1}] (feature at
 * position p, embedding of the token after it), added to the MLP's output:
 *
 *     a_h = softmax(R_p(q_h) R(k_h)^T / sqrt(width)) v_h,   q = Wq u_p, k = Wk u, v = Wv u
 *     f_next += Wo [a_1 ... a_H]
 *
 * over the keys of every earlier position of the sequence (the target's true features for the
 * committed context, the predictor's own for the drafted path) and its own. Head h reads columns
 * [h width, (h + 1) width) of q, k and v. With `rope`, R_p turns each head's pair (2i, 2i + 1)
 * by the angle p base^(-2i / width), llama2.c's rotary encoding, so scores depend on relative
 * positions only. `heads == 0` means no layer (the MLP alone).
 */
struct eagle_attention {
  row_matrix wq, wk, wv;  ///< (heads x width) x 2d: columns [0, d) read f, [d, 2d) read e
  row_matrix wo;          ///< d x (heads x width)
  std::size_t heads = 0;  ///< 0: no attention layer
  bool rope = true;
  float rope_base = 10000.0f;

  bool enabled() const noexcept { return heads > 0; }
  /// Width of one head (0 without a layer).
  std::size_t width() const noexcept {
    return heads ? static_cast<std::size_t>(wq.rows()) / heads : 0;
  }
};

/// Throws std::invalid_argument naming the field unless the layer fits hidden width `d` (or is
/// absent: heads == 0 with empty matrices).
inline void check_eagle_attention(const eagle_attention& a, std::size_t d) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("eagle_weights: attention " + what);
  };
  const auto shape = [](const row_matrix& m) {
    return std::to_string(m.rows()) + " x " + std::to_string(m.cols());
  };
  if (!a.enabled()) {
    if (a.wq.size() || a.wk.size() || a.wv.size() || a.wo.size()) fail("has weights but heads = 0");
    return;
  }
  const auto D = static_cast<Eigen::Index>(d), A = a.wq.rows();
  if (A == 0 || A % static_cast<Eigen::Index>(a.heads) != 0)
    fail("wq has " + std::to_string(A) +
         " rows, not a positive multiple of heads = " + std::to_string(a.heads));
  for (const auto* m : {&a.wq, &a.wk, &a.wv})
    if (m->rows() != A || m->cols() != 2 * D)
      fail(std::string(m == &a.wq   ? "wq"
                       : m == &a.wk ? "wk"
                                    : "wv") +
           " is " + shape(*m) + ", expected " + std::to_string(A) +
           " x 2 x hidden width = " + std::to_string(2 * d));
  if (a.wo.rows() != D || a.wo.cols() != A)
    fail("wo is " + shape(a.wo) + ", expected " + std::to_string(d) + " x " + std::to_string(A));
  if (a.rope && a.width() % 2 != 0)
    fail("head width " + std::to_string(a.width()) + " must be even with rotary positions");
  if (!(a.rope_base > 1.0f) || !std::isfinite(a.rope_base))
    fail("rope_base must be finite and greater than 1");
}

namespace detail {

/// Turns each head's pairs of `row` (heads x width entries) by the rotary angles of `position`.
/// O(heads x width).
inline void rotate_heads(float* row, const eagle_attention& a, std::size_t position) {
  if (!a.rope) return;
  const std::size_t w = a.width();
  for (std::size_t i = 0; i < w / 2; ++i) {
    const double angle = static_cast<double>(position) *
                         std::pow(static_cast<double>(a.rope_base),
                                  -2.0 * static_cast<double>(i) / static_cast<double>(w));
    const auto c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    for (std::size_t h = 0; h < a.heads; ++h) {
      float* x = row + h * w + 2 * i;
      const float x0 = x[0], x1 = x[1];
      x[0] = x0 * c - x1 * s;
      x[1] = x0 * s + x1 * c;
    }
  }
}

/**
 * The attention of one (rotated) query row over two sets of (rotated) key and value rows: the
 * context's `ck` / `cv` and the drafted path's rows `path` of `pk` / `pv` (in order, the query's
 * own last). Writes heads x width entries to `out`; `scores` is scratch. O((context + path) x
 * heads x width).
 */
inline void attend(const eagle_attention& a, const float* query,
                   const Eigen::Ref<const row_matrix>& ck, const Eigen::Ref<const row_matrix>& cv,
                   const row_matrix& pk, const row_matrix& pv, std::span<const Eigen::Index> path,
                   std::vector<float>& scores, float* out) {
  const auto w = static_cast<Eigen::Index>(a.width());
  const Eigen::Index c = ck.rows(), n = c + static_cast<Eigen::Index>(path.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(w));
  scores.resize(static_cast<std::size_t>(n));
  Eigen::Map<Eigen::VectorXf> sc(scores.data(), n);
  for (Eigen::Index h = 0; h < static_cast<Eigen::Index>(a.heads); ++h) {
    const Eigen::Map<const Eigen::VectorXf> q(query + h * w, w);
    if (c) sc.head(c).noalias() = ck.middleCols(h * w, w) * q;
    for (std::size_t j = 0; j < path.size(); ++j)
      sc(c + static_cast<Eigen::Index>(j)) = pk.row(path[j]).segment(h * w, w).dot(q.transpose());
    sc *= scale;
    sc = (sc.array() - sc.maxCoeff()).exp();
    sc /= sc.sum();
    Eigen::Map<Eigen::RowVectorXf> o(out + h * w, w);
    if (c)
      o.noalias() = sc.head(c).transpose() * cv.middleCols(h * w, w);
    else
      o.setZero();
    for (std::size_t j = 0; j < path.size(); ++j)
      o += sc(c + static_cast<Eigen::Index>(j)) * pv.row(path[j]).segment(h * w, w);
  }
}

}  // namespace detail

/**
 * The rotated keys and the values of the committed context of one sequence, for the attention
 * layer: row p for position p holds Wk u_p (rotated at p) and Wv u_p with u_p = [s h_p,
 * e(t_{p+1})], h_p the target's hidden row at p, s the predictor's input scale. `sync` brings it
 * to the positions [origin, n) of a source's committed context, computing only the rows it does
 * not hold: a row stays valid while the tokens up to p + 1 are unchanged (a row is computed once,
 * from the hidden row the source held then). Positions without a known hidden row (filled behind
 * the source's back) are skipped: the context then starts after the last of them.
 *
 * Memory: 2 x heads x width floats per position. Not thread-safe.
 */
class eagle_context {
 public:
  /// Forgets every row.
  void clear() noexcept {
    tokens_.clear();
    origin_ = end_ = 0;
  }

  /// Room for n positions (keys, values, tokens): a context growing to n allocates nothing.
  void reserve(std::size_t n, const eagle_attention& a) {
    tokens_.reserve(n + 1);
    const auto rows = static_cast<Eigen::Index>(n);
    if (keys_.rows() < rows) {
      keys_.conservativeResize(rows, a.wq.rows());
      values_.conservativeResize(rows, a.wq.rows());
    }
  }

  /// First and one-past-last position held.
  std::size_t origin() const noexcept { return origin_; }
  std::size_t end() const noexcept { return end_; }

  /// The rows of positions [origin(), end()).
  Eigen::Ref<const row_matrix> keys() const {
    return keys_.topRows(static_cast<Eigen::Index>(end_ - origin_));
  }
  Eigen::Ref<const row_matrix> values() const {
    return values_.topRows(static_cast<Eigen::Index>(end_ - origin_));
  }

  /**
   * Holds positions [origin, n) of `source`'s committed context (n <= source.size() - 1: the
   * token after each position must be committed). `embedding` is the target's (V x d).
   * Throws std::invalid_argument naming `who` and the position for a hidden row with NaN or
   * infinity (the rows before it stay held). O(new rows x 2d x heads x width).
   */
  template <class Source>
  void sync(const Source& source, std::size_t n, const eagle_attention& a, float input_scale,
            const Eigen::Ref<const row_matrix>& embedding, const char* who) {
    const std::span<const token_id> held = source.tokens();
    n = std::min(n, held.empty() ? 0 : held.size() - 1);
    // A row stays valid while the tokens up to p + 1 are the same.
    const auto common = static_cast<std::size_t>(
        std::mismatch(tokens_.begin(), tokens_.end(), held.begin(), held.end()).first -
        tokens_.begin());
    end_ = std::min({end_, n, common > 0 ? common - 1 : 0});
    if (end_ <= origin_ || source.hidden(origin_).empty()) origin_ = end_ = 0;  // start again
    tokens_.resize(end_ > 0 ? end_ + 1 : 0);  // the tokens of the rows kept, equal to held's
    const auto D = static_cast<Eigen::Index>(source.hidden_size());
    const auto fresh = static_cast<Eigen::Index>(n > end_ ? n - end_ : 0);
    if (u_.rows() < fresh || u_.cols() != 2 * D) u_.resize(fresh, 2 * D);  // grows only
    Eigen::Index made = 0;
    for (std::size_t p = end_; p < n; ++p) {
      const std::span<const float> h = source.hidden(p);
      if (h.empty()) {  // unknown: the context restarts after it
        origin_ = end_ = p + 1;
        made = 0;
        continue;
      }
      for (float x : h)
        if (!std::isfinite(x)) {
          store(a, made, held);  // keep the rows before the bad one
          throw std::invalid_argument(std::string(who) + ": the target's hidden row at position " +
                                      std::to_string(p) + " is not finite (NaN or inf)");
        }
      u_.row(made).head(D) = Eigen::Map<const prob_row>(h.data(), D) * input_scale;
      u_.row(made).tail(D) = embedding.row(held[p + 1]);
      ++made;
    }
    store(a, made, held);
  }

 private:
  // Appends rows [0, made) of u_ as positions end_ .. end_ + made - 1, and records the tokens
  // the held rows were computed from (u_ has at least `made` rows; it only grows, so a
  // proposal allocates nothing once the largest verification has been seen).
  void store(const eagle_attention& a, Eigen::Index made, std::span<const token_id> held) {
    const auto at = static_cast<Eigen::Index>(end_ - origin_), A = a.wq.rows();
    if (made > 0) {
      if (keys_.rows() < at + made) {
        const Eigen::Index rows = std::max(at + made, 2 * keys_.rows());
        keys_.conservativeResize(rows, A);
        values_.conservativeResize(rows, A);
      }
      detail::times_weights(u_.topRows(made), a.wk, keys_.middleRows(at, made));
      detail::times_weights(u_.topRows(made), a.wv, values_.middleRows(at, made));
      for (Eigen::Index r = 0; r < made; ++r)
        detail::rotate_heads(keys_.row(at + r).data(), a, end_ + static_cast<std::size_t>(r));
      end_ += static_cast<std::size_t>(made);
    }
    const std::size_t covered = end_ > 0 ? std::min(held.size(), end_ + 1) : 0;
    if (tokens_.size() < covered)  // only the new ones: the kept prefix already equals held's
      tokens_.insert(tokens_.end(), held.begin() + static_cast<std::ptrdiff_t>(tokens_.size()),
                     held.begin() + static_cast<std::ptrdiff_t>(covered));
  }

  std::vector<token_id> tokens_;  // the committed tokens the rows were computed from
  std::size_t origin_ = 0, end_ = 0;
  row_matrix keys_, values_, u_;
};

}  // namespace specdec
