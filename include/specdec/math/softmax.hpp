// specdec/math/softmax.hpp - numerically safe softmax, log-softmax and log-sum-exp over one row.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

namespace specdec {

namespace detail {
inline Eigen::Map<const Eigen::ArrayXf> as_array(std::span<const float> x) {
  return {x.data(), static_cast<Eigen::Index>(x.size())};
}
inline Eigen::Map<Eigen::ArrayXf> as_array(std::span<float> x) {
  return {x.data(), static_cast<Eigen::Index>(x.size())};
}

// Row kernels on Eigen's packets (one SIMD register of floats; a plain float when Eigen does not
// vectorise). They walk a row from index 0 in fixed steps whatever its address, and finish the
// last few elements with the same packet functions on a broadcast value, so the same value
// gives the same result at every position (ties stay ties) and every call sums in the same order.
namespace ei = Eigen::internal;
// Row kernels are kept out of line and out of interprocedural specialisation (GCC: noipa, which
// also stops constant-propagated clones): they are O(V) anyway, and specialised for a caller's
// tiny constant row GCC warns about loops that cannot run (-Warray-bounds,
// -Waggressive-loop-optimizations). GCC 12 also flags the AVX-512 intrinsics inside Eigen's pexp
// (maybe-uninitialized): silenced for these kernels only.
#if defined(__GNUC__) && !defined(__clang__)
#define SPECDEC_ROW_KERNEL [[gnu::noipa]] inline
#elif defined(__clang__)
#define SPECDEC_ROW_KERNEL [[gnu::noinline]] inline
#else
#define SPECDEC_ROW_KERNEL inline
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
using packet = ei::packet_traits<float>::type;
inline constexpr std::size_t lanes = static_cast<std::size_t>(ei::packet_traits<float>::size);
// Sums are formed per block of this many values (a multiple of 4 packets), so a sampler can find
// the block holding a draw without rereading the row.
inline constexpr std::size_t block = 1024;

inline std::size_t block_count(std::size_t n) noexcept { return (n + block - 1) / block; }
// The float additions a term can pass through in a block sum of exp_blocks, block_sums and
// weight_above: at most block / (2 * lanes) in its lane of an accumulator packet, at most 5 more
// combining the accumulators and remainder packets, at most lanes - 1 in the horizontal
// reduction and at most 2 * lanes - 1 for the scalar tail. A float sum of non-negative terms
// that pass through at most h additions is within h * 2^-24 / (1 - h * 2^-24) of their exact sum,
// relatively; the top-p rule relies on that (warp.hpp, mass_range_of). Keep it true when a
// kernel's summation changes.
inline constexpr std::size_t block_sum_depth = block / (2 * lanes) + 3 * lanes + 5;

// exp(z) exactly as the packet path computes it, for one value.
SPECDEC_ROW_KERNEL float packet_exp(float z) noexcept {
  return ei::pfirst(ei::pexp(ei::pset1<packet>(z)));
}

struct row_summary {
  float max;    // largest value, ignoring NaN
  bool masked;  // some value is -inf
  bool bad;     // some value is NaN or +inf
};

// One pass over x[0..n), n >= 1: max, -inf present, NaN or +inf present.
SPECDEC_ROW_KERNEL row_summary summarize(const float* x, std::size_t n) noexcept {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const packet pinf = ei::pset1<packet>(inf);
  packet mx0 = ei::pset1<packet>(x[0]), mx1 = mx0, mn0 = mx0, mn1 = mx0;
  packet ok0 = ei::ptrue(mx0), ok1 = ok0;  // all bits set while every value is < +inf
  std::size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const packet a = ei::ploadu<packet>(x + i), b = ei::ploadu<packet>(x + i + lanes);
    mx0 = ei::pmax(mx0, a);
    mx1 = ei::pmax(mx1, b);
    mn0 = ei::pmin(mn0, a);
    mn1 = ei::pmin(mn1, b);
    ok0 = ei::pand(ok0, ei::pcmp_lt(a, pinf));  // false for NaN and +inf
    ok1 = ei::pand(ok1, ei::pcmp_lt(b, pinf));
  }
  const packet ok = ei::pand(ok0, ok1);
  float m = ei::predux_max(ei::pmax(mx0, mx1));
  float lo = ei::predux_min(ei::pmin(mn0, mn1));
  bool bad = ei::predux_any(ei::pandnot(ei::ptrue(ok), ok));
  for (; i < n; ++i) {
    const float v = x[i];
    bad |= !(v < inf);
    m = v > m ? v : m;
    lo = v < lo ? v : lo;
  }
  return {m, lo == -inf, bad};
}

// Sums e_i = exp((x_i - m) * inv_t) over x[0..n) (e_i = 0 exactly where x_i = -inf when Masked:
// Eigen's vectorised exp clamps very negative inputs to about 1e-38, not 0, and a masked token
// must never be drawn),
// block by block: each block sum is a float (packet lanes, then across), the total their
// double sum in order. Writes e to `out` and the block sums to `blocks` when they are not null.
// With Above, also sums the e_i > `over` into *above, by the same blocks.
template <bool Masked, bool Above = false>
SPECDEC_ROW_KERNEL double exp_blocks(const float* x, std::size_t n, float m, float inv_t, float* out,
                                     double* blocks, float over = 0.0f,
                                     double* above = nullptr) noexcept {
  const packet pm = ei::pset1<packet>(m), pt = ei::pset1<packet>(inv_t);
  const packet ninf = ei::pset1<packet>(-std::numeric_limits<float>::infinity());
  const packet pover = ei::pset1<packet>(over);
  auto term = [&](packet v) {
    packet e = ei::pexp(ei::pmul(ei::psub(v, pm), pt));
    if constexpr (Masked) e = ei::pandnot(e, ei::pcmp_eq(v, ninf));
    return e;
  };
  auto over_part = [&](packet e) { return ei::pand(e, ei::pcmp_lt(pover, e)); };
  double total = 0.0, total_above = 0.0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t b1 = b0 + block < n ? b0 + block : n;
    packet s0 = ei::pzero(pm), s1 = s0, s2 = s0, s3 = s0, a0 = s0, a1 = s0;
    std::size_t i = b0;
    for (; i + 4 * lanes <= b1; i += 4 * lanes) {
      const packet e0 = term(ei::ploadu<packet>(x + i));
      const packet e1 = term(ei::ploadu<packet>(x + i + lanes));
      const packet e2 = term(ei::ploadu<packet>(x + i + 2 * lanes));
      const packet e3 = term(ei::ploadu<packet>(x + i + 3 * lanes));
      if (out) {
        ei::pstoreu(out + i, e0);
        ei::pstoreu(out + i + lanes, e1);
        ei::pstoreu(out + i + 2 * lanes, e2);
        ei::pstoreu(out + i + 3 * lanes, e3);
      }
      s0 = ei::padd(s0, e0);
      s1 = ei::padd(s1, e1);
      s2 = ei::padd(s2, e2);
      s3 = ei::padd(s3, e3);
      if constexpr (Above) {
        a0 = ei::padd(a0, ei::padd(over_part(e0), over_part(e1)));
        a1 = ei::padd(a1, ei::padd(over_part(e2), over_part(e3)));
      }
    }
    for (; i + lanes <= b1; i += lanes) {
      const packet e = term(ei::ploadu<packet>(x + i));
      if (out) ei::pstoreu(out + i, e);
      s0 = ei::padd(s0, e);
      if constexpr (Above) a0 = ei::padd(a0, over_part(e));
    }
    float s = ei::predux(ei::padd(ei::padd(s0, s1), ei::padd(s2, s3)));
    float sa = Above ? ei::predux(ei::padd(a0, a1)) : 0.0f;
    for (; i < b1; ++i) {
      const float e = Masked && x[i] == -std::numeric_limits<float>::infinity()
                          ? 0.0f
                          : packet_exp((x[i] - m) * inv_t);
      if (out) out[i] = e;
      s += e;
      if (Above && e > over) sa += e;
    }
    if (blocks) blocks[b0 / block] = s;
    total += s;
    total_above += sa;
  }
  if constexpr (Above) *above = total_above;
  return total;
}

