// tests/support/chain_sim.hpp - statistics for long drafts: the exact law of every position's
// window of tokens (enumerated), windows counted from sampled runs, a chain simulator whose
// verifier is a parameter (draft K tokens from q rows, verify with a callable, emit, repeat), the
// closed-form law of the accepted length for position-only rows, and a deliberately biased copy
// of the token rule (the negative control).
//
// Why windows: the joint of 9 tokens of a V-token model has V^9 cells, far too many to fill.
// With a target whose next token depends on the last two tokens (an order-3 table) and V = 4,
// the window (x_{j-2}, x_{j-1}, x_j) at position j has 64 cells and holds everything the target
// says about x_j: a verifier that reads the wrong row, the wrong q, or the wrong residual at
// depth j moves the window's law at j (or after), and 64 cells fill with ten thousand runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <specdec/math/rng.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/math/warp.hpp>
#include <specdec/stats.hpp>
#include <specdec/types.hpp>
#include <specdec/verify/result.hpp>
#include <string>
#include <vector>

#include "support/chi_square.hpp"

namespace specdec::test {

/// The index of the window of `width` tokens ending at seq[end - 1], oldest most significant.
inline std::size_t window_index(std::span<const token_id> seq, std::size_t end, std::size_t v,
                                std::size_t width) {
  std::size_t index = 0;
  for (std::size_t i = end - width; i < end; ++i)
    index = index * v + static_cast<std::size_t>(seq[i]);
  return index;
}

/// For each generated position j < length: P(window of `width` tokens ending at j = cell), by
/// enumerating every sequence of `length` tokens after `context` (V^length leaves: 4^9 = 262144).
/// `next(seq, p)` writes the target's next-token probabilities after seq (context included).
/// context.size() must be at least width - 1.
template <class NextProbs>
std::vector<std::vector<double>> exact_window_laws(NextProbs&& next, std::vector<token_id> context,
                                                   std::size_t v, std::size_t length,
                                                   std::size_t width) {
  std::size_t cells = 1;
  for (std::size_t i = 0; i < width; ++i) cells *= v;
  std::vector<std::vector<double>> laws(length, std::vector<double>(cells, 0.0));
  const std::size_t start = context.size();
  std::vector<std::vector<double>> p(length, std::vector<double>(v));  // one row per depth
  const auto walk = [&](auto& self, double mass) -> void {
    const std::size_t j = context.size() - start;
    next(std::span<const token_id>(context), p[j]);
    for (std::size_t t = 0; t < v; ++t) {
      const double m = mass * p[j][t];
      if (m <= 0.0) continue;
      context.push_back(static_cast<token_id>(t));
      laws[j][window_index(context, context.size(), v, width)] += m;
      if (j + 1 < length) self(self, m);
      context.pop_back();
    }
  };
  walk(walk, 1.0);
  return laws;
}

/// Windows counted over sampled runs, one table per position, in exact_window_laws' order.
struct window_counts {
  std::size_t v = 0, width = 0;
  std::vector<std::vector<std::size_t>> counts;

  window_counts(std::size_t vocab, std::size_t length, std::size_t w) : v(vocab), width(w) {
    std::size_t cells = 1;
    for (std::size_t i = 0; i < w; ++i) cells *= vocab;
    counts.assign(length, std::vector<std::size_t>(cells, 0));
  }
  /// Counts the first `length` generated tokens of `generated` after `context`.
  void add(std::span<const token_id> context, std::span<const token_id> generated) {
    std::vector<token_id> seq(context.begin(), context.end());
    seq.insert(seq.end(), generated.begin(), generated.end());
    for (std::size_t j = 0; j < counts.size(); ++j)
      counts[j][window_index(seq, context.size() + j + 1, v, width)]++;
  }
};

/// Chi-square of every position's window against its exact law.
struct position_verdict {
  std::vector<chi_square_result> at;
  bool pass() const {
    return std::all_of(at.begin(), at.end(), [](const auto& r) { return r.pass(); });
  }
  /// The largest statistic / critical over the positions (> 1 means a failure).
  double worst_ratio() const {
    double w = 0.0;
    for (const auto& r : at) w = std::max(w, r.statistic / r.critical);
    return w;
  }
  std::string describe() const {
    std::string s;
    for (std::size_t j = 0; j < at.size(); ++j)
      s += "position " + std::to_string(j) + ": " + at[j].describe() + "\n";
    return s;
  }
};

/// chi_square after pooling every cell whose expected count is below `min_expected` into one
/// (cells of probability 0 stay apart, so a count there still fails outright). Pearson's
/// statistic follows chi-square in its far tail (the 1e-4 the tests use) only when every
/// expected count is well above chi_square's own floor of 5: a cell expecting 5 that sees 17
/// adds 29 on its own, which happens far more often than the nominal level says.
inline chi_square_result chi_square_pooled(std::span<const std::size_t> counts,
                                           std::span<const double> probs,
                                           double min_expected = 25.0) {
  std::size_t n = 0;
  for (auto c : counts) n += c;
  std::vector<std::size_t> c2;
  std::vector<double> p2;
  std::size_t pooled_count = 0;
  double pooled_prob = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] > 0.0 && probs[i] * static_cast<double>(n) < min_expected) {
      pooled_count += counts[i];
      pooled_prob += probs[i];
    } else {
      c2.push_back(counts[i]);
      p2.push_back(probs[i]);
    }
  }
  if (pooled_prob > 0.0) {
    c2.push_back(pooled_count);
    p2.push_back(pooled_prob);
  }
  return chi_square(c2, p2);
}

