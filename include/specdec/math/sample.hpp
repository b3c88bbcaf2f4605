// specdec/math/sample.hpp - drawing tokens: argmax, sampling from a distribution, residuals.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/math/rng.hpp"
#include "specdec/math/softmax.hpp"
#include "specdec/types.hpp"

namespace specdec {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
/// The index of the largest value; ties go to the lowest index, everywhere in specdec, so greedy
/// paths computed by different components agree. Throws std::domain_error on NaN. One vectorised
/// pass keeping the best block of 256 values, then a scan of that block: O(V).
SPECDEC_ROW_KERNEL token_id argmax(std::span<const float> row) {
  namespace ei = detail::ei;
  using detail::packet;
  using detail::lanes;
  if (row.empty()) throw std::invalid_argument("argmax: empty row");
  constexpr std::size_t width = 256 > 4 * lanes ? 256 : 4 * lanes;  // a multiple of 4 packets
  const float* x = row.data();
  const std::size_t n = row.size();
  float best = -std::numeric_limits<float>::infinity();
  std::size_t best_at = 0;  // a block start while scanning blocks, an index after
  packet ok = ei::ptrue(ei::pset1<packet>(0.0f));  // all bits set while no NaN was seen
  std::size_t i = 0;
  for (; i + width <= n; i += width) {
    packet m0 = ei::ploadu<packet>(x + i), m1 = ei::ploadu<packet>(x + i + lanes);
    packet m2 = ei::ploadu<packet>(x + i + 2 * lanes), m3 = ei::ploadu<packet>(x + i + 3 * lanes);
    packet ok0 = ei::pand(ei::pcmp_eq(m0, m0), ei::pcmp_eq(m1, m1));
    packet ok1 = ei::pand(ei::pcmp_eq(m2, m2), ei::pcmp_eq(m3, m3));
    for (std::size_t j = i + 4 * lanes; j < i + width; j += 4 * lanes) {
      const packet a = ei::ploadu<packet>(x + j), b = ei::ploadu<packet>(x + j + lanes);
      const packet c = ei::ploadu<packet>(x + j + 2 * lanes);
      const packet d = ei::ploadu<packet>(x + j + 3 * lanes);
      m0 = ei::pmax(m0, a);
      m1 = ei::pmax(m1, b);
      m2 = ei::pmax(m2, c);
      m3 = ei::pmax(m3, d);
      ok0 = ei::pand(ok0, ei::pand(ei::pcmp_eq(a, a), ei::pcmp_eq(b, b)));
      ok1 = ei::pand(ok1, ei::pand(ei::pcmp_eq(c, c), ei::pcmp_eq(d, d)));
    }
    ok = ei::pand(ok, ei::pand(ok0, ok1));
    const float m = ei::predux_max(ei::pmax(ei::pmax(m0, m1), ei::pmax(m2, m3)));
    if (m > best) {  // strict: an earlier block keeps a tie
      best = m;
      best_at = i;
    }
  }
  bool nan = ei::predux_any(ei::pandnot(ei::ptrue(ok), ok));
  if (i > 0) {  // the first index of the best value inside its block
    const std::size_t end = best_at + width;
    for (std::size_t j = best_at; j < end; ++j)
      if (x[j] == best) {
        best_at = j;
        break;
      }
  }
  for (; i < n; ++i) {
    const float v = x[i];
    nan |= v != v;
    if (v > best) {
      best = v;
      best_at = i;
    }
  }
  if (nan) {
    for (std::size_t j = 0; j < n; ++j)
      if (std::isnan(row[j]))
        throw std::domain_error("logits: NaN at token " + std::to_string(j));
  }
  return static_cast<token_id>(best_at);
}

namespace detail {
inline void check_total(double total) {
  if (!(total > 0.0) || !std::isfinite(total))
    throw std::domain_error("sample: probabilities must have a positive, finite total");
}

// The inverse-CDF draw of sample() at the point u (in (0, 1)), given the block sums of the
// values (see exp_blocks) and their total, whose values `values_of(b)` returns (a span of block
// b). The block is found in double over the block sums; inside it, the point's offset into the
// block is rescaled from the block's float sum to the block's own double sum before a double
// running sum finds the token, so that the block's share is split among its tokens in
// proportion to their values: each token is drawn with probability
// blocks[b] / total * values[i] / (double sum of block b), the rounding of the float block sums
// being a factor common to a whole block (never a difference that lands on the block's last
// token). Never returns a token of value 0.
// draw_in_blocks with the block sums given by `block_sum(b)` for b < nb (stored, or computed
// again block by block when there are too many to keep).
template <class BlockSum, class BlockValues>
token_id draw_in_block_sums(std::size_t nb, BlockSum&& block_sum, double total, double u,
                            BlockValues&& values_of) {
  check_total(total);
  const double target = u * total;
  double cumulative = 0.0;
  std::size_t b = 0;
  double here = block_sum(0);
  for (; b + 1 < nb; here = block_sum(++b)) {
    if (cumulative + here > target) break;
    cumulative += here;
  }
  std::span<const float> values = values_of(b);
  double own = 0.0;  // the block's sum in the order of the running sum below
  for (const float x : values)
    if (x > 0.0f) own += x;
  // Past the last block's sum (rounding of u * total) or in a block without a positive value
  // (only the last one can be reached so): the last positive value at or before this block.
  if (own > 0.0 && here > 0.0 && target - cumulative < here) {
    const double inside = (target - cumulative) / here * own;
    double running = 0.0;
    std::size_t last_positive = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] <= 0.0f) continue;
      running += values[i];
      last_positive = i;
      if (running > inside) return static_cast<token_id>(b * block + i);
    }
    return static_cast<token_id>(b * block + last_positive);  // inside rounded up to `own`
  }
  for (;;) {
    for (std::size_t i = values.size(); i-- > 0;)
      if (values[i] > 0.0f) return static_cast<token_id>(b * block + i);
    if (b == 0) return 0;  // unreachable: a positive total has a positive value
    values = values_of(--b);
  }
}

