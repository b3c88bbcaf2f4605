// llama2c/training/eagle_attn_train.hpp - the EAGLE-style predictor with one causal attention layer over
// the features of the sequence so far (beside the MLP alone, heads_train.hpp): its loss with
// hand-written gradients (checked against finite differences in
// tests/llama2c/heads_train_test.cpp), training on whole sequences, the held-out accuracy by
// drafted depth, and the heads record it becomes (specdec::eagle_weights with its attention).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <span>
#include <specdec/math/rng.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llama2c/training/heads_train.hpp"
#include "llama2c/engine/model.hpp"

namespace specdec::llama2c::train {

/**
 * The predictor with attention. At each position p of a sequence, u_p = [f_p, e_{p+1}] (the
 * feature at p and the embedding of the token after it) and
 *
 *     f'_p = f_p + MLP(u_p) + Wo [a_1 ... a_H]_p,
 *     a_h  = softmax_causal(R(q_h) R(k_h)^T / sqrt(w)) v_h,   q = u Wq^T, k = u Wk^T, v = u Wv^T
 *
 * with MLP the EAGLE-style block of eagle_params (f' - f without attention), H heads of width w
 * (q, k, v: columns [h w, (h + 1) w) for head h), R the rotary position encoding of llama2.c
 * (pairs (2i, 2i + 1) turned by p 10000^(-2i/w)) when `rope`, the identity otherwise.
 */
template <class S>
struct eagle_attn_params {
  eagle_params<S> mlp;
  mat<S> wq, wk, wv;      ///< (H w) x 2d
  mat<S> wo;              ///< d x (H w)
  std::size_t heads = 1;  ///< 0: no attention (the MLP alone, a control)
  bool rope = true;

  /// Width of one head.
  Eigen::Index width() const noexcept {
    return heads ? wq.rows() / static_cast<Eigen::Index>(heads) : 0;
  }
};

/// Rows [begin, begin + length) of a batch: positions 0 .. length - 1 of one sequence, each
/// attending to those before it in the same segment.
struct segment {
  std::size_t begin = 0, length = 0;
};

/// Turns each head's pairs of `x` (rows at `positions`) by the rotary angles; `inverse` turns
/// them back (the transpose, for the gradient). O(rows x columns).
template <class S>
void rotate(mat<S>& x, std::span<const std::size_t> positions, std::size_t heads, bool inverse) {
  if (heads == 0) return;
  const Eigen::Index w = x.cols() / static_cast<Eigen::Index>(heads);
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double pos = static_cast<double>(positions[static_cast<std::size_t>(r)]);
    for (Eigen::Index i = 0; i < w / 2; ++i) {
      const double angle =
          pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(w));
      const S c = static_cast<S>(std::cos(angle));
      const S s = static_cast<S>(inverse ? -std::sin(angle) : std::sin(angle));
      for (Eigen::Index h = 0; h < static_cast<Eigen::Index>(heads); ++h) {
        const Eigen::Index j = h * w + 2 * i;
        const S a = x(r, j), b = x(r, j + 1);
        x(r, j) = a * c - b * s;
        x(r, j + 1) = a * s + b * c;
      }
    }
  }
}

/**
 * Mean over the rows with a label (labels[i] >= 0; the others are context only) of the
 * cross-entropy of (f' C^T) against the label + `regression` x |f' - target|^2, f' by the
 * attention predictor over the segments `segs` (which cover the rows of f, e, target in order).
 * Adds the gradients to `g` when given (same shapes as p); writes f' to `prediction` when given.
 * O(n d (3m + 5 H w) + sum over segments of length^2 H w).
 */