inline position_verdict check_positions(const window_counts& got,
                                        const std::vector<std::vector<double>>& laws) {
  position_verdict out;
  for (std::size_t j = 0; j < laws.size(); ++j)
    out.at.push_back(chi_square_pooled(got.counts[j], laws[j]));
  return out;
}

/// What the runs of a decoder-level test reached: decode_stats' per-position and per-depth
/// counters added over all runs.
struct depth_reached {
  std::vector<std::size_t> drafted_at, accepted_at;  ///< chain positions (a tree: its depth)
  std::vector<std::size_t> offered_at_depth, accepted_at_depth;  ///< summed over ranks
  std::size_t runs = 0;

  void add(const decode_stats& s) {
    ++runs;
    const auto sum_into = [](std::vector<std::size_t>& to, std::span<const std::size_t> from) {
      if (to.size() < from.size()) to.resize(from.size());
      for (std::size_t i = 0; i < from.size(); ++i) to[i] += from[i];
    };
    sum_into(drafted_at, s.drafted_at);
    sum_into(accepted_at, s.accepted_at);
    std::vector<std::size_t> offered, accepted;
    for (const auto& row : s.offered_at_rank) {
      std::size_t n = 0;
      for (std::size_t c : row) n += c;
      offered.push_back(n);
    }
    for (const auto& row : s.accepted_at_rank) {
      std::size_t n = 0;
      for (std::size_t c : row) n += c;
      accepted.push_back(n);
    }
    sum_into(offered_at_depth, offered);
    sum_into(accepted_at_depth, accepted);
  }
};

/// A chain verifier as the simulator calls it: verify(target rows, drafts, q rows or none, sp,
/// gen) -> verify_result, like verify_rejection and verify_block.
///
/// simulate_chain: one sampled generation of `length` tokens after `context`, step by step as the
/// decoder does it: K' = min(K, tokens still to emit - 1) drafts, each drawn from
/// draft_probs(seq, q_row) after the drafts before it (or, when one_hot, its argmax: a
/// deterministic proposal, no q rows), the target's logits rows target_logits(seq, row) for
/// the K' + 1 positions, then `verify`, then the accepted drafts and the verifier's token are
/// emitted. Returns the generated tokens; `depth` counts the drafted and accepted positions.
struct chain_sim_options {
  std::size_t vocab = 3;
  std::size_t draft_length = 8;
  std::size_t length = 9;
  bool one_hot = false;
  sampling_params sampling;
};

struct chain_depth {
  std::vector<std::size_t> drafted_at, accepted_at;
};

