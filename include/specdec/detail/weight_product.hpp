// specdec/detail/weight_product.hpp - a few activation rows times a weight matrix stored as rows
// of outputs (y = x W^T), each weight row read from memory once for all the rows: the product a
// draft-head step makes for the nodes of one tree level.
#pragma once

#include <Eigen/Core>
#include <algorithm>

#include "specdec/draft/draft_threads.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

namespace weight_product {

using packet = Eigen::internal::packet_traits<float>::type;
inline constexpr Eigen::Index packet_size = Eigen::internal::packet_traits<float>::size;
inline constexpr int tile_outputs = 2;  // weight rows per tile
inline constexpr int max_tile_rows = 4;  // x rows per tile: 4 x 2 accumulators fit 16 registers
// Past this many rows Eigen's general product, whose packing of w is then amortized, is faster
// (an EAGLE layer of width 1024 at d = 768, on a 2-core AVX2 host: the tiles 10% faster at 64
// rows, Eigen 1.2 times faster at 128).
inline constexpr Eigen::Index max_rows = 64;
// A product split over draft_threads: at least this many weights (256 KiB, about 3 us on one
// thread), in chunks of whole 64-byte lines of y. With the pool's threads awake the split paid
// from 32K weights up on the 2-core results host (1.4-2x, best of 400 calls); a pool that has
// gone to sleep costs 0.1-0.2 ms to wake there, so the smallest products stay on the caller.
inline constexpr Eigen::Index min_split_weights = 64 * 1024;
inline constexpr Eigen::Index split_align = 16;

// y[r][o] (+)= dot(x row r, w row o) for R rows of x and O rows of w.
template <int R, int O>
inline void tile(const float* x, Eigen::Index ldx, const float* w, Eigen::Index ldw,
                 Eigen::Index in, float* y, Eigen::Index ldy, bool accumulate) {
  using namespace Eigen::internal;
  packet acc[R][O];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) acc[r][o] = pset1<packet>(0.0f);
  const Eigen::Index whole = in / packet_size * packet_size;
  for (Eigen::Index k = 0; k < whole; k += packet_size) {
    packet wp[O];
    for (int o = 0; o < O; ++o) wp[o] = ploadu<packet>(w + o * ldw + k);
    for (int r = 0; r < R; ++r) {
      const packet xp = ploadu<packet>(x + r * ldx + k);
      for (int o = 0; o < O; ++o) acc[r][o] = pmadd(xp, wp[o], acc[r][o]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) {
      float s = predux(acc[r][o]);
      for (Eigen::Index k = whole; k < in; ++k) s += x[r * ldx + k] * w[o * ldw + k];
      float& dst = y[r * ldy + o];
      dst = accumulate ? dst + s : s;
    }
}

// tile<R, O> for a run-time R in [1, Max].
template <int Max, int O>
inline void tile_rows(int rows, const float* x, Eigen::Index ldx, const float* w, Eigen::Index ldw,
                      Eigen::Index in, float* y, Eigen::Index ldy, bool accumulate) {
  if constexpr (Max >= 1) {
    if (rows == Max) return tile<Max, O>(x, ldx, w, ldw, in, y, ldy, accumulate);
    tile_rows<Max - 1, O>(rows, x, ldx, w, ldw, in, y, ldy, accumulate);
  }
}

// Every row of x against O weight rows (read from memory by the first tile, from L1 after).
template <int O>
inline void all_rows(const float* x, Eigen::Index ldx, Eigen::Index n, const float* w,
                     Eigen::Index ldw, Eigen::Index in, float* y, Eigen::Index ldy,
                     bool accumulate) {
  for (Eigen::Index r = 0; r < n; r += max_tile_rows) {
    const int rows = static_cast<int>(std::min<Eigen::Index>(max_tile_rows, n - r));
    tile_rows<max_tile_rows, O>(rows, x + r * ldx, ldx, w, ldw, in, y + r * ldy, ldy, accumulate);
  }
}

}  // namespace weight_product

/**
 * y (n x out) = x (n x in) * w^T, or y += x * w^T with `accumulate`, for w row-major (out x in:
 * one output's weights contiguous). One row goes to Eigen's matrix-vector product, more than
 * weight_product::max_rows to its general product. Two rows and up to max_rows go two weight
 * rows at a time, each pair multiplied with every row of x (tiles of up to 4 rows) while it
 * sits in L1, so the weights stream from memory once. Eigen's general product would pack the
 * whole of w first, on every call: for 2 rows of an EAGLE layer of width 1024 at d = 768 it
 * took 3.7 ms at best on a 2-core AVX2 host, 16 times the one-row product (these tiles: 0.46
 * ms). Shapes must agree (eigen_assert, in debug builds); allocates nothing.
 */
inline void times_weights(const Eigen::Ref<const row_matrix>& x,
                          const Eigen::Ref<const row_matrix>& w, Eigen::Ref<row_matrix> y,
                          bool accumulate = false) {
  using namespace weight_product;
  const Eigen::Index n = x.rows(), out = w.rows(), in = w.cols();
  eigen_assert(x.cols() == in && y.rows() == n && y.cols() == out);
  if (n == 0 || out == 0) return;
  if (n == 1 || n > max_rows) {
    if (accumulate)
      y.noalias() += x * w.transpose();
    else
      y.noalias() = x * w.transpose();
    return;
  }
  const Eigen::Index ldx = x.outerStride(), ldw = w.outerStride(), ldy = y.outerStride();
  Eigen::Index o = 0;
  for (; o + tile_outputs <= out; o += tile_outputs)
    all_rows<tile_outputs>(x.data(), ldx, n, w.data() + o * ldw, ldw, in, y.data() + o, ldy,
                           accumulate);
  for (; o < out; ++o)
    all_rows<1>(x.data(), ldx, n, w.data() + o * ldw, ldw, in, y.data() + o, ldy, accumulate);
}

/**
 * times_weights with the weight rows (y's columns) split into threads.threads chunks of whole
 * 64-byte lines of y, run by `threads` (draft_threads); each chunk is times_weights of a block
 * of w's rows, which computes every output exactly as the unsplit call does, so y does not
 * depend on the split. Without threads, or for fewer than weight_product::min_split_weights
 * weights, the calling thread does it all. Allocates nothing.
 */
inline void times_weights(const Eigen::Ref<const row_matrix>& x,
                          const Eigen::Ref<const row_matrix>& w, Eigen::Ref<row_matrix> y,
                          bool accumulate, const draft_threads& threads) {
  using namespace weight_product;
  const Eigen::Index out = w.rows();
  if (!threads.enabled() || w.size() < min_split_weights || out < 2 * split_align)
    return times_weights(x, w, y, accumulate);
  const auto parts = static_cast<Eigen::Index>(threads.threads);
  const Eigen::Index per_part = (out + parts - 1) / parts;
  const Eigen::Index chunk = (per_part + split_align - 1) / split_align * split_align;
  struct job {
    const Eigen::Ref<const row_matrix>& x;
    const Eigen::Ref<const row_matrix>& w;
    Eigen::Ref<row_matrix>& y;
    bool accumulate;
    Eigen::Index chunk;
  } j{x, w, y, accumulate, chunk};
  threads.run(threads.context, static_cast<std::size_t>((out + chunk - 1) / chunk),
              [](void* context, std::size_t i) {
                const job& c = *static_cast<const job*>(context);
                const Eigen::Index begin = static_cast<Eigen::Index>(i) * c.chunk;
                const Eigen::Index len = std::min(c.chunk, c.w.rows() - begin);
                times_weights(c.x, c.w.middleRows(begin, len), c.y.middleCols(begin, len),
                              c.accumulate);
              },
              &j);
}

}  // namespace specdec::detail