// The sum of the x[i] > over (x[0..n) non-negative), in a fixed order: float lanes per block of
// 1024, double across blocks, as exp_blocks sums.
SPECDEC_ROW_KERNEL double weight_above(const float* x, std::size_t n, float over) noexcept {
  const packet pover = ei::pset1<packet>(over);
  double total = 0.0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t b1 = b0 + block < n ? b0 + block : n;
    packet a0 = ei::pzero(pover), a1 = a0;
    std::size_t i = b0;
    for (; i + 2 * lanes <= b1; i += 2 * lanes) {
      const packet e0 = ei::ploadu<packet>(x + i), e1 = ei::ploadu<packet>(x + i + lanes);
      a0 = ei::padd(a0, ei::pand(e0, ei::pcmp_lt(pover, e0)));
      a1 = ei::padd(a1, ei::pand(e1, ei::pcmp_lt(pover, e1)));
    }
    float s = ei::predux(ei::padd(a0, a1));
    for (; i < b1; ++i) s += x[i] > over ? x[i] : 0.0f;
    total += s;
  }
  return total;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline double exp_blocks(const float* x, std::size_t n, float m, float inv_t, bool masked,
                         float* out, double* blocks) noexcept {
  return masked ? exp_blocks<true>(x, n, m, inv_t, out, blocks)
                : exp_blocks<false>(x, n, m, inv_t, out, blocks);
}

