// llama2c/engine/kernels.hpp - the engine's matrix kernel: a batch of activation rows times weight
// matrices in the checkpoint's own layout, each weight read once from memory for the whole
// batch, split over the engine's threads.
//
// The weights W (out x in) are row-major as the file stores them: one output's weights are
// contiguous. Y = X * W^T is computed one block of 4 weight rows at a time (8 for 1-2
// activation rows, 6 for 3-4): the block is streamed from memory once, then every tile of up
// to 6 activation rows is multiplied with it while it sits in L1 (4 rows x 768 floats = 12 KiB; 24
// KiB for the FFN's 2048-wide rows). So the weight bytes read per call do not grow with the batch
// (n = 1 to the largest tree), and a call of n rows costs one weight stream plus n times the
// arithmetic: the memory-bound regime where scoring K + 1 draft tokens costs little more than one.
//
// Inside a tile, R x O accumulators hold packets of partial dot products along `in`, reduced
// once at the end; the inner step loads O weight packets and R activation packets for R * O
// fused multiply-adds (up to 6 x 4 with AVX-512's 32 registers: FMA-bound, not load-bound).
// With 16 registers (AVX2, SSE2) the tiles are 4 x 3, except for 5 or 6 rows: one tile of 6 x 2
// (blocks of 2 weight rows), so the block is read once instead of by two tiles of 3 + 2 or 3 + 3
// rows (measured on a 2-core AVX2 host: t(5) -9 to -17%, t(6) -5 to -10%; 6 x 2 tiles for 7
// rows and more, and 8 x 1 for 7-8, were slower; docs/benchmarks.md).
//
// The split over threads: outputs (rows of W) are cut into chunks of whole blocks, and threads
// take chunks from a shared counter; several matrices with the same input (wq, wk, wv; w1, w3)
// form one job. Small matrices (the 260K model's) run on the calling thread alone.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "llama2c/engine/thread_pool.hpp"

