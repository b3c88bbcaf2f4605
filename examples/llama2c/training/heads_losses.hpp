// llama2c/training/heads_losses.hpp - what the heads trainer (heads_train.hpp) minimises: the Medusa and
// EAGLE-style losses with their hand-written gradients, generic in the scalar so that
// tests/llama2c/heads_train_test.cpp checks them in double against finite differences, and Adam.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

namespace specdec::llama2c::train {

/// Row-major dynamic matrices of S: the trainers' parameters, gradients and hidden rows.
template <class S>
using mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// SiLU and its derivative, elementwise.
template <class S>
mat<S> silu(const mat<S>& z) {
  return (z.array() / (S(1) + (-z.array()).exp())).matrix();
}
template <class S>
mat<S> silu_grad(const mat<S>& z) {
  const auto sig = (S(1) / (S(1) + (-z.array()).exp()));
  return (sig * (S(1) + z.array() * (S(1) - sig))).matrix();
}

/// Row-wise softmax, in place.
template <class S>
void softmax_rows(mat<S>& l) {
  for (Eigen::Index i = 0; i < l.rows(); ++i) {
    l.row(i).array() -= l.row(i).maxCoeff();
    l.row(i) = l.row(i).array().exp().matrix();
    l.row(i) /= l.row(i).sum();
  }
}

/// Mean cross-entropy of softmax(logits) against labels (-1: skipped) and, in `dlogits`, its
/// gradient. Returns {loss sum, counted rows}.
template <class S>
std::pair<S, std::size_t> cross_entropy(mat<S> logits, std::span<const int> labels,
                                        mat<S>& dlogits) {
  softmax_rows(logits);
  S loss = 0;
  std::size_t n = 0;
  dlogits = logits;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const int y = labels[static_cast<std::size_t>(i)];
    if (y < 0) {
      dlogits.row(i).setZero();
      continue;
    }
    loss -= std::log(std::max(logits(i, y), S(1e-30)));
    dlogits(i, y) -= S(1);
    ++n;
  }
  return {loss, n};
}

/// Soft cross-entropy -sum_x p(x) log q(x) summed over the rows, with p = softmax(target / t)
/// (the target model's own distribution at temperature t) and q = softmax(logits / t), and in
/// `dlogits` its gradient, (q - p) / t per row. Distillation at the temperature of use: the loss
/// is smallest where q_t = p_t, which makes acceptance, sum_x min(p_t(x), q_t(x)), 1.
template <class S>
S soft_cross_entropy(const mat<S>& logits, const mat<S>& target, S t, mat<S>& dlogits) {
  mat<S> q = logits / t, p = target / t;
  softmax_rows(q);
  softmax_rows(p);
  S loss = 0;
  for (Eigen::Index i = 0; i < q.rows(); ++i)
    for (Eigen::Index j = 0; j < q.cols(); ++j)
      if (p(i, j) > S(0)) loss -= p(i, j) * std::log(std::max(q(i, j), S(1e-30)));
  dlogits = (q - p) / t;
  return loss;
}

/// What the EAGLE-style loss distils from the target besides the sampled labels: `weight` in
/// [0, 1] of the cross-entropy moves from the label to the target's own distribution at
/// `temperature` (soft_cross_entropy); 0 = labels only.
template <class S>
struct distill_options {
  S weight = 0;
  S temperature = 1;
};

/// One Medusa head's parameters: r = x + SiLU(x W^T + b), logits = r C^T (C empty: shared).
template <class S>
struct medusa_params {
  mat<S> w, b, c;
};

/// Mean cross-entropy of a head over the rows of `x` (n x d) against `labels` (n; -1 skipped),
/// with the shared classifier `shared` when p.c is empty; adds the gradients to `g` (same
/// shapes as p) when given.
template <class S>
S medusa_loss(const medusa_params<S>& p, const mat<S>& x, std::span<const int> labels,
              const mat<S>& shared, medusa_params<S>* g) {
  const mat<S>& c = p.c.size() ? p.c : shared;
  const mat<S> z = (x * p.w.transpose()).rowwise() + p.b.row(0);
  const mat<S> r = x + silu(z);
  mat<S> dl;
  auto [loss, n] = cross_entropy<S>(r * c.transpose(), labels, dl);
  if (n == 0) return S(0);
  dl /= static_cast<S>(n);
  if (g) {
    if (p.c.size()) g->c += dl.transpose() * r;
    const mat<S> dz = (dl * c).cwiseProduct(silu_grad(z));
    g->w += dz.transpose() * x;
    g->b += dz.colwise().sum();
  }
  return loss / static_cast<S>(n);
}

/// The EAGLE-style predictor's parameters (eagle_head.hpp): f' = f + SiLU([f, e] W1^T + b1) W2^T + b2.
template <class S>
struct eagle_params {
  mat<S> w1, b1, w2, b2;
};

/// Mean over the rows of: cross-entropy of (f' C^T) against `labels` + `regression` x
/// |f' - target|^2; f, e, target are n x d. Adds the gradients to `g` when given.
template <class S>
S eagle_loss(const eagle_params<S>& p, const mat<S>& f, const mat<S>& e, const mat<S>& target,
             std::span<const int> labels, const mat<S>& classifier, S regression,
             eagle_params<S>* g, distill_options<S> distill = {}) {
  const Eigen::Index d = f.cols();
  mat<S> u(f.rows(), 2 * d);
  u << f, e;
  const mat<S> z = (u * p.w1.transpose()).rowwise() + p.b1.row(0);
  const mat<S> s = silu(z);
  const mat<S> next = (f + s * p.w2.transpose()).rowwise() + p.b2.row(0);
  mat<S> dl;
  const mat<S> logits = next * classifier.transpose();
  auto [ce, n] = cross_entropy<S>(logits, labels, dl);
  const S rows = static_cast<S>(f.rows());
  const mat<S> diff = next - target;
  S loss = ce / rows + regression * diff.squaredNorm() / rows;
  (void)n;
  if (distill.weight > S(0)) {  // the label's share moves to the target's distribution
    mat<S> ds;
    const S soft = soft_cross_entropy<S>(logits, target * classifier.transpose(),
                                         distill.temperature, ds);
    loss += distill.weight * (soft - ce) / rows;
    dl = (S(1) - distill.weight) * dl + distill.weight * ds;
  }
  if (g) {
    const mat<S> dnext = (dl * classifier + S(2) * regression * diff) / rows;
    g->w2 += dnext.transpose() * s;
    g->b2 += dnext.colwise().sum();
    const mat<S> dz = (dnext * p.w2).cwiseProduct(silu_grad(z));
    g->w1 += dz.transpose() * u;
    g->b1 += dz.colwise().sum();
  }
  return loss;
}

/// Adam (Kingma & Ba) on a list of matrices.
struct adam {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  std::vector<mat<float>> m, v;
  std::size_t t = 0;
  void step(std::span<mat<float>* const> params, std::span<mat<float>* const> grads) {
    if (m.empty())
      for (auto* p : params) {
        m.push_back(mat<float>::Zero(p->rows(), p->cols()));
        v.push_back(mat<float>::Zero(p->rows(), p->cols()));
      }
    ++t;
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(t));
    for (std::size_t i = 0; i < params.size(); ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * *grads[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * grads[i]->cwiseAbs2();
      params[i]->array() -=
          lr * (m[i].array() / c1) / ((v[i].array() / c2).sqrt() + eps);
    }
  }
};

}  // namespace specdec::llama2c::train
