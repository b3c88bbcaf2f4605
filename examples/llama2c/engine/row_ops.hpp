// llama2c/engine/row_ops.hpp - the row-wise steps of a layer that both engines run (model.hpp on one
// sequence, batch_model.hpp on a ragged batch): run.c's rmsnorm, RoPE from a table of angles
// computed once, and the SwiGLU gate of the FFN. One definition, so that a row computes the same
// bits in either engine.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstddef>
#include <span>

#include <specdec/types.hpp>

namespace specdec::llama2c {

/// out.row(i) = x.row(i) / sqrt(mean(x.row(i)^2) + 1e-5) * gain for every row of x (run.c's
/// rmsnorm). O(rows x cols).
template <class Gain>
void rmsnorm(const Eigen::Ref<const row_matrix>& x, const Gain& gain, Eigen::Ref<row_matrix> out) {
  const float inv_dim = 1.0f / static_cast<float>(x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const float scale = 1.0f / std::sqrt(x.row(i).squaredNorm() * inv_dim + 1e-5f);
    out.row(i) = (x.row(i) * scale).cwiseProduct(gain);
  }
}

/// h1 = SiLU(h1) * h3, elementwise (the FFN's gate, run.c's SwiGLU). Takes the blocks as the
/// caller has them, so the vectorised exp sees the caller's layout.
template <class H1, class H3>
void swiglu(H1&& h1, const H3& h3) {
  h1 = (h1.array() / (1.0f + (-h1.array()).exp())) * h3.array();
}

/// RoPE angles of positions [0, positions): cos and sin of pos / 10000^(2j / head_size), in
/// float as run.c computes them, for j < head_size / 2. Built once per engine.
class rope_table {
 public:
  rope_table() = default;
  rope_table(std::size_t positions, std::size_t head_size) : head_size_(head_size) {
    const std::size_t half = head_size / 2;
    cos_.resize(static_cast<Eigen::Index>(positions), static_cast<Eigen::Index>(half));
    sin_.resize(static_cast<Eigen::Index>(positions), static_cast<Eigen::Index>(half));
    for (std::size_t j = 0; j < half; ++j) {
      const float inv = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) /
                                                      static_cast<float>(head_size));
      for (std::size_t pos = 0; pos < positions; ++pos) {
        const float angle = static_cast<float>(pos) * inv;
        cos_(static_cast<Eigen::Index>(pos), static_cast<Eigen::Index>(j)) = std::cos(angle);
        sin_(static_cast<Eigen::Index>(pos), static_cast<Eigen::Index>(j)) = std::sin(angle);
      }
    }
  }

  /// Rotates the `heads` heads of row i of m (i < positions.size()) by the angles of position
  /// positions[i]. O(rows x heads x head_size).
  template <class Rows>
  void rotate(Rows&& m, std::span<const std::size_t> positions, std::size_t heads) const {
    const std::size_t hs = head_size_;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      float* row = m.row(static_cast<Eigen::Index>(i)).data();
      const auto pos = static_cast<Eigen::Index>(positions[i]);
      const float* c = cos_.row(pos).data();
      const float* s = sin_.row(pos).data();
      for (std::size_t h = 0; h < heads; ++h) {
        float* v = row + h * hs;
        for (std::size_t j = 0; j < hs / 2; ++j) {
          const float v0 = v[2 * j], v1 = v[2 * j + 1];
          v[2 * j] = v0 * c[j] - v1 * s[j];
          v[2 * j + 1] = v0 * s[j] + v1 * c[j];
        }
      }
    }
  }

 private:
  std::size_t head_size_ = 0;
  row_matrix cos_, sin_;  // positions x head_size / 2
};

}  // namespace specdec::llama2c