namespace specdec::llama2c {

/// One product of a job: y (n x out, leading dimension ldy) = or += x * W^T, for W (out x in)
/// row-major with leading dimension `in`.
struct matmul_task {
  const float* w = nullptr;
  std::ptrdiff_t out = 0;
  float* y = nullptr;
  std::ptrdiff_t ldy = 0;
  bool add = false;  ///< accumulate into y (the residual) instead of overwriting it
};

namespace detail {

using packet = Eigen::internal::packet_traits<float>::type;
inline constexpr std::ptrdiff_t packet_size = Eigen::internal::packet_traits<float>::size;
// Vector registers: 32 with AVX-512, 16 otherwise (AVX2, SSE2).
inline constexpr int vector_registers = packet_size >= 16 ? 32 : 16;
// Outputs of a block: 4 (3 with 16 registers) when several rows share it; 8 for a single row,
// whose accumulators would otherwise be too few to hide the FMA latency.
inline constexpr int block_outputs = packet_size >= 16 ? 4 : 3;
inline constexpr int single_row_outputs = 8;
// With 16 registers, 5 or 6 rows take blocks of 2 outputs: one tile of up to 6 x 2 (12
// accumulators) reads the block once, where 4 x 3 tiles would read it twice (3 + 2 or 3 + 3 rows).
inline constexpr int narrow_outputs = 2;
// The most rows of a tile of O outputs: as many as the registers hold with their R x O
// accumulators, O weight packets and one activation packet, at most 6 (6 x 4 with AVX-512, 4 x 3
// and 6 x 2 with 16 registers).
template <int O>
inline constexpr int tile_rows_for = std::clamp((vector_registers - O - 1) / O, 1, 6);
static_assert(tile_rows_for<block_outputs> == (packet_size >= 16 ? 6 : 4));

// Tells the compiler that p must live in a register here. Without it GCC folds a load into every
// FMA that uses it (a memory operand per FMA): the same packet loaded O or R times, which made
// the tile load-bound (28 loads for 24 FMAs in a 6 x 4 tile; 10 with it).
template <class P>
inline void keep_in_register(P& p) {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+v"(p));
#else
  (void)p;
#endif
}

inline void prefetch(const float* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 2);  // into L2: the block being computed must stay in L1
#else
  (void)p;
#endif
}

// Which part of the next weight block a tile asks for while it computes: in each of the block's
// O rows, the floats from `offset`, advancing 1 / 2^shift as fast as the tile's own k. The tiles
// of a block split the next block between them (tile t of T starts at t * in / T and covers
// in / 2^floor(log2 T) >= in / T floats), so its bytes are requested evenly over the whole
// block's arithmetic. (When only the first tile asked for all of it, the memory stream idled
// during the other tiles: on one thread of a 2-core AVX2 host, n >= 8 took 4-12% longer;
// docs/benchmarks.md.)
struct prefetch_share {
  std::ptrdiff_t offset = 0;
  int shift = 0;
};

// y[r][o] (+)= dot(x row r, w row o) for R rows and O outputs. With `Prefetch`, also asks for
// the weight rows `ahead` floats further on (the next block), the tile's `share` of them, so
// the memory stream stays busy while the tiles compute.
// Prefetch is a template parameter: a run-time test in the loop made GCC keep the accumulators on
// the stack (every FMA a load and a store).
template <int R, int O, bool Prefetch>
inline void dot_tile(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t in, const float* w,
                     float* y, std::ptrdiff_t ldy, bool add, std::ptrdiff_t ahead,
                     prefetch_share share) {
  using namespace Eigen::internal;
  packet acc[R][O];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) acc[r][o] = pset1<packet>(0.0f);
  const std::ptrdiff_t whole = in / packet_size * packet_size;
  for (std::ptrdiff_t k = 0; k < whole; k += packet_size) {
    packet wp[O];
    for (int o = 0; o < O; ++o) {
      wp[o] = ploadu<packet>(w + o * in + k);
      keep_in_register(wp[o]);
    }
    if constexpr (Prefetch)
      for (int o = 0; o < O; ++o) prefetch(w + ahead + o * in + share.offset + (k >> share.shift));
    for (int r = 0; r < R; ++r) {
      packet xp = ploadu<packet>(x + r * ldx + k);
      keep_in_register(xp);
      for (int o = 0; o < O; ++o) acc[r][o] = pmadd(xp, wp[o], acc[r][o]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) {
      float s = predux(acc[r][o]);
      for (std::ptrdiff_t j = whole; j < in; ++j) s += x[r * ldx + j] * w[o * in + j];
      float& dst = y[r * ldy + o];
      dst = add ? dst + s : s;
    }
}

// dot_tile<R, O> for a runtime R in [1, Max].
template <int Max, int O>
inline void tile_rows(int rows, const float* x, std::ptrdiff_t ldx, std::ptrdiff_t in,
                      const float* w, float* y, std::ptrdiff_t ldy, bool add, std::ptrdiff_t ahead,
                      prefetch_share share) {
  if constexpr (Max >= 1) {
    if (rows == Max) {
      if (ahead != 0) return dot_tile<Max, O, true>(x, ldx, in, w, y, ldy, add, ahead, share);
      return dot_tile<Max, O, false>(x, ldx, in, w, y, ldy, add, 0, share);
    }
    tile_rows<Max - 1, O>(rows, x, ldx, in, w, y, ldy, add, ahead, share);
  }
}

// Every row of x against one block of O weight rows: the block is read from memory by the first
// tile and from L1 by the others. The rows are cut into tiles of nearly equal size (n = 7: 4 + 3,
// not 6 + 1), since a one-row tile costs almost as many cycles as a full one.
template <int O>
inline void block_all_rows(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n, std::ptrdiff_t in,
                           const float* w, float* y, std::ptrdiff_t ldy, bool add,
                           std::ptrdiff_t ahead) {
  constexpr int max_rows = tile_rows_for<O>;
  const std::ptrdiff_t tiles = (n + max_rows - 1) / max_rows;
  const int shift = std::bit_width(static_cast<std::size_t>(tiles)) - 1;  // floor(log2 tiles)
  std::ptrdiff_t r = 0;
  for (std::ptrdiff_t t = 0; t < tiles; ++t) {
    const auto rows = static_cast<int>((n - r) / (tiles - t));
    tile_rows<max_rows, O>(rows, x + r * ldx, ldx, in, w, y + r * ldy, ldy, add, ahead,
                           prefetch_share{in * t / tiles, shift});
    r += rows;
  }
}

// block_all_rows<O> for a runtime O in [1, Max]: the outputs left after the whole blocks.
template <int Max>
inline void remainder_block(std::ptrdiff_t outputs, const float* x, std::ptrdiff_t ldx,
                            std::ptrdiff_t n, std::ptrdiff_t in, const float* w, float* y,
                            std::ptrdiff_t ldy, bool add) {
  if constexpr (Max >= 1) {
    if (outputs == Max) return block_all_rows<Max>(x, ldx, n, in, w, y, ldy, add, 0);
    remainder_block<Max - 1>(outputs, x, ldx, n, in, w, y, ldy, add);
  }
}

template <int O>
inline void blocks(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n, std::ptrdiff_t in,
                   const matmul_task& t, std::ptrdiff_t begin, std::ptrdiff_t end) {
  // Prefetch the next block while computing this one, when the tile's arithmetic is long enough
  // to leave the memory stream idle otherwise (several rows) and a next block exists.
  std::ptrdiff_t o = begin;
  for (; o + O <= end; o += O) {
    const std::ptrdiff_t ahead = n > 1 && o + 2 * O <= end ? O * in : 0;
    block_all_rows<O>(x, ldx, n, in, t.w + o * in, t.y + o, t.ldy, t.add, ahead);
  }
  remainder_block<O - 1>(end - o, x, ldx, n, in, t.w + o * in, t.y + o, t.ldy, t.add);
}

}  // namespace detail

namespace detail {

/// Weight rows per block for a batch of n rows: more for small batches, whose tiles have few
/// accumulators (the latency of the FMAs and of the memory stream need about 8 and more
/// independent streams), fewer as the tile grows (the 32 registers hold R x O accumulators).
inline constexpr int outputs_per_block(std::ptrdiff_t n) {
  if (packet_size < 16)
    return n == 1 ? single_row_outputs : n == 5 || n == 6 ? narrow_outputs : block_outputs;
  return n <= 2 ? 8 : n <= 4 ? 6 : block_outputs;
}

}  // namespace detail

/// Outputs [begin, end) of one task: y[:, begin:end] (+)= x * W[begin:end]^T.
inline void matmul_range(const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n, std::ptrdiff_t in,
                         const matmul_task& t, std::ptrdiff_t begin, std::ptrdiff_t end) {
  switch (detail::outputs_per_block(n)) {
    case 8:
      return detail::blocks<8>(x, ldx, n, in, t, begin, end);
    case 6:
      return detail::blocks<6>(x, ldx, n, in, t, begin, end);
    case 2:
      return detail::blocks<2>(x, ldx, n, in, t, begin, end);
    default:
      return detail::blocks<detail::block_outputs>(x, ldx, n, in, t, begin, end);
  }
}

/**
 * Runs `tasks`, all with the input x (n x in, row-major, leading dimension ldx), on `pool` (or
 * the calling thread when null or when the work is small). Each weight is read once from memory
 * whatever n is. Outputs must not overlap x or each other.
 */
inline void matmul(thread_pool* pool, const float* x, std::ptrdiff_t ldx, std::ptrdiff_t n,
                   std::ptrdiff_t in, std::span<const matmul_task> tasks) {
  std::ptrdiff_t total_out = 0;
  for (const matmul_task& t : tasks) total_out += t.out;
  // Below ~256 KiB of weights a job's hand-off costs more than the second core saves.
  constexpr std::ptrdiff_t min_parallel_floats = 64 * 1024;
  if (pool == nullptr || pool->size() == 1 || total_out * in < min_parallel_floats) {
    for (const matmul_task& t : tasks) matmul_range(x, ldx, n, in, t, 0, t.out);
    return;
  }
  // Chunks of whole blocks, about 8 per thread, so that threads balance.
  const std::ptrdiff_t O = detail::outputs_per_block(n);
  const auto threads = static_cast<std::ptrdiff_t>(pool->size());
  std::ptrdiff_t chunk = std::max<std::ptrdiff_t>(O, total_out / (threads * 8) / O * O);
  std::size_t chunks = 0;
  for (const matmul_task& t : tasks)
    chunks += static_cast<std::size_t>((t.out + chunk - 1) / chunk);
  auto body = [&](std::size_t i) {
    for (const matmul_task& t : tasks) {
      const auto here = static_cast<std::size_t>((t.out + chunk - 1) / chunk);
      if (i < here) {
        const std::ptrdiff_t begin = static_cast<std::ptrdiff_t>(i) * chunk;
        matmul_range(x, ldx, n, in, t, begin, std::min(t.out, begin + chunk));
        return;
      }
      i -= here;
    }
  };
  pool->for_each(chunks, body);
}

/// Floats of one head's slice of attention_args::scores for n rows over T cache rows: n x T,
/// rounded up to a multiple of 16 so that every slice of an aligned buffer is 64-byte aligned.
inline std::size_t attention_slice(std::size_t n, std::size_t T) { return (n * T + 15) / 16 * 16; }

/// One layer's attention for n query rows over a KV cache (see attention()).
struct attention_args {
  const float* q = nullptr;  ///< n x (n_heads * head_size), row-major, RoPE applied
  const float* k = nullptr;  ///< cache rows x kv_dim, row-major (rows 0..T-1 are read)
  const float* v = nullptr;  ///< same layout as k
  float* out = nullptr;      ///< n x (n_heads * head_size)
  /// scratch: n_heads * attention_slice(n, context + (tree mode ? tree_width : n)) floats,
  /// aligned
  float* scores = nullptr;
  std::ptrdiff_t n = 0;        ///< query rows
  std::ptrdiff_t context = 0;  ///< cache rows before the batch (T = context + n)
  std::ptrdiff_t n_heads = 0, n_kv_heads = 0, head_size = 0;
  /// Tree mode: batch row i sees the context and the batch rows
  /// ancestors[ancestor_begin[i] .. ancestor_begin[i + 1]) (ascending, ending with i itself);
  /// null = causal (batch rows j <= i).
  const std::int32_t* ancestors = nullptr;
  const std::ptrdiff_t* ancestor_begin = nullptr;
  std::ptrdiff_t tree_width = 0;  ///< tree mode: the longest ancestor list
};

/**
 * softmax(q k^T / sqrt(head_size)) v for every head, each head a chunk of the pool (heads are
 * independent; each has its own slice of the scores). Query head h reads kv head
 * h / (n_heads / n_kv_heads). Causal mode scores n x T; tree mode scores each row against the
 * context and its own ancestors only, n x (context + tree_width), so a wide tree costs what
 * its paths need and never n x n.
 */
inline void attention(thread_pool* pool, const attention_args& a) {
  using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using stride = Eigen::OuterStride<>;
  const bool tree = a.ancestors != nullptr;
  const std::ptrdiff_t T = a.context + a.n, hs = a.head_size;
  const std::ptrdiff_t width = a.context + (tree ? a.tree_width : a.n);  // score columns
  const std::ptrdiff_t q_ld = a.n_heads * hs, kv_ld = a.n_kv_heads * hs;
  const std::ptrdiff_t group = a.n_heads / a.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  auto head = [&](std::size_t hi) {
    const auto h = static_cast<std::ptrdiff_t>(hi);
    const std::ptrdiff_t kv = (h / group) * hs;
    Eigen::Map<const row_major, 0, stride> q(a.q + h * hs, a.n, hs, stride(q_ld));
    Eigen::Map<const row_major, 0, stride> k(a.k + kv, T, hs, stride(kv_ld));
    Eigen::Map<const row_major, 0, stride> v(a.v + kv, T, hs, stride(kv_ld));
    Eigen::Map<row_major, 0, stride> out(a.out + h * hs, a.n, hs, stride(q_ld));
    Eigen::Map<row_major> s(
        a.scores + h * static_cast<std::ptrdiff_t>(attention_slice(
                           static_cast<std::size_t>(a.n), static_cast<std::size_t>(width))),
        a.n, width);
    if (!tree) {
      s.noalias() = q * k.transpose();
      for (std::ptrdiff_t i = 0; i < a.n; ++i) {
        auto row = s.row(i);
        auto live = row.head(a.context + i + 1);  // the context and batch rows 0..i
        live *= scale;
        const float mx = live.maxCoeff();
        live = (live.array() - mx).exp();
        live /= live.sum();
        row.tail(width - live.size()).setZero();
      }
      out.noalias() = s * v;
      return;
    }
    // Tree: the context part as one product, then each row's ancestors one by one.
    const std::ptrdiff_t C = a.context;
    if (C > 0) s.leftCols(C).noalias() = q * k.topRows(C).transpose();
    for (std::ptrdiff_t i = 0; i < a.n; ++i) {
      const std::int32_t* anc = a.ancestors + a.ancestor_begin[i];
      const std::ptrdiff_t m = a.ancestor_begin[i + 1] - a.ancestor_begin[i];
      auto row = s.row(i);
      for (std::ptrdiff_t j = 0; j < m; ++j) row(C + j) = q.row(i).dot(k.row(C + anc[j]));
      auto live = row.head(C + m);
      live *= scale;
      const float mx = live.maxCoeff();
      live = (live.array() - mx).exp();
      live /= live.sum();
    }
    if (C > 0) {
      out.noalias() = s.leftCols(C) * v.topRows(C);
    } else {
      out.setZero();
    }
    for (std::ptrdiff_t i = 0; i < a.n; ++i) {
      const std::int32_t* anc = a.ancestors + a.ancestor_begin[i];
      const std::ptrdiff_t m = a.ancestor_begin[i + 1] - a.ancestor_begin[i];
      for (std::ptrdiff_t j = 0; j < m; ++j) out.row(i) += s(i, C + j) * v.row(C + anc[j]);
    }
  };
  // One head's work is small at short contexts: parallel only when the batch has some weight.
  if (pool != nullptr && a.n * width * hs * a.n_heads >= 64 * 1024) {
    pool->for_each(static_cast<std::size_t>(a.n_heads), head);
  } else {
    for (std::size_t h = 0; h < static_cast<std::size_t>(a.n_heads); ++h) head(h);
  }
}

}  // namespace specdec::llama2c