template <class BlockValues>
token_id draw_in_blocks(std::span<const double> blocks, double total, double u,
                        BlockValues&& values_of) {
  return draw_in_block_sums(
      blocks.size(), [blocks](std::size_t b) { return blocks[b]; }, total, u, values_of);
}

// draw_in_blocks at a uniform draw of `gen` (drawn only once the total is known to be good).
template <class BlockValues>
token_id sample_in_blocks(std::span<const double> blocks, double total, rng& gen,
                          BlockValues&& values_of) {
  check_total(total);
  return draw_in_blocks(blocks, total, gen.uniform_open(), values_of);
}

// The values_of of a whole row held in memory: block b of `probs`.
inline auto blocks_of(std::span<const float> probs) {
  return [probs](std::size_t b) {
    return probs.subspan(b * block, std::min(block, probs.size() - b * block));
  };
}

inline token_id sample_in_blocks(std::span<const float> probs, std::span<const double> blocks,
                                 double total, rng& gen) {
  return sample_in_blocks(blocks, total, gen, blocks_of(probs));
}

// Block sums of probs as exp_blocks forms them (float per block, double total); `blocks` may be
// null when only the total is wanted.
SPECDEC_ROW_KERNEL double block_sums(std::span<const float> probs, double* blocks) noexcept {
  namespace ei = detail::ei;
  const float* x = probs.data();
  const std::size_t n = probs.size();
  double total = 0.0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t b1 = b0 + block < n ? b0 + block : n;
    packet s0 = ei::pset1<packet>(0.0f), s1 = s0, s2 = s0, s3 = s0;
    std::size_t i = b0;
    for (; i + 4 * lanes <= b1; i += 4 * lanes) {
      s0 = ei::padd(s0, ei::ploadu<packet>(x + i));
      s1 = ei::padd(s1, ei::ploadu<packet>(x + i + lanes));
      s2 = ei::padd(s2, ei::ploadu<packet>(x + i + 2 * lanes));
      s3 = ei::padd(s3, ei::ploadu<packet>(x + i + 3 * lanes));
    }
    for (; i + lanes <= b1; i += lanes) s0 = ei::padd(s0, ei::ploadu<packet>(x + i));
    float s = ei::predux(ei::padd(ei::padd(s0, s1), ei::padd(s2, s3)));
    for (; i < b1; ++i) s += x[i];
    if (blocks) blocks[b0 / block] = s;
    total += s;
  }
  return total;
}
// sample() with the uniform draw in (0, 1) from `draw_u`, called once the total is known to be
// good (tests pass a fixed point).
template <class DrawU>
token_id sample_with(std::span<const float> probs, DrawU&& draw_u) {
  if (probs.empty())
    throw std::domain_error("sample: probabilities must have a positive, finite total");
  constexpr std::size_t on_stack = 256;
  const std::size_t nb = block_count(probs.size());
  if (nb > on_stack) {  // V > 256 Ki: each block's sum is formed again while walking to the draw
    const double total = block_sums(probs, nullptr);
    check_total(total);
    const double u = draw_u();
    const auto values_of = blocks_of(probs);
    return draw_in_block_sums(
        nb, [&](std::size_t b) { return block_sums(values_of(b), nullptr); }, total, u,
        values_of);
  }
  double blocks[on_stack];
  const double total = block_sums(probs, blocks);
  check_total(total);
  const double u = draw_u();
  return draw_in_blocks(std::span<const double>(blocks, nb), total, u, blocks_of(probs));
}

}  // namespace detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/**
 * Draws a token from `probs` (non-negative, any positive total: it need not be normalised).
 * Inverse CDF: sums of blocks of 1024 values (vectorised, a fixed order) choose the block, then
 * a double running sum inside it, rescaled to the block's sum, chooses the token, so the result
 * depends only on the values and the rng state, and every token of a block is drawn with its
 * value's share of the block: the float rounding of a block sum (relative error at most
 * detail::block_sum_depth * 2^-24, about 1e-7 typically) scales the whole block alike and never
 * favours or starves the tokens at its end. A token of probability 0 is never drawn. Throws std::domain_error if the total is
 * not positive and finite. Reads the row once plus one block (V > 256 Ki: up to twice, the block
 * sums being formed again instead of kept); O(V). Allocates nothing.
 */
