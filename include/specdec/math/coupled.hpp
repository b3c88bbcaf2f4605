// specdec/math/coupled.hpp - coupled sampling: a draw from a row that depends only on the row,
// the seed and the position, so that every party drawing from the same row at the same position
// (plain decoding, the verifier, a drafter whose row is close) gets the same token.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/softmax.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * The noise of one position of coupled sampling, from (seed, position). Token x's noise is an
 * exponential variable E_x = -log(1 - w_x), w_x uniform in (0, 1) from a counter-based hash of
 * (seed, position, x): nothing is drawn from a generator, so the noise of a position is the same
 * whoever asks and in whatever order.
 */
struct coupled_key {
  std::uint64_t full = 0;  ///< the key of (seed, position)
  std::uint32_t a = 0, b = 0;

  coupled_key() = default;
  coupled_key(std::uint64_t seed, std::size_t position) noexcept {
    full = mix(mix(seed ^ 0x6A09E667F3BCC909ULL) ^ (static_cast<std::uint64_t>(position) *
                                                    0x9E3779B97F4A7C15ULL));
    a = static_cast<std::uint32_t>(full);
    b = static_cast<std::uint32_t>(full >> 32);
  }

  /// splitmix64's finaliser: a bijection of 64-bit words with full avalanche.
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

/// Scratch memory for the coupled draws; nothing is allocated once it has held a row. Not
/// thread-safe.
struct coupled_workspace {
  std::vector<float> weights;                       // a block of exp weights, or a warped row
  std::vector<std::uint32_t> high;                  // a block of hashes
  std::vector<std::pair<double, token_id>> best;    // the race's leaders, ascending
  warp_workspace warp;
  void reserve(std::size_t v) {
    weights.reserve(v);
    high.reserve(detail::block);
    warp.reserve(v);
  }
};

namespace detail {

// murmur3's 32-bit finaliser: a bijection with full avalanche.
constexpr std::uint32_t fmix32(std::uint32_t h) noexcept {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// The high 32 bits of token x's uniform w_x: a bijection of x for a given key (distinct tokens
// never share them), vectorisable.
constexpr std::uint32_t coupled_high(const coupled_key& k, std::uint32_t x) noexcept {
  return fmix32((x ^ k.a) * 0x9E3779B1u + k.b);
}

// E_x = -log(1 - w_x), w_x = (high 2^32 + low + 1/2) 2^-64, the low 32 bits from a second hash.
// E_x >= w_x >= high 2^-32: the bound the race screens with.
inline double coupled_exponential(const coupled_key& k, std::uint32_t x) noexcept {
  const auto low = static_cast<std::uint32_t>(coupled_key::mix(k.full ^ (std::uint64_t{x} << 1 | 1)));
  const double w = (static_cast<double>(coupled_high(k, x)) * 0x1p32 + static_cast<double>(low) +
                    0.5) * 0x1p-64;
  return -std::log1p(-w);
}

// The race over weights[0..n) of tokens first..first+n: keeps in ws.best the (up to) `count`
// tokens of smallest E_x / w_x, ascending, ties to the lower id, among those whose ratio is below
// `limit` (which shrinks to the count-th best once `count` are held). Tokens of weight 0 never
// enter. A token enters only after its exact ratio is computed; the rest are screened out by
// high_x 2^-32 >= w_x limit (then E_x / w_x >= limit), with a slack of 2^-20 for the float
// arithmetic of the screen. O(n) hashes and compares, plus O(log count) per entrant.
inline void race_block(const float* weights, std::size_t n, std::uint32_t first,
                       const coupled_key& k, std::size_t count, double& limit,
                       coupled_workspace& ws) {
  ws.high.resize(n);
  std::uint32_t* high = ws.high.data();
  for (std::size_t j = 0; j < n; ++j) high[j] = coupled_high(k, first + static_cast<std::uint32_t>(j));
  const auto screen = [&] {
    return limit == std::numeric_limits<double>::infinity()
               ? std::numeric_limits<float>::infinity()
               : static_cast<float>(limit * 0x1p32 * (1.0 + 0x1p-20));
  };
  float threshold = screen();
  for (std::size_t j = 0; j < n; ++j) {
    const float w = weights[j];
    if (!(static_cast<float>(high[j]) < w * threshold) || !(w > 0.0f)) continue;
    const auto x = first + static_cast<std::uint32_t>(j);
    const double ratio = coupled_exponential(k, x) / static_cast<double>(w);
    if (!(ratio < limit)) continue;
    const auto at = std::upper_bound(ws.best.begin(), ws.best.end(),
                                     std::pair<double, token_id>(ratio, static_cast<token_id>(x)));
    ws.best.insert(at, {ratio, static_cast<token_id>(x)});
    if (ws.best.size() > count) ws.best.pop_back();
    if (ws.best.size() == count) {
      limit = ws.best.back().first;
      threshold = screen();
    }
  }
}

// The race over a whole row of weights for `count` leaders: first with a limit that holds them
// with overwhelming probability (`guess`), then, if fewer than `count` came in under it (a row
// with fewer positive weights than count, or a draw of probability below e^-guess), with none.
inline void race_row(std::span<const float> weights, const coupled_key& k, std::size_t count,
                     double guess, coupled_workspace& ws) {
  ws.best.clear();
  ws.best.reserve(count + 1);
  for (double limit : {guess, std::numeric_limits<double>::infinity()}) {
    ws.best.clear();
    double l = limit;
    for (std::size_t b0 = 0; b0 < weights.size(); b0 += block)
      race_block(weights.data() + b0, std::min(block, weights.size() - b0),
                 static_cast<std::uint32_t>(b0), k, count, l, ws);
    if (ws.best.size() == count || limit == std::numeric_limits<double>::infinity()) return;
  }
}

// The sum of non-negative weights (double), for the race's first limit.
inline double weight_sum(std::span<const float> w) noexcept {
  double s = 0.0;
  for (std::size_t b0 = 0; b0 < w.size(); b0 += block) {
    const std::size_t n = std::min(block, w.size() - b0);
    s += static_cast<double>(as_array(w.subspan(b0, n)).sum());
  }
  return s;
}

}  // namespace detail

/**
 * The first `count` tokens of the exponential race over `weights` (non-negative, any scale: a
 * probability row up to a constant) under the noise of `key`: the tokens of smallest E_x / w_x,
 * in that order (fewer when fewer weights are positive), ties to the lower id. The first is an
 * exact draw from w / sum(w) (the race's winner is token x with probability w_x / sum(w)); the
 * first `count` are a draw of `count` tokens without replacement (Gumbel top-k). Two rows raced
 * under the same key pick the same first token with probability at least
 * sum_x min(p_x, q_x) / (2 - sum_x min(p_x, q_x)), whatever p and q. Throws
 * std::invalid_argument when no weight is positive. O(V) hashes plus a few logarithms; nothing
 * allocated once `ws` has held a row.
 */
inline void coupled_top(std::span<const float> weights, const coupled_key& key, std::size_t count,
                        std::vector<token_id>& out, coupled_workspace& ws) {
  out.clear();
  if (count == 0) return;
  const double total = detail::weight_sum(weights);
  if (!(total > 0.0))
    throw std::invalid_argument("coupled_top: no token has a positive weight");
  // The count-th smallest ratio exceeds (48 + 4 count) / total with probability below e^-40.
  detail::race_row(weights, key, count, (48.0 + 4.0 * static_cast<double>(count)) / total, ws);
  for (const auto& [ratio, x] : ws.best) out.push_back(x);
}

/// The exponential race's winner over `weights` (coupled_top with count 1): an exact draw from
/// w / sum(w) under the noise of `key`. Throws std::invalid_argument when no weight is positive.
inline token_id coupled_draw(std::span<const float> weights, const coupled_key& key,
                             coupled_workspace& ws) {
  const double total = detail::weight_sum(weights);
  if (!(total > 0.0))
    throw std::invalid_argument("coupled_draw: no token has a positive weight");
  detail::race_row(weights, key, 1, 48.0 / total, ws);
  return ws.best.front().second;
}

/**
 * The coupled draw from a row of logits warped by `sp` (the row processor is not applied: the
 * caller gives the row it wants drawn from): argmax when greedy; with temperature alone, the race
 * over the exp weights of the logits, block by block, without writing the row of p (one max
 * pass, then one pass of exp, hash and compare); otherwise the race over warp's p. Throws as
 * checked_max for NaN or +inf logits. O(V).
 */
inline token_id coupled_sample(std::span<const float> logits, const sampling_params& sp,
                               const coupled_key& key, coupled_workspace& ws) {
  if (sp.greedy()) return argmax(logits);
  const std::size_t v = logits.size();
  const bool temperature_only =
      (sp.top_k == 0 || sp.top_k >= v) && !(sp.top_p < 1.0f) && !(sp.min_p > 0.0f);
  if (!temperature_only) {
    ws.weights.resize(v);
    warp(logits, sp, ws.weights, ws.warp);
    return coupled_draw(ws.weights, key, ws);
  }
  bool masked = false;
  const float m = checked_max(logits, &masked);
  const float inv_t = 1.0f / sp.temperature;
  // The largest logit's token has weight 1: its ratio E bounds the winner's, so the race starts
  // with that limit and screens nearly every token out by its hash alone.
  const auto top = static_cast<std::size_t>(
      std::find(logits.begin(), logits.end(), m) - logits.begin());
  ws.best.clear();
  ws.best.reserve(2);
  double limit = detail::coupled_exponential(key, static_cast<std::uint32_t>(top));
  ws.best.emplace_back(limit, static_cast<token_id>(top));
  ws.weights.resize(std::min(detail::block, v));
  for (std::size_t b0 = 0; b0 < v; b0 += detail::block) {
    const std::size_t n = std::min(detail::block, v - b0);
    detail::exp_blocks(logits.data() + b0, n, m, inv_t, masked, ws.weights.data(), nullptr);
    if (top >= b0 && top < b0 + n) ws.weights[top - b0] = 0.0f;  // entered above, weight 1
    detail::race_block(ws.weights.data(), n, static_cast<std::uint32_t>(b0), key, 1, limit, ws);
  }
  return ws.best.front().second;
}

/**
 * A drafter's draw from its (warped) row `q` for the token at `position` of the sequence:
 * coupled_draw under coupled_key(sp.seed, position) when sp.coupled, so that the draft is the
 * target's own draw whenever the two rows agree there; sample(q, gen) otherwise. Either way an
 * exact draw from q.
 */
inline token_id draft_draw(std::span<const float> q, const sampling_params& sp,
                           std::size_t position, rng& gen, coupled_workspace& ws) {
  if (sp.coupled) return coupled_draw(q, coupled_key(sp.seed, position), ws);
  return sample(q, gen);
}

}  // namespace specdec