template <class S>
S eagle_attn_loss(const eagle_attn_params<S>& p, const mat<S>& f, const mat<S>& e,
                  const mat<S>& target, std::span<const int> labels, std::span<const segment> segs,
                  const mat<S>& classifier, S regression, eagle_attn_params<S>* g,
                  mat<S>* prediction = nullptr) {
  const Eigen::Index n = f.rows(), d = f.cols(), w = p.width();
  const auto H = static_cast<Eigen::Index>(p.heads);
  std::vector<std::size_t> positions(static_cast<std::size_t>(n), 0);
  for (const auto& sg : segs)
    for (std::size_t j = 0; j < sg.length; ++j) positions[sg.begin + j] = j;
  mat<S> u(n, 2 * d);
  u << f, e;
  // The MLP.
  const mat<S> z = (u * p.mlp.w1.transpose()).rowwise() + p.mlp.b1.row(0);
  const mat<S> s = silu(z);
  // The attention.
  mat<S> q = u * p.wq.transpose(), k = u * p.wk.transpose();
  const mat<S> v = u * p.wv.transpose();
  if (p.rope) {
    rotate<S>(q, positions, p.heads, false);
    rotate<S>(k, positions, p.heads, false);
  }
  const S scale = S(1) / std::sqrt(static_cast<S>(w));
  mat<S> a = mat<S>::Zero(n, H * w);
  std::vector<mat<S>> probs;  // per segment, per head: the attention weights
  for (const auto& sg : segs) {
    const auto b = static_cast<Eigen::Index>(sg.begin), L = static_cast<Eigen::Index>(sg.length);
    for (Eigen::Index h = 0; h < H; ++h) {
      mat<S> sc = q.block(b, h * w, L, w) * k.block(b, h * w, L, w).transpose() * scale;
      for (Eigen::Index i = 0; i < L; ++i) {
        const S top = sc.row(i).head(i + 1).maxCoeff();
        sc.row(i).head(i + 1) = (sc.row(i).head(i + 1).array() - top).exp().matrix();
        sc.row(i).head(i + 1) /= sc.row(i).head(i + 1).sum();
        sc.row(i).tail(L - i - 1).setZero();
      }
      a.block(b, h * w, L, w) = sc * v.block(b, h * w, L, w);
      probs.push_back(std::move(sc));
    }
  }
  const mat<S> next =
      ((f + s * p.mlp.w2.transpose() + a * p.wo.transpose()).rowwise() + p.mlp.b2.row(0));
  if (prediction) *prediction = next;
  // The loss over the labelled rows.
  mat<S> dl;
  auto [ce, counted] = cross_entropy<S>(next * classifier.transpose(), labels, dl);
  if (counted == 0) return S(0);
  const S rows = static_cast<S>(counted);
  mat<S> diff = next - target;
  for (Eigen::Index i = 0; i < n; ++i)
    if (labels[static_cast<std::size_t>(i)] < 0) diff.row(i).setZero();
  const S loss = ce / rows + regression * diff.squaredNorm() / rows;
  if (!g) return loss;
  const mat<S> dnext = (dl * classifier + S(2) * regression * diff) / rows;
  // MLP.
  g->mlp.w2 += dnext.transpose() * s;
  g->mlp.b2 += dnext.colwise().sum();
  const mat<S> dz = (dnext * p.mlp.w2).cwiseProduct(silu_grad(z));
  g->mlp.w1 += dz.transpose() * u;
  g->mlp.b1 += dz.colwise().sum();
  // Attention: da, then through the weights to q, k, v.
  g->wo += dnext.transpose() * a;
  const mat<S> da = dnext * p.wo;
  mat<S> dq = mat<S>::Zero(n, H * w), dk = mat<S>::Zero(n, H * w), dv = mat<S>::Zero(n, H * w);
  std::size_t at = 0;
  for (const auto& sg : segs) {
    const auto b = static_cast<Eigen::Index>(sg.begin), L = static_cast<Eigen::Index>(sg.length);
    for (Eigen::Index h = 0; h < H; ++h) {
      const mat<S>& pr = probs[at++];
      const auto dah = da.block(b, h * w, L, w);
      dv.block(b, h * w, L, w) = pr.transpose() * dah;
      const mat<S> dp = dah * v.block(b, h * w, L, w).transpose();
      // softmax: ds_ij = p_ij (dp_ij - sum_l p_il dp_il); masked entries have p = 0.
      const Eigen::Matrix<S, Eigen::Dynamic, 1> inner = pr.cwiseProduct(dp).rowwise().sum();
      const mat<S> ds = (pr.array() * (dp.colwise() - inner).array()).matrix() * scale;
      dq.block(b, h * w, L, w) = ds * k.block(b, h * w, L, w);
      dk.block(b, h * w, L, w) = ds.transpose() * q.block(b, h * w, L, w);
    }
  }
  if (p.rope) {
    rotate<S>(dq, positions, p.heads, true);
    rotate<S>(dk, positions, p.heads, true);
  }
  g->wq += dq.transpose() * u;
  g->wk += dk.transpose() * u;
  g->wv += dv.transpose() * u;
  return loss;
}