template <class TargetLogits, class DraftProbs, class Verify>
std::vector<token_id> simulate_chain(TargetLogits&& target_logits, DraftProbs&& draft_probs,
                                     Verify&& verify, std::span<const token_id> context,
                                     const chain_sim_options& o, rng& gen, chain_depth& depth) {
  const std::size_t v = o.vocab;
  const auto V = static_cast<Eigen::Index>(v);
  std::vector<token_id> seq(context.begin(), context.end());
  std::vector<token_id> drafts;
  std::vector<float> qrow(v);
  row_matrix target, q;
  if (depth.drafted_at.size() < o.draft_length) {
    depth.drafted_at.resize(o.draft_length);
    depth.accepted_at.resize(o.draft_length);
  }
  while (seq.size() - context.size() < o.length) {
    const std::size_t remaining = o.length - (seq.size() - context.size());
    const std::size_t k = std::min(o.draft_length, remaining - 1);
    drafts.clear();
    q.resize(o.one_hot ? 0 : static_cast<Eigen::Index>(k), V);
    target.resize(static_cast<Eigen::Index>(k + 1), V);
    std::vector<token_id> ext = seq;
    for (std::size_t i = 0; i <= k; ++i) {
      target_logits(std::span<const token_id>(ext),
                    std::span<float>(target.row(static_cast<Eigen::Index>(i)).data(), v));
      if (i == k) break;
      draft_probs(std::span<const token_id>(ext), std::span<float>(qrow));
      token_id x;
      if (o.one_hot) {
        x = argmax(qrow);
      } else {
        x = sample(qrow, gen);
        for (std::size_t c = 0; c < v; ++c)
          q(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(c)) = qrow[c];
      }
      drafts.push_back(x);
      ext.push_back(x);
    }
    const logits_view tv(target.data(), target.rows(), V), qv(q.data(), q.rows(), V);
    const verify_result r = verify(tv, std::span<const token_id>(drafts), qv, o.sampling, gen);
    for (std::size_t i = 0; i < k; ++i) depth.drafted_at[i] += 1;
    for (std::size_t i = 0; i < r.accepted; ++i) depth.accepted_at[i] += 1;
    seq.insert(seq.end(), drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(r.accepted));
    seq.push_back(r.next);
  }
  seq.resize(context.size() + o.length);  // the last step may emit past `length`
  return {seq.begin() + static_cast<std::ptrdiff_t>(context.size()), seq.end()};
}

/// P(accepted = i), i = 0..K, for token-wise verification of K drafts whose rows do not depend
/// on the drafted prefix: with a_j = sum_x min(p_j(x), q_j(x)) (a_j = p_j(d_j) for a fixed
/// one-hot draft d_j), P(i) = a_0 ... a_{i-1} (1 - a_i) for i < K and a_0 ... a_{K-1} for K.
inline std::vector<double> accepted_length_law(std::span<const double> a) {
  std::vector<double> law;
  double run = 1.0;
  for (double aj : a) {
    law.push_back(run * (1.0 - aj));
    run *= aj;
  }
  law.push_back(run);
  return law;
}

/**
 * The negative control: token-wise verification with a deliberate bias of `epsilon` in the
 * acceptance test (accept x when u < p(x) / q(x) + epsilon), otherwise a plain copy of the rule
 * (warp each row, residual norm(max(0, p - q)) or p without x for one-hot drafts, bonus token
 * from the last row). It is NOT lossless: the tests must reject it.
 */
struct biased_rejection {
  double epsilon = 0.01;

  verify_result operator()(logits_view target, std::span<const token_id> drafts, logits_view q,
                           const sampling_params& sp, rng& gen) const {
    const std::size_t v = static_cast<std::size_t>(target.cols());
    std::vector<float> p(v), res(v);
    const auto row = [&](const logits_view& m, std::size_t i) {
      return std::span<const float>(m.row(static_cast<Eigen::Index>(i)).data(), v);
    };
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      warp(row(target, i), sp, p);
      const auto x = static_cast<std::size_t>(drafts[i]);
      const double qx = q.rows() == 0 ? 1.0 : static_cast<double>(row(q, i)[x]);
      if (gen.uniform_open() < static_cast<double>(p[x]) / qx + epsilon) continue;
      double mass = 0.0;
      for (std::size_t c = 0; c < v; ++c) {
        const double qc = q.rows() == 0 ? (c == x ? 1.0 : 0.0) : static_cast<double>(row(q, i)[c]);
        res[c] = static_cast<float>(std::max(0.0, static_cast<double>(p[c]) - qc));
        mass += res[c];
      }
      return {i, sample(mass > 0.0 ? std::span<const float>(res) : std::span<const float>(p), gen)};
    }
    warp(row(target, drafts.size()), sp, p);
    return {drafts.size(), sample(p, gen)};
  }
};

}  // namespace specdec::test
