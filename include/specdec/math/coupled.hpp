// specdec/math/coupled.hpp - coupled sampling: a draw from a row that depends only on the row,
// the seed and the position, so that every party drawing from the same row at the same position
// (plain decoding, the verifier, a drafter whose row is close) gets the same token.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
  std::vector<std::pair<double, token_id>> best;    // the race's leaders, ascending
  warp_workspace warp;
  void reserve(std::size_t v) {
    weights.reserve(v);
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
// never share them). screen_hits computes the same on packets: keep the two in step.
constexpr std::uint32_t coupled_high(const coupled_key& k, std::uint32_t x) noexcept {
  return fmix32((x ^ k.a) + k.b);
}

// E_x = -log(1 - w_x), w_x = (high 2^32 + low + 1/2) 2^-64, the low 32 bits from a second hash.
// E_x >= w_x >= high 2^-32: the bound the race screens with.
inline double coupled_exponential(const coupled_key& k, std::uint32_t x) noexcept {
  const auto low =
      static_cast<std::uint32_t>(coupled_key::mix(k.full ^ (std::uint64_t{x} << 1 | 1)));
  const double w = (static_cast<double>(coupled_high(k, x)) * 0x1p32 + static_cast<double>(low) +
                    0.5) * 0x1p-64;
  return -std::log1p(-w);
}

// The race over weights[0..n) of tokens first..first+n: keeps in ws.best the (up to) `count`
// tokens of smallest E_x / w_x, ascending, ties to the lower id, among those whose ratio is below
// `limit` (which shrinks to the count-th best once `count` are held). Tokens of weight 0 never
// enter. A token enters only after its exact ratio is computed; the rest are screened out by
// E_x >= w_x >= (high_x >> 8) 2^-24: no entrant unless (high_x >> 8) < w_x limit 2^24 (with a
// slack of 2^-20 for the float arithmetic). The screen runs on chunks of 64 tokens as one
// vectorisable loop (hash, compare, or-reduce); only a chunk with a hit is walked again token by
// token. O(n) hashes and compares, plus O(log count) per entrant.
inline void race_block(const float* weights, std::size_t n, std::uint32_t first,
                       const coupled_key& k, std::size_t count, double& limit,
                       coupled_workspace& ws) {
  constexpr std::size_t chunk = 64;
  const auto screen = [&] {
    return limit == std::numeric_limits<double>::infinity()
               ? std::numeric_limits<float>::infinity()
               : static_cast<float>(limit * 0x1p24 * (1.0 + 0x1p-20));
  };
  float threshold = screen();
  for (std::size_t c0 = 0; c0 < n; c0 += chunk) {
    const std::size_t c1 = std::min(n, c0 + chunk);
    int support = 0;  // a filtered row (top-k, top-p) is mostly zeros: skip them unhashed
    for (std::size_t j = c0; j < c1; ++j) support |= weights[j] > 0.0f;
    if (!support) continue;
    int hit = 0;
    for (std::size_t j = c0; j < c1; ++j) {  // w = 0 never hits (0 < 0, or 0 * inf = NaN)
      const std::uint32_t h = coupled_high(k, first + static_cast<std::uint32_t>(j));
      hit |= static_cast<float>(static_cast<std::int32_t>(h >> 8)) < weights[j] * threshold;
    }
    if (!hit) continue;
    for (std::size_t j = c0; j < c1; ++j) {
      const float w = weights[j];
      const auto x = first + static_cast<std::uint32_t>(j);
      if (!(w > 0.0f) ||
          !(static_cast<float>(static_cast<std::int32_t>(coupled_high(k, x) >> 8)) <
            w * threshold))
        continue;
      const double ratio = coupled_exponential(k, x) / static_cast<double>(w);
      if (!(ratio < limit)) continue;
      const std::pair<double, token_id> entry(ratio, static_cast<token_id>(x));
      ws.best.insert(std::upper_bound(ws.best.begin(), ws.best.end(), entry), entry);
      if (ws.best.size() > count) ws.best.pop_back();
      if (ws.best.size() == count) {
        limit = ws.best.back().first;
        threshold = screen();
      }
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

// The exponent of float(high >> 8) minus 24: floor(log2((high >> 8) 2^-24)), a lower bound of
// log2(E_x) (E_x >= (high >> 8) 2^-24); -151 for high >> 8 == 0. Branch-free, vectorisable.
inline float log2_floor_of_high(std::uint32_t high) noexcept {
  const float hf = static_cast<float>(static_cast<std::int32_t>(high >> 8));
  std::uint32_t bits;
  std::memcpy(&bits, &hf, sizeof bits);
  return static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 127 - 24);
}

// Whether tokens [c0, c0 + n) of a row of logits `l` may pass race_logits' screen: some token's
// log2_floor_of_high(high_x) < l_x a + b. On Eigen's packets (float and int32 of the same
// width: 16 lanes with AVX-512, 8 with AVX2, 4 with SSE2), else a plain loop.
#if defined(__GNUC__)
#pragma GCC diagnostic push
// A packet type (__m128 and kin) as a template argument loses its vector attributes, which GCC
// notes; Eigen's own code does the same.
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
inline bool screen_hits(const float* l, std::size_t c0, std::size_t n, const coupled_key& k,
                        float a, float b) noexcept {
  namespace ei = Eigen::internal;
  using pf = ei::packet_traits<float>::type;
  using pi = typename ei::unpacket_traits<pf>::integer_packet;  // int32 lanes, as many
  constexpr std::size_t width = static_cast<std::size_t>(ei::unpacket_traits<pf>::size);
  std::size_t j = 0;
  if constexpr (width > 1 && width == static_cast<std::size_t>(ei::unpacket_traits<pi>::size)) {
    alignas(64) std::int32_t lane[width];
    for (std::size_t i = 0; i < width; ++i) lane[i] = static_cast<std::int32_t>(i);
    const pi iota = ei::pload<pi>(lane);
    const pi ka = ei::pset1<pi>(static_cast<std::int32_t>(k.a));
    const pi kb = ei::pset1<pi>(static_cast<std::int32_t>(k.b));
    const pi m1 = ei::pset1<pi>(static_cast<std::int32_t>(0x85EBCA6Bu));
    const pi m2 = ei::pset1<pi>(static_cast<std::int32_t>(0xC2B2AE35u));
    const pf pa = ei::pset1<pf>(a), pb = ei::pset1<pf>(b + 151.0f);  // 151: exponent bias + 24
    pf any = ei::pzero(pa);
    for (; j + width <= n; j += width) {
      pi h = ei::padd(ei::pxor(ei::padd(ei::pset1<pi>(static_cast<std::int32_t>(c0 + j)), iota),
                               ka),
                      kb);
      h = ei::pxor(h, ei::plogical_shift_right<16>(h));
      h = ei::pmul(h, m1);
      h = ei::pxor(h, ei::plogical_shift_right<13>(h));
      h = ei::pmul(h, m2);
      h = ei::pxor(h, ei::plogical_shift_right<16>(h));
      const pf hf = ei::pcast<pi, pf>(ei::plogical_shift_right<8>(h));
      const pf exponent =
          ei::pcast<pi, pf>(ei::plogical_shift_right<23>(ei::preinterpret<pi>(hf)));
      any = ei::por(any, ei::pcmp_lt(exponent, ei::pmadd(ei::ploadu<pf>(l + c0 + j), pa, pb)));
    }
    if (ei::predux_any(any)) return true;
  }
  int hit = 0;
  for (; j < n; ++j)
    hit |= log2_floor_of_high(coupled_high(k, static_cast<std::uint32_t>(c0 + j))) <
           l[c0 + j] * a + b;
  return hit != 0;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// The race over the temperature weights w_x = exp((l_x - m) inv_t) of a row of logits (m its
// max, at token `top`, the first of that value; every logit finite or -inf), for its winner,
// without computing w for the tokens it screens out: token `top` (w = 1) enters first and its E
// bounds the winning ratio L; a token can win only if log2(E_x) < log2(w_x L), and log2(E_x) >=
// log2_floor_of_high, so the screen compares that bound with the linear
// (l_x - m) inv_t log2(e) + log2(L) (plus a slack of 2^-6 for its float arithmetic): a hash, a
// conversion and a multiply-add per token (screen_hits), with no exp. A token that passes
// (about two per row) gets its exact w (double exp) and ratio. Ties to the lower id. O(V).
inline token_id race_logits(std::span<const float> logits, std::size_t top, float inv_t,
                            const coupled_key& k) {
  constexpr std::size_t chunk = 256;
  const std::size_t v = logits.size();
  const float m = logits[top];
  token_id best = static_cast<token_id>(top);
  double limit = coupled_exponential(k, static_cast<std::uint32_t>(top));  // E / w, w = 1
  const float a = inv_t * 1.4426950408889634f;                              // log2(e) / T
  float b = 0.0f;
  const auto rebound = [&] {
    b = static_cast<float>(std::log2(limit) - static_cast<double>(m) * static_cast<double>(a) +
                           0x1p-6);
  };
  rebound();
  const float* l = logits.data();
  for (std::size_t c0 = 0; c0 < v; c0 += chunk) {
    const std::size_t c1 = std::min(v, c0 + chunk);
    if (!screen_hits(l, c0, c1 - c0, k, a, b)) continue;  // -inf logits never hit
    for (std::size_t j = c0; j < c1; ++j) {
      const auto x = static_cast<std::uint32_t>(j);
      if (j == top || !(log2_floor_of_high(coupled_high(k, x)) < l[j] * a + b)) continue;
      const double w = std::exp(static_cast<double>(l[j] - m) * static_cast<double>(inv_t));
      const double ratio = coupled_exponential(k, x) / w;
      if (ratio < limit || (ratio == limit && static_cast<token_id>(x) < best)) {
        limit = ratio;
        best = static_cast<token_id>(x);
        rebound();
      }
    }
  }
  return best;
}

/// coupled_top for a row known to sum to 1 (a warped one): no pass for its sum.
inline void top_normalised(std::span<const float> q, const coupled_key& key,
                                   std::size_t count, std::vector<token_id>& out,
                                   coupled_workspace& ws) {
  out.clear();
  if (count == 0) return;
  race_row(q, key, count, 48.0 + 4.0 * static_cast<double>(count), ws);
  for (const auto& [ratio, x] : ws.best) out.push_back(x);
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
 * over the temperature weights of the logits without computing them (detail::race_logits: one
 * max pass, then one pass of hash, convert and compare); with top-p alone, the same race, then
 * one exp pass to test that its winner is in the nucleus by warp's rule (else, about 1 - top_p of
 * the time, the race over warp's p); otherwise the race over warp's p. Throws as checked_max for
 * NaN or +inf logits. O(V).
 */
inline token_id coupled_sample(std::span<const float> logits, const sampling_params& sp,
                               const coupled_key& key, coupled_workspace& ws) {
  if (sp.greedy()) return argmax(logits);
  const std::size_t v = logits.size();
  const bool no_top_k = sp.top_k == 0 || sp.top_k >= v;
  const bool temperature_only = no_top_k && !(sp.top_p < 1.0f) && !(sp.min_p > 0.0f);
  const bool top_p_only =
      no_top_k && sp.top_p < 1.0f && !(sp.min_p > 0.0f) && v <= detail::max_mass_vocab;
  if (temperature_only || top_p_only) {
    // One pass finds the largest logit and its token (argmax: ties to the lowest id, NaN
    // refused); the race starts from that token.
    const auto top = static_cast<std::size_t>(argmax(logits));
    const float m = logits[top];
    if (!(m < std::numeric_limits<float>::infinity())) detail::throw_bad_logit(logits, "logits");
    if (m == -std::numeric_limits<float>::infinity())
      throw std::domain_error("logits: every token is -inf");
    const float inv_t = 1.0f / sp.temperature;
    const token_id y = detail::race_logits(logits, top, inv_t, key);
    if (temperature_only) return y;
    // Top-p: the nucleus is a subset of the row, so the race's winner over the whole row is the
    // winner over the nucleus whenever it lies in it, which warp's rule decides from two sums
    // (one exp pass, as verify_rejection's top-p path); otherwise (out, or too close to the
    // boundary to tell) the race over warp's p below.
    const float ly = logits[static_cast<std::size_t>(y)];
    const float ey = detail::packet_exp((ly - m) * inv_t);
    double above = 0.0;
    const double total = detail::exp_blocks<true, true>(logits.data(), v, m, inv_t, nullptr,
                                                        nullptr, ey, &above);
    if (detail::nucleus_test(above, total, sp.top_p, v) == detail::nucleus_verdict::in) return y;
  }
  ws.weights.resize(v);
  warp(logits, sp, ws.weights, ws.warp);  // sums to 1: the first limit needs no sum pass
  detail::race_row(ws.weights, key, 1, 48.0, ws);
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
  if (!sp.coupled) return sample(q, gen);
  // A warped row sums to 1: the race's first limit needs no sum pass (coupled_draw's).
  detail::race_row(q, coupled_key(sp.seed, position), 1, 48.0, ws);
  if (ws.best.empty()) throw std::invalid_argument("draft_draw: no token has a positive weight");
  return ws.best.front().second;
}

}  // namespace specdec