/**
 * One drafted step: f' for the row u = [f, e] at position `pos`, attending to the rotated keys
 * and the values of rows [0, pos) of `keys` / `values` and to its own, which it writes as row
 * `pos` (both must have more than `pos` rows). O(d (3m + 5 H w) + pos H w).
 */
template <class S>
Eigen::Matrix<S, 1, Eigen::Dynamic> eagle_attn_step(const eagle_attn_params<S>& p,
                                                    const Eigen::Matrix<S, 1, Eigen::Dynamic>& f,
                                                    const Eigen::Matrix<S, 1, Eigen::Dynamic>& e,
                                                    std::size_t pos, mat<S>& keys, mat<S>& values) {
  const Eigen::Index d = f.size(), w = p.width(), P = static_cast<Eigen::Index>(pos);
  mat<S> u(1, 2 * d);
  u << f, e;
  const mat<S> z = (u * p.mlp.w1.transpose()) + p.mlp.b1;
  mat<S> q = u * p.wq.transpose(), k = u * p.wk.transpose();
  const std::size_t at[1] = {pos};
  if (p.rope) {
    rotate<S>(q, at, p.heads, false);
    rotate<S>(k, at, p.heads, false);
  }
  keys.row(P) = k.row(0);
  values.row(P) = u * p.wv.transpose();
  const S scale = S(1) / std::sqrt(static_cast<S>(w));
  mat<S> a(1, q.cols());
  for (Eigen::Index h = 0; h < static_cast<Eigen::Index>(p.heads); ++h) {
    Eigen::Matrix<S, 1, Eigen::Dynamic> sc =
        q.block(0, h * w, 1, w) * keys.block(0, h * w, P + 1, w).transpose() * scale;
    sc = (sc.array() - sc.maxCoeff()).exp().matrix();
    sc /= sc.sum();
    a.block(0, h * w, 1, w) = sc * values.block(0, h * w, P + 1, w);
  }
  return f + silu(z) * p.mlp.w2.transpose() + a * p.wo.transpose() + p.mlp.b2;
}

/// The attention layer's shape: H heads of width w (even when rotated); H = 0 trains the MLP
/// alone the same way (on whole sequences), a control for the batching.
struct attn_options {
  std::size_t heads = 4, width = 16;
  bool rope = true;
};

/// Throws std::invalid_argument unless a layer with heads has a positive width, even under
/// rotary positions. O(1).
inline void check_attn_options(const attn_options& ao) {
  if (ao.heads > 0 && (ao.width == 0 || (ao.rope && ao.width % 2 != 0)))
    throw std::invalid_argument("eagle-attn: the head width must be positive, and even with "
                                "rotary positions (width = " + std::to_string(ao.width) + ")");
}

/**
 * Trains the attention predictor on `corpus` with the options of the EAGLE MLP (`o.inner`,
 * `o.regression`, `o.batch`, `o.steps`, `o.seconds`, `o.lr`, `o.seed`, `o.held_out`,
 * `o.depths`; `o.noise` is not applied) and fills `report` with the held-out top-1/top-5 per
 * drafted depth, measured as train_heads measures the MLP's: the true features for the context,
 * the predictor's own for the drafted positions, and the greedy chains' accepted drafts as
 * train_heads does. A step holds `o.batch` labelled positions taken from whole sequences in a
 * shuffled order; a sequence cut by the batch end continues in the next step with its earlier
 * positions as context (attended to, not scored). The MLP part starts from the same random
 * numbers as train_heads' for the seed (equal up to float rounding); Wo starts at zero.
 * Deterministic for a seed when the step bound ends training.
 */