inline token_id sample(std::span<const float> probs, rng& gen) {
  return detail::sample_with(probs, [&gen] { return gen.uniform_open(); });
}

/**
 * out = max(0, p - q): the distribution the target's token is drawn from after a draft x drawn
 * from q was rejected (unnormalised; sample() accepts that). A rejection needs p(x) < q(x), so
 * out(x) = 0: the rejected token is never drawn from it, however small the rest. Returns out's
 * mass, summed as sample() sums it (detail::block_sums). Only when that mass is 0 (p <= q at
 * every token, which exactly normalised rows rule out: rounding can leave sum(p) below sum(q),
 * and a rejection then has probability at most sum(q) - sum(p)) is out = p, and its mass is
 * returned. Throws std::invalid_argument for sizes that differ. O(V).
 */
inline double residual(std::span<const float> p, std::span<const float> q, std::span<float> out) {
  if (p.size() != q.size() || out.size() != p.size())
    throw std::invalid_argument("residual: p, q and out must have the same size");
  for (std::size_t i = 0; i < p.size(); ++i) {
    const float d = p[i] - q[i];
    out[i] = d > 0.0f ? d : 0.0f;
  }
  const double mass = detail::block_sums(out, nullptr);
  if (mass > 0.0) return mass;
  std::copy(p.begin(), p.end(), out.begin());
  return detail::block_sums(out, nullptr);
}

/**
 * residual() for q one-hot at `token` (a deterministic draft): out = p without that token,
 * computed exactly (no subtraction). Only when `token` is p's only token of positive value (then
 * p(token) rounded below 1 let the rejection happen, and it is the one token p can give) is
 * out = p. A token outside [0, V) leaves out = p. Returns out's mass as residual() does.
 * Throws std::invalid_argument for sizes that differ. O(V).
 */
inline double residual_one_hot(std::span<const float> p, token_id token, std::span<float> out) {
  if (out.size() != p.size()) throw std::invalid_argument("residual: p and out sizes differ");
  std::copy(p.begin(), p.end(), out.begin());
  if (token < 0 || static_cast<std::size_t>(token) >= out.size())
    return detail::block_sums(out, nullptr);
  const auto x = static_cast<std::size_t>(token);
  out[x] = 0.0f;
  const double mass = detail::block_sums(out, nullptr);
  if (mass > 0.0) return mass;
  out[x] = p[x];
  return detail::block_sums(out, nullptr);
}

}  // namespace specdec
