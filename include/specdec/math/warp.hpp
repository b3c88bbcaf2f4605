// specdec/math/warp.hpp - logits row -> the sampling distribution (temperature, top-k, top-p, min-p).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/softmax.hpp"

namespace specdec {

/// Scratch memory reused across warp calls: the first row with top-k or top-p sizes it for the
/// vocabulary, later rows allocate nothing. Not thread-safe.
struct warp_workspace {
  std::vector<float> values;
  std::vector<float> maxima;
  /// Room for rows of v logits: warp then allocates nothing, top-k and top-p included.
  void reserve(std::size_t v) {
    values.reserve(v);
    maxima.reserve(v / 16 + 1);  // groups of 4 packets of at least 4 lanes
  }
};

namespace detail {

// The k-th largest of values[0..n) (1-based k), by selection: O(n) expected, no full sort.
inline float kth_largest(std::vector<float>& values, std::size_t k) {
  auto nth = values.begin() + static_cast<std::ptrdiff_t>(k - 1);
  std::nth_element(values.begin(), nth, values.end(), std::greater<float>());
  return *nth;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// Fixed-point masses: the one arithmetic of the top-p rule (below). A weight e in [0, 1]
// (e = exp((logit - max) / T), so the largest weight is exactly 1) has the integer mass
//   mass(e) = e * 2^39 rounded to the nearest integer, ties to even,
// and masses are added as integers: exactly, so a sum is the same in any order, at any SIMD width
// and whether it is formed here, in a quickselect or in a test. A packet forms the mass in three
// digits of 13 bits, each rounded to the nearest integer with a signed remainder passed on
// (mass = hi * 2^26 + mid * 2^13 + lo; the last rounding is the only one, ties to even because
// hi * 2^26 + mid * 2^13 is even). A digit is an integer of magnitude <= 2^13, so the digit sums
// of a block of 1024 values stay below 2^24 and float lanes add them exactly.
inline constexpr int mass_bits = 39;
inline constexpr std::size_t max_mass_vocab = std::size_t{1} << 23;  // total mass < 2^63

struct mass_digits {
  packet hi, mid, lo;
};

// Every lane of t (|t| < 2^22) rounded to the nearest integer, ties to even (the default
// rounding mode): adding 1.5 * 2^23 leaves no fraction bits. The barrier keeps the compiler from
// folding the add and the subtract under -ffast-math.
EIGEN_STRONG_INLINE packet round_lanes(packet t) noexcept {
  const packet c = ei::pset1<packet>(12582912.0f);
  packet r = ei::padd(t, c);
  EIGEN_OPTIMIZATION_BARRIER(r);
  return ei::psub(r, c);
}

EIGEN_STRONG_INLINE mass_digits digits_of(packet e) noexcept {
  const packet radix = ei::pset1<packet>(8192.0f);  // 2^13
  packet t = ei::pmul(e, radix);
  const packet hi = round_lanes(t);
  t = ei::pmul(ei::psub(t, hi), radix);
  const packet mid = round_lanes(t);
  t = ei::pmul(ei::psub(t, mid), radix);
  return {hi, mid, round_lanes(t)};
}

EIGEN_STRONG_INLINE mass_digits operator+(const mass_digits& a, const mass_digits& b) noexcept {
  return {ei::padd(a.hi, b.hi), ei::padd(a.mid, b.mid), ei::padd(a.lo, b.lo)};
}

// The integer mass of digit sums (each an exact integer in a float).
EIGEN_STRONG_INLINE std::int64_t mass_of(float hi, float mid, float lo) noexcept {
  return static_cast<std::int64_t>(hi) * (std::int64_t{1} << 26) +
         static_cast<std::int64_t>(mid) * (std::int64_t{1} << 13) + static_cast<std::int64_t>(lo);
}

EIGEN_STRONG_INLINE std::int64_t mass_of(const mass_digits& d) noexcept {
  return mass_of(ei::predux(d.hi), ei::predux(d.mid), ei::predux(d.lo));
}

// mass(e) of one weight, in double: e * 2^39 is exact there, and adding 1.5 * 2^52 leaves no
// fraction bits, so this is the same integer the packet digits give (tests compare the two).
EIGEN_STRONG_INLINE std::int64_t mass(float e) noexcept {
  double r = static_cast<double>(e) * 0x1p39 + 0x1.8p52;
  EIGEN_OPTIMIZATION_BARRIER(r);
  return static_cast<std::int64_t>(r - 0x1.8p52);
}

// The total mass of the x[i] > over (x[0..n) weights in [0, 1]), exact (see mass_bits).
SPECDEC_ROW_KERNEL std::int64_t mass_above(const float* x, std::size_t n, float over) noexcept {
  const packet pover = ei::pset1<packet>(over);
  const packet zero = ei::pzero(pover);
  std::int64_t total = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t b1 = b0 + block < n ? b0 + block : n;
    mass_digits a0{zero, zero, zero}, a1 = a0;
    std::size_t i = b0;
    for (; i + 2 * lanes <= b1; i += 2 * lanes) {
      const packet e0 = ei::ploadu<packet>(x + i), e1 = ei::ploadu<packet>(x + i + lanes);
      // a lane that is not above contributes the digits of 0, which are 0
      a0 = a0 + digits_of(ei::pand(e0, ei::pcmp_lt(pover, e0)));
      a1 = a1 + digits_of(ei::pand(e1, ei::pcmp_lt(pover, e1)));
    }
    total += mass_of(a0 + a1);
    for (; i < b1; ++i)
      if (x[i] > over) total += mass(x[i]);
  }
  return total;
}

// The maxima of consecutive groups of `group_width` values of x (the last group may be short).
inline constexpr std::size_t group_width = 4 * lanes;
SPECDEC_ROW_KERNEL void group_maxima(std::span<const float> x, std::vector<float>& out) {
  out.resize((x.size() + group_width - 1) / group_width);
  std::size_t i = 0, g = 0;
  for (; i + group_width <= x.size(); i += group_width, ++g) {
    const float* p = x.data() + i;
    const packet a = ei::pmax(ei::ploadu<packet>(p), ei::ploadu<packet>(p + lanes));
    const packet b = ei::pmax(ei::ploadu<packet>(p + 2 * lanes), ei::ploadu<packet>(p + 3 * lanes));
    out[g] = ei::predux_max(ei::pmax(a, b));
  }
  if (i < x.size()) out[g] = *std::max_element(x.begin() + static_cast<std::ptrdiff_t>(i), x.end());
}

// values <- every x[i] >= floor (floor > 0), in index order. Skips whole packets below the floor,
// so it costs one compare per value when few pass.
SPECDEC_ROW_KERNEL void collect_at_least(std::span<const float> x, float floor,
                                         std::vector<float>& values) {
  values.clear();
  const packet f = ei::pset1<packet>(floor);
  std::size_t i = 0;
  for (; i + 2 * lanes <= x.size(); i += 2 * lanes) {
    const packet a = ei::ploadu<packet>(x.data() + i), b = ei::ploadu<packet>(x.data() + i + lanes);
    if (!ei::predux_any(ei::por(ei::pcmp_le(f, a), ei::pcmp_le(f, b)))) continue;
    for (std::size_t j = i; j < i + 2 * lanes; ++j)
      if (x[j] >= floor) values.push_back(x[j]);
  }
  for (; i < x.size(); ++i)
    if (x[i] >= floor) values.push_back(x[i]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The top-p rule, decided by these functions and no other code. Every weight e of the row (the
// largest is 1) has the integer mass of mass_bits (e * 2^39 rounded to the nearest integer), and
// masses add exactly. A token x is in the nucleus iff the mass of the tokens with a weight
// strictly greater than e_x is below top_p times the total mass, compared exactly:
//   mass above x < top_p * total   <=>   mass above x <= nucleus_limit(total, top_p).
// So the nucleus is the smallest set of largest tokens whose mass reaches top_p * total, tokens
// of equal weight are in or out together, and a token of mass 0 is never in (for top_p < 1).

// The largest mass above a token that still lets it in: floor((top_p * total * 2^s - 1) / 2^s)
// for top_p = M * 2^-s (M an integer of 24 bits), i.e. the largest integer below top_p * total,
// computed exactly in 64-bit integers. total in [0, 2^63), top_p in (0, 1).
inline std::int64_t nucleus_limit(std::int64_t total, float top_p) noexcept {
  if (total <= 0) return -1;
  if (!(top_p < 1.0f)) return total - 1;
  int e = 0;
  const float f = std::frexp(top_p, &e);  // top_p = f * 2^e, f in [0.5, 1), e <= 0
  const auto m = static_cast<std::uint64_t>(std::ldexp(f, 24));  // exact: f has 24 bits
  const int s = 24 - e;                                          // top_p = m * 2^-s, s >= 24
  // W = m * total = x * 2^24 + y; (W - 1) >> 24 = x + floor((y - 1) / 2^24), W >= 1.
  const auto t = static_cast<std::uint64_t>(total);
  const std::uint64_t x = m * (t >> 24);                        // < 2^24 * 2^39
  const std::uint64_t y = m * (t & ((1u << 24) - 1));           // < 2^48
  const std::uint64_t z = y > 0 ? x + ((y - 1) >> 24) : x - 1;  // (W - 1) >> 24, W >= 1
  const int rest = s - 24;
  return rest >= 64 ? 0 : static_cast<std::int64_t>(z >> rest);
}

// Every weight below this is outside the nucleus of any limit up to `limit` when the total mass
// is at least `total`: a token x inside has mass above it <= limit, and at most v weights <= e_x,
// so mass(e_x) >= (total - limit) / v and e_x >= ((total - limit) / v - 1/2) * 2^-39. Rounded
// down to be safe; 0 when there is no bound.
inline float nucleus_floor(std::int64_t total, std::int64_t limit, std::size_t v) noexcept {
  const double bound = (static_cast<double>(total - limit) / static_cast<double>(v) - 0.5) *
                       std::ldexp(1.0, -mass_bits);
  const float f = static_cast<float>(bound * (1.0 - 1e-6));
  return f > 0.0f ? f : 0.0f;
}

// The exact masses from float sums. A sum of weights formed as exp_blocks, block_sums and
// weight_above form it (float lanes per block, double across blocks) is within a relative `eps`
// of the exact sum of those weights (block_sum_depth additions per term in float, fewer than 2^13
// in double); the mass of n <= v weights is within v / 2 of 2^39 times their exact sum. So the
// mass lies in [lo, hi] below (the factors 2 * eps also cover the rounding here).
struct mass_range {
  std::int64_t lo, hi;
};
inline mass_range mass_range_of(double sum, std::size_t v) noexcept {
  constexpr double eps = static_cast<double>(block_sum_depth) * 0x1p-24 * 1.001 + 1e-12;
  const double scaled = std::ldexp(sum, mass_bits), half_v = 0.5 * static_cast<double>(v);
  const double lo = std::floor(scaled * (1.0 - 2.0 * eps) - half_v);
  const double hi = std::ceil(scaled * (1.0 + 2.0 * eps) + half_v);
  constexpr double most = 0x1p62;
  return {lo > 0.0 ? static_cast<std::int64_t>(std::min(lo, most)) : 0,
          hi > 0.0 ? static_cast<std::int64_t>(std::min(hi, most)) : 0};
}

// What the rule says from float sums of the weights above a token and of the whole row (v
// weights): `in` or `out` when every pair of masses in their ranges agrees, `unsure` otherwise
// (the masses are then within about 4 * eps of the limit; the caller asks warp, which decides
// with the masses themselves).
enum class nucleus_verdict { in, out, unsure };
inline nucleus_verdict nucleus_test(double above, double total, float top_p,
                                    std::size_t v) noexcept {
  const mass_range a = mass_range_of(above, v), t = mass_range_of(total, v);
  if (a.hi <= nucleus_limit(t.lo, top_p)) return nucleus_verdict::in;
  if (a.lo > nucleus_limit(t.hi, top_p)) return nucleus_verdict::out;
  return nucleus_verdict::unsure;
}

// The nucleus cut: the smallest weight t of `values` such that the mass of the values > t is at
// most `limit` (the row's nucleus is then every weight >= t), provided `values` holds every weight
// of the row that is greater than t and limit >= 0; with that mass, and the values reordered so
// that the first `at_least` of them are those >= t. Quickselect by mass: O(n) expected, no full
// sort; masses are summed exactly, so the order the partitions leave does not matter.
struct nucleus_cut_result {
  float t;
  std::int64_t above;    // the mass of the values > t
  std::size_t at_least;  // values[0, at_least) are the values >= t
};
inline nucleus_cut_result nucleus_cut(std::span<float> values, std::int64_t limit) {
  std::size_t lo = 0, hi = values.size();
  std::int64_t above = 0;  // mass of values[0, lo), which are above [lo, hi); always <= limit
  nucleus_cut_result known{values.empty() ? 0.0f : values[0], 0, values.size()};
  while (lo < hi) {
    // median of three as pivot
    const float a = values[lo], b = values[lo + (hi - lo) / 2], c = values[hi - 1];
    const float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
    // three-way partition: [lo, gt_end) > pivot, [gt_end, eq_end) == pivot, rest < pivot
    auto first = values.begin() + static_cast<std::ptrdiff_t>(lo);
    auto last = values.begin() + static_cast<std::ptrdiff_t>(hi);
    auto gt_end = std::partition(first, last, [pivot](float v) { return v > pivot; });
    auto eq_end = std::partition(gt_end, last, [pivot](float v) { return v == pivot; });
    // (values are weights >= 0; a weight of 0 has mass 0, so summing the ones > 0 sums all)
    const std::int64_t mass_gt =
        mass_above(&*first, static_cast<std::size_t>(gt_end - first), 0.0f);
    const std::int64_t mass_eq = mass(pivot) * static_cast<std::int64_t>(eq_end - gt_end);
    const auto eq_end_at = static_cast<std::size_t>(eq_end - values.begin());
    if (above + mass_gt > limit) {  // the pivot is out: the cut is among the larger values
      hi = static_cast<std::size_t>(gt_end - values.begin());
    } else if (eq_end == last || above + mass_gt + mass_eq > limit) {  // in, the next one out
      return {pivot, above + mass_gt, eq_end_at};
    } else {  // the next smaller value is in too
      above += mass_gt + mass_eq;
      known = {pivot, above - mass_eq, eq_end_at};
      lo = eq_end_at;
    }
  }
  return known;
}

}  // namespace detail

/**
 * Turns one row of logits into the distribution the sampler draws from, in place of `probs`
 * (same size). The pipeline, one line per step:
 *   1. check: NaN or +inf anywhere throws std::domain_error naming the token; -inf is a masked token
 *   2. temperature: exp((logit - max) / T)   (T == 0: one-hot at the argmax, lowest id on ties)
 *   3. top-k: keep the k largest (ties at the boundary: lowest ids first), by selection, O(V)
 *   4. top-p: keep the smallest set of largest tokens whose mass reaches top_p (all tokens tied at
 *      the boundary are kept), by quickselect on mass, O(V) expected. Mass is measured in exact
 *      integer units (each weight e, the largest being 1, rounded to a multiple of 2^-39), so
 *      whether a token is in the nucleus does not depend on summation order or SIMD width, and
 *      verify_rejection's fast paths decide it the same way (the rule: detail::nucleus_limit)
 *   5. min-p: drop tokens whose probability is below min_p times the largest
 *   6. renormalise to sum 1
 * The same function is applied to the target and to draft models, so both are warped alike.
 * Allocates nothing once `ws` has grown to V. Not thread-safe per workspace. With top_p < 1 the
 * vocabulary may hold at most 2^23 tokens (std::invalid_argument otherwise).
 */
inline void warp(std::span<const float> logits, const sampling_params& sp, std::span<float> probs,
                 warp_workspace& ws) {
  if (probs.size() != logits.size())
    throw std::invalid_argument("warp: probs.size() must equal logits.size()");
  const std::size_t v = logits.size();
  bool masked = false;
  const float m = checked_max(logits, &masked);
  auto p = detail::as_array(probs);
  if (sp.greedy()) {
    p.setZero();
    probs[static_cast<std::size_t>(argmax(logits))] = 1.0f;
    return;
  }
  const bool top_k = sp.top_k > 0 && sp.top_k < v;
  const bool top_p = sp.top_p < 1.0f;
  if (top_p && v > detail::max_mass_vocab)
    throw std::invalid_argument("warp: top_p < 1 needs a vocabulary of at most " +
                                std::to_string(detail::max_mass_vocab) + " tokens, got " +
                                std::to_string(v));
  if (top_k || top_p) ws.reserve(v);  // once: later rows select within it
  // max element is exactly 1
  const float inv_t = 1.0f / sp.temperature;
  double total = detail::exp_blocks(logits.data(), v, m, inv_t, masked, probs.data(), nullptr);
  if (top_k) {
    // The k-th largest of k group maxima is a lower bound of the k-th largest value: select
    // among the values at or above it only.
    float floor = 0.0f;
    detail::group_maxima(probs, ws.maxima);
    if (ws.maxima.size() >= sp.top_k) floor = detail::kth_largest(ws.maxima, sp.top_k);
    if (floor > 0.0f) {
      detail::collect_at_least(probs, floor, ws.values);
    } else {
      ws.values.assign(probs.begin(), probs.end());
    }
    const float t = detail::kth_largest(ws.values, sp.top_k);
    std::size_t above = 0, tied = 0;
    for (float x : ws.values) {
      above += x > t;
      tied += x == t;
    }
    if (above + tied == sp.top_k) {  // every tie fits: a plain threshold
      for (float& x : probs) x = x >= t ? x : 0.0f;
    } else {
      std::size_t ties_left = sp.top_k - above;
      for (float& x : probs) {
        if (x > t) continue;
        if (x == t && ties_left > 0) {
          --ties_left;
          continue;
        }
        x = 0.0f;
      }
    }
    total = detail::block_sums(probs, nullptr);
  }
  if (top_p) {
    // The nucleus by the rule of detail::nucleus_limit. The float total bounds the total mass,
    // hence the limit: [limit_lo, limit_hi]. Tokens below nucleus_floor are outside; nor can
    // tokens below the cut of the group maxima alone be inside when the maxima already hold more
    // than the limit. Select by mass among the values at or above the larger floor only; the
    // total mass is summed exactly only when the cut's mass lies between the two limits.
    const detail::mass_range total_mass = detail::mass_range_of(total, v);
    const std::int64_t limit_lo = detail::nucleus_limit(total_mass.lo, sp.top_p);
    const std::int64_t limit_hi = detail::nucleus_limit(total_mass.hi, sp.top_p);
    float floor = detail::nucleus_floor(total_mass.lo, limit_hi, v);  // valid up to limit_hi
    detail::group_maxima(probs, ws.maxima);
    std::int64_t maxima_mass = 0;
    for (float x : ws.maxima) maxima_mass += detail::mass(x);
    if (maxima_mass > limit_hi) floor = std::max(floor, detail::nucleus_cut(ws.maxima, limit_hi).t);
    // weights below FLT_MIN have mass 0 and are never inside
    detail::collect_at_least(probs, std::max(floor, std::numeric_limits<float>::min()), ws.values);
    auto cut = detail::nucleus_cut(ws.values, limit_hi);
    if (cut.above > limit_lo) {  // inside for some totals in the range only: sum the masses
      const std::int64_t limit =
          detail::nucleus_limit(detail::mass_above(probs.data(), v, 0.0f), sp.top_p);
      // a smaller limit cuts higher: among the values at or above this cut
      if (cut.above > limit)
        cut = detail::nucleus_cut(std::span<float>(ws.values.data(), cut.at_least), limit);
    }
    for (float& x : probs) x = x < cut.t ? 0.0f : x;
  }
  if (sp.min_p > 0.0f) {
    // the largest weight by a row kernel (Eigen's maxCoeff draws GCC 12's -Wmaybe-uninitialized
    // under AVX-512)
    const float t = sp.min_p * detail::summarize(probs.data(), v).max;
    for (float& x : probs) x = x < t ? 0.0f : x;
  }
  if (top_p || sp.min_p > 0.0f) total = detail::block_sums(probs, nullptr);
  p *= static_cast<float>(1.0 / total);
}

/// warp() with its own temporary workspace (allocates when top-k or top-p are on).
inline void warp(std::span<const float> logits, const sampling_params& sp,
                 std::span<float> probs) {
  warp_workspace ws;
  warp(logits, sp, probs, ws);
}

}  // namespace specdec