// Throws the domain_error checked_max promises, for a row that summarize() found bad.
[[noreturn]] inline void throw_bad_logit(std::span<const float> logits, const char* name) {
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      throw std::domain_error(std::string(name) + ": " + (std::isnan(x) ? "NaN" : "+inf") +
                              " at token " + std::to_string(i));
  }
  throw std::logic_error(std::string(name) + ": bad value not found");
}
}  // namespace detail

/**
 * The largest logit of a row, after checking that the row can define a distribution: no NaN,
 * no +inf, not empty, not all -inf (-inf marks a masked token and is allowed; `*masked`, when
 * given, tells whether the row has one). Throws std::domain_error naming `name`, the position
 * and the value. One pass, O(V).
 */
inline float checked_max(std::span<const float> logits, bool* masked = nullptr,
                         const char* name = "logits") {
  if (logits.empty()) throw std::invalid_argument(std::string(name) + ": empty row");
  const detail::row_summary r = detail::summarize(logits.data(), logits.size());
  if (r.bad) detail::throw_bad_logit(logits, name);
  if (masked) *masked = r.masked;
  if (r.max == -std::numeric_limits<float>::infinity())
    throw std::domain_error(std::string(name) + ": every token is -inf");
  return r.max;
}

/// log(sum(exp(logits))), computed stably. Throws like checked_max. Two passes, O(V).
inline double log_sum_exp(std::span<const float> logits) {
  bool masked = false;
  const float m = checked_max(logits, &masked);
  const double s = detail::exp_blocks(logits.data(), logits.size(), m, 1.0f, masked, nullptr,
                                      nullptr);
  return static_cast<double>(m) + std::log(s);
}

/// probs = softmax(logits / temperature) (temperature > 0). Returns nothing; probs sums to 1.
inline void softmax(std::span<const float> logits, std::span<float> probs,
                    float temperature = 1.0f) {
  if (probs.size() != logits.size())
    throw std::invalid_argument("softmax: probs.size() must equal logits.size()");
  if (!(temperature > 0.0f)) throw std::invalid_argument("softmax: temperature must be > 0");
  bool masked = false;
  const float m = checked_max(logits, &masked);
  const double s = detail::exp_blocks(logits.data(), logits.size(), m, 1.0f / temperature, masked,
                                      probs.data(), nullptr);
  detail::as_array(probs) *= static_cast<float>(1.0 / s);
}

/// out = log_softmax(logits / temperature) (temperature > 0).
inline void log_softmax(std::span<const float> logits, std::span<float> out,
                        float temperature = 1.0f) {
  if (out.size() != logits.size())
    throw std::invalid_argument("log_softmax: out.size() must equal logits.size()");
  if (!(temperature > 0.0f)) throw std::invalid_argument("log_softmax: temperature must be > 0");
  bool masked = false;
  const float m = checked_max(logits, &masked);
  const float inv_t = 1.0f / temperature;
  const double s = detail::exp_blocks(logits.data(), logits.size(), m, inv_t, masked, nullptr,
                                      nullptr);
  detail::as_array(out) = (detail::as_array(logits) - m) * inv_t - static_cast<float>(std::log(s));
}

}  // namespace specdec