inline eagle_attn_params<float> train_eagle_attn(
    const model& target, const std::vector<sequence>& corpus, const train_options& o,
    const attn_options& ao, train_report& report,
    const std::function<void(std::size_t, float)>& progress = {}) {
  detail::step_log bookkeeping(report, progress);
  check_attn_options(ao);
  const std::size_t d = target.cfg().dim;
  const auto D = static_cast<Eigen::Index>(d);
  const auto split =
      static_cast<std::size_t>(static_cast<double>(corpus.size()) * (1.0 - o.held_out));
  // A sequence of size n gives rows p = 0 .. n - 3: u_p = [h_p, e(token p+1)], label token p+2.
  const auto labelled = [&](std::size_t s) {
    return corpus[s].tokens.size() > 2 ? corpus[s].tokens.size() - 2 : 0;
  };
  std::vector<std::size_t> order;
  report = {};
  for (std::size_t s = 0; s < split; ++s)
    if (labelled(s)) {
      order.push_back(s);
      report.train_positions += labelled(s);
    }
  for (std::size_t s = split; s < corpus.size(); ++s) report.held_out_positions += labelled(s);
  if (order.empty())
    throw std::invalid_argument("train_eagle_attn: the corpus has no training examples");
  const mat<float> classifier = target.shared_weights()->classifier();
  const mat<float> embedding = target.shared_weights()->token_embedding();
  rng gen(o.seed);
  const auto uniform = [&](mat<float>& m, float bound) {
    for (Eigen::Index i = 0; i < m.size(); ++i)
      m.data()[i] = bound * static_cast<float>(2.0 * gen.uniform_open() - 1.0);
  };
  const auto M = static_cast<Eigen::Index>(o.inner);
  const auto A = static_cast<Eigen::Index>(ao.heads * ao.width);
  eagle_attn_params<float> p, g;
  p.heads = g.heads = ao.heads;
  p.rope = g.rope = ao.rope;
  const float bound = std::sqrt(3.0f) / std::sqrt(static_cast<float>(2 * d));
  p.mlp.w1.resize(M, 2 * D);
  uniform(p.mlp.w1, bound);  // first, as train_heads does: the same draws for the seed
  p.mlp.b1 = mat<float>::Zero(1, M);
  p.mlp.w2 = mat<float>::Zero(D, M);
  p.mlp.b2 = mat<float>::Zero(1, D);
  for (auto* m : {&p.wq, &p.wk, &p.wv}) {
    m->resize(A, 2 * D);
    uniform(*m, bound);
  }
  p.wo = mat<float>::Zero(D, A);
  g.mlp = {mat<float>::Zero(M, 2 * D), mat<float>::Zero(1, M), mat<float>::Zero(D, M),
           mat<float>::Zero(1, D)};
  g.wq = g.wk = g.wv = mat<float>::Zero(A, 2 * D);
  g.wo = mat<float>::Zero(D, A);
  std::vector<mat<float>*> params{&p.mlp.w1, &p.mlp.b1, &p.mlp.w2, &p.mlp.b2,
                                  &p.wq,     &p.wk,     &p.wv,     &p.wo};
  std::vector<mat<float>*> grads{&g.mlp.w1, &g.mlp.b1, &g.mlp.w2, &g.mlp.b2,
                                 &g.wq,     &g.wk,     &g.wv,     &g.wo};
  adam opt;
  opt.lr = o.lr;

  std::size_t next_seq = order.size(), offset = 0;  // where the next step continues
  const auto shuffle = [&] {
    for (std::size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[static_cast<std::size_t>(gen() % i)]);
    next_seq = 0;
  };
  mat<float> f, e, tgt;
  std::vector<int> labels;
  std::vector<segment> segs;
  for (std::size_t step = 0; step < o.steps; ++step) {
    if (bookkeeping.out_of_time(o.seconds)) break;
    // Gather: whole segments from position 0, labelled from `offset` on.
    segs.clear();
    std::size_t rows = 0, scored = 0;
    std::vector<std::pair<std::size_t, std::size_t>> taken;  // (sequence, first scored row)
    while (scored < o.batch) {
      if (next_seq >= order.size()) shuffle();
      const std::size_t s = order[next_seq];
      const std::size_t end = std::min(labelled(s), offset + (o.batch - scored));
      segs.push_back({rows, end});
      taken.emplace_back(s, offset);
      rows += end;
      scored += end - offset;
      if (end == labelled(s)) {
        ++next_seq;
        offset = 0;
      } else {
        offset = end;
      }
    }
    const auto R = static_cast<Eigen::Index>(rows);
    f.resize(R, D);
    e.resize(R, D);
    tgt.resize(R, D);
    labels.assign(rows, -1);
    for (std::size_t j = 0; j < segs.size(); ++j) {
      const sequence& q = corpus[taken[j].first];
      const auto b = static_cast<Eigen::Index>(segs[j].begin);
      const auto L = static_cast<Eigen::Index>(segs[j].length);
      f.middleRows(b, L) = q.hidden.topRows(L);
      tgt.middleRows(b, L) = q.hidden.middleRows(1, L);
      for (Eigen::Index i = 0; i < L; ++i) {
        e.row(b + i) = embedding.row(q.tokens[static_cast<std::size_t>(i) + 1]);
        if (static_cast<std::size_t>(i) >= taken[j].second)
          labels[static_cast<std::size_t>(b + i)] = q.tokens[static_cast<std::size_t>(i) + 2];
      }
    }
    for (auto* m : grads) m->setZero();
    const float loss =
        eagle_attn_loss<float>(p, f, e, tgt, labels, segs, classifier, o.regression, &g);
    opt.step(params, grads);
    bookkeeping.done(step, loss);
  }
  bookkeeping.finish();

  // Held out: from position t (true features at 0..t), depth j drafts positions t+1 .. t+j on
  // its own predicted features and is scored against token t + j + 1, as for the MLP.
  using row = Eigen::Matrix<float, 1, Eigen::Dynamic>;
  detail::held_out_tally tally(o.depths, 5);
  for (std::size_t s = split; s < corpus.size(); ++s) {
    const sequence& q = corpus[s];
    const std::size_t n = labelled(s);
    if (n == 0) continue;
    const auto N = static_cast<Eigen::Index>(n);
    mat<float> u(N, 2 * D);
    for (Eigen::Index i = 0; i < N; ++i)
      u.row(i) << q.hidden.row(i), embedding.row(q.tokens[static_cast<std::size_t>(i) + 1]);
    mat<float> true_keys = u * p.wk.transpose();
    const mat<float> true_values = u * p.wv.transpose();
    if (p.rope) {
      std::vector<std::size_t> positions(n);
      for (std::size_t i = 0; i < n; ++i) positions[i] = i;
      rotate<float>(true_keys, positions, p.heads, false);
    }
    mat<float> keys(N + static_cast<Eigen::Index>(o.depths), A), values(keys.rows(), A);
    for (std::size_t t = 0; t < n; ++t) {
      const auto T = static_cast<Eigen::Index>(t);
      keys.topRows(T) = true_keys.topRows(T);
      values.topRows(T) = true_values.topRows(T);
      row feature = q.hidden.row(T);
      tally.start(q.greedy_chain(t, o.depths));
      for (std::size_t j = 0; j < o.depths; ++j) {
        const std::size_t at = t + j + 2;
        if (at >= q.tokens.size()) break;
        const row emb = embedding.row(q.tokens[at - 1]);
        feature = eagle_attn_step<float>(p, feature, emb, t + j, keys, values);
        const row logits = feature * classifier.transpose();
        tally.record(j, detail::rank_of(logits, q.tokens[at], tally.columns()));
      }
    }
  }
  tally.finish(report);
  return p;
}

/// The heads record of trained parameters: kind eagle, the MLP and the attention layer (none when
/// p.heads == 0), the held-out top-1 by depth and the training totals of `report`.
inline heads_record attn_record(const eagle_attn_params<float>& p, const model& target,
                                const train_report& report) {
  heads_record rec = eagle_record(p.mlp, target, report);
  if (p.heads > 0) {
    eagle_attention& a = rec.eagle.attention;
    a.wq = p.wq;
    a.wk = p.wk;
    a.wv = p.wv;
    a.wo = p.wo;
    a.heads = p.heads;
    a.rope = p.rope;
  }
  return rec;
}

}  // namespace specdec::llama2c::train
