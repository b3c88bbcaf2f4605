// llama2c/training/heads_train.hpp - trains draft heads on text the target generates itself
// (self-distillation): the corpus (heads_corpus.hpp), the losses with their hand-written
// gradients and Adam (heads_losses.hpp), the training loops, and the held-out accuracy.
//
// Medusa head k on the hidden row h_t learns the token at t + k + 2 (cross-entropy); the
// EAGLE-style predictor learns h_{t+1} from (h_t, embedding of token t+1): cross-entropy of the
// target's classifier on its prediction against token t + 2, plus `regression` x the squared
// error of the predicted hidden row.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <specdec/math/rng.hpp>

#include "llama2c/training/heads_corpus.hpp"
#include "llama2c/engine/heads_file.hpp"
#include "llama2c/training/heads_losses.hpp"
#include "llama2c/engine/model.hpp"

namespace specdec::llama2c::train {

struct train_options {
  heads_kind kind = heads_kind::medusa;
  std::size_t heads = 4;            ///< medusa
  bool own_classifier = true;       ///< medusa: own classifiers (from the target's) or shared
  std::size_t inner = 1024;         ///< eagle: the MLP's width
  float regression = 0.1f;          ///< eagle: weight of the hidden-state error
  float noise = 0.0f;               ///< eagle: uniform noise +-noise on the input hidden rows
  /// eagle: share of the cross-entropy taken against the target's own distribution at
  /// distill_temperature instead of the sampled label (heads_losses.hpp's distill_options).
  float distill = 0.0f;
  float distill_temperature = 1.0f;
  std::size_t batch = 256;
  std::size_t steps = 10000;        ///< Adam steps, at most
  double seconds = 540.0;           ///< wall-clock bound on the steps (a cap; steps decide)
  float lr = 2e-3f;
  std::uint64_t seed = 1;
  double held_out = 0.1;            ///< fraction of sequences kept for the accuracy
  std::size_t ranks = 10;           ///< columns of the medusa rank-accuracy table
  std::size_t depths = 6;           ///< eagle: depths measured
};

/// What a training run did and measured.
struct train_report {
  std::size_t steps = 0, train_positions = 0, held_out_positions = 0;
  double seconds = 0.0;
  float last_loss = 0.0f;
  std::vector<float> top1, top5;  ///< per head (medusa) or per depth (eagle), held out
  /// eagle: on held-out greedy text, the mean number of drafts a greedy chain of `depths` from
  /// each position gets accepted (tokens per target call - 1), over `greedy_chains` positions.
  float greedy_accepted = 0.0f;
  std::size_t greedy_chains = 0;
};

namespace detail {
// Positions usable as examples: (sequence, t) with token t + 2 in the sequence.
struct example {
  std::uint32_t seq, t;
};
inline std::vector<example> examples(const std::vector<sequence>& c, std::size_t first,
                                     std::size_t last) {
  std::vector<example> out;
  for (std::size_t s = first; s < last; ++s)
    for (std::size_t t = 0; t + 2 < c[s].tokens.size(); ++t)
      out.push_back({static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(t)});
  return out;
}
inline void shuffle(std::vector<example>& e, rng& gen) {
  for (std::size_t i = e.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(gen() % i);
    std::swap(e[i - 1], e[j]);
  }
}
// Rank of `label` in `row` (0 = the largest; ties to the lower id), capped at `cap`.
inline std::size_t rank_of(const Eigen::Ref<const Eigen::RowVectorXf>& row, int label,
                           std::size_t cap) {
  const float x = row(label);
  std::size_t rank = 0;
  for (Eigen::Index i = 0; i < row.size() && rank < cap; ++i)
    if (row(i) > x || (row(i) == x && i < label)) ++rank;
  return rank;
}

// The bookkeeping both trainers keep around their Adam steps: the wall-clock bound, the loss's
// moving average, the steps done and the progress callback every 100 steps, and the report's
// last loss and seconds (counted from construction) at the end.
class step_log {
 public:
  step_log(train_report& report, const std::function<void(std::size_t, float)>& progress)
      : report_(report), progress_(progress) {}

  bool out_of_time(double seconds) const { return elapsed() > seconds; }
  /// Step `step` (from 0) ended with `loss`.
  void done(std::size_t step, float loss) {
    average_ = step == 0 ? loss : 0.98f * average_ + 0.02f * loss;
    report_.steps = step + 1;
    if (progress_ && (step + 1) % 100 == 0) progress_(step + 1, average_);
  }
  void finish() {
    report_.last_loss = average_;
    report_.seconds = elapsed();
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  train_report& report_;
  const std::function<void(std::size_t, float)>& progress_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  float average_ = 0.0f;
};

// The held-out tally of both trainers: per head or depth k, how often the label ranked r (r <
// columns), and, on greedy text, how many drafts of each greedy chain the target accepts (the
// leading run of top-1 hits).
class held_out_tally {
 public:
  held_out_tally(std::size_t outputs, std::size_t columns)
      : table_(row_matrix::Zero(static_cast<Eigen::Index>(outputs),
                                static_cast<Eigen::Index>(columns))),
        counted_(outputs, 0) {}

  std::size_t columns() const noexcept { return static_cast<std::size_t>(table_.cols()); }
  /// A new starting position; `chain`: it starts a greedy chain that is counted.
  void start(bool chain) noexcept {
    alive_ = chain;
    chains_ += chain ? 1 : 0;
  }
  /// The label of output k ranked `rank` (rank_of, capped at columns()).
  void record(std::size_t k, std::size_t rank) noexcept {
    if (rank < columns())
      table_(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(rank)) += 1.0f;
    ++counted_[k];
    alive_ = alive_ && rank == 0;
    accepted_ += alive_ ? 1 : 0;
  }
  /// Fills report's top1, top5, greedy_chains and greedy_accepted; returns the rank table as
  /// fractions of each output's positions.
  row_matrix finish(train_report& report) {
    report.greedy_chains = chains_;
    if (chains_)
      report.greedy_accepted = static_cast<float>(accepted_) / static_cast<float>(chains_);
    for (std::size_t k = 0; k < counted_.size(); ++k) {
      const auto K = static_cast<Eigen::Index>(k);
      if (counted_[k]) table_.row(K) /= static_cast<float>(counted_[k]);
      report.top1.push_back(table_(K, 0));
      report.top5.push_back(table_.row(K).head(std::min<Eigen::Index>(5, table_.cols())).sum());
    }
    return table_;
  }

 private:
  row_matrix table_;
  std::vector<std::size_t> counted_;
  std::size_t accepted_ = 0, chains_ = 0;
  bool alive_ = false;
};
}  // namespace detail

/// The heads record of a trained EAGLE-style MLP for `target`: its weights, the held-out top-1
/// by depth and the training totals of `report` (the attention trainer adds its layer to it).
inline heads_record eagle_record(const eagle_params<float>& p, const model& target,
                                 const train_report& report) {
  heads_record rec;
  rec.kind = heads_kind::eagle;
  rec.hidden = target.cfg().dim;
  rec.vocab = target.cfg().vocab_size;
  rec.accuracy = row_matrix(1, static_cast<Eigen::Index>(report.top1.size()));
  for (std::size_t j = 0; j < report.top1.size(); ++j)
    rec.accuracy(0, static_cast<Eigen::Index>(j)) = report.top1[j];
  rec.train_tokens = static_cast<std::uint32_t>(report.train_positions);
  rec.train_seconds = static_cast<float>(report.seconds);
  rec.eagle.w1 = p.w1;
  rec.eagle.b1 = p.b1.row(0);
  rec.eagle.w2 = p.w2;
  rec.eagle.b2 = p.b2.row(0);
  rec.eagle.depth_accuracy = report.top1;
  return rec;
}

/**
 * Trains heads of `o.kind` for `target` on `corpus` and returns them as a heads file's record
 * (weights, the held-out accuracy table) with `report` filled. Deterministic for a seed when the
 * step bound ends training; `o.seconds` caps the time. `progress(step, loss)` is called every
 * 100 steps when given.
 */
inline heads_record train_heads(const model& target, const std::vector<sequence>& corpus,
                                const train_options& o, train_report& report,
                                const std::function<void(std::size_t, float)>& progress = {}) {
  detail::step_log bookkeeping(report, progress);
  const config& c = target.cfg();
  const std::size_t d = c.dim, v = c.vocab_size;
  const auto split = static_cast<std::size_t>(
      static_cast<double>(corpus.size()) * (1.0 - o.held_out));
  auto train = detail::examples(corpus, 0, split);
  const auto held = detail::examples(corpus, split, corpus.size());
  if (train.empty()) throw std::invalid_argument("train_heads: the corpus has no training examples");
  report = {};
  report.train_positions = train.size();
  report.held_out_positions = held.size();
  const auto D = static_cast<Eigen::Index>(d), V = static_cast<Eigen::Index>(v);
  const mat<float> classifier = target.shared_weights()->classifier();
  const mat<float> embedding = target.shared_weights()->token_embedding();
  rng gen(o.seed);
  heads_record rec;
  rec.kind = o.kind;
  rec.hidden = d;
  rec.vocab = v;
  const bool medusa = o.kind == heads_kind::medusa;
  const std::size_t outputs = medusa ? o.heads : o.depths;

  std::vector<medusa_params<float>> mp(medusa ? o.heads : 0), mg(mp.size());
  eagle_params<float> ep, eg;
  for (auto& p : mp) {
    p.w = mat<float>::Zero(D, D);
    p.b = mat<float>::Zero(1, D);
    if (o.own_classifier) p.c = classifier;
  }
  if (!medusa) {
    const auto M = static_cast<Eigen::Index>(o.inner);
    ep.w1.resize(M, 2 * D);
    const float s = 1.0f / std::sqrt(static_cast<float>(2 * d));
    for (Eigen::Index i = 0; i < ep.w1.size(); ++i)
      ep.w1.data()[i] = s * static_cast<float>(2.0 * gen.uniform_open() - 1.0) * std::sqrt(3.0f);
    ep.b1 = mat<float>::Zero(1, M);
    ep.w2 = mat<float>::Zero(D, M);
    ep.b2 = mat<float>::Zero(1, D);
  }
  std::vector<mat<float>*> params, grads;
  for (std::size_t k = 0; k < mp.size(); ++k) {
    mg[k] = {mat<float>::Zero(D, D), mat<float>::Zero(1, D),
             o.own_classifier ? mat<float>::Zero(V, D) : mat<float>()};
    params.insert(params.end(), {&mp[k].w, &mp[k].b});
    grads.insert(grads.end(), {&mg[k].w, &mg[k].b});
    if (o.own_classifier) {
      params.push_back(&mp[k].c);
      grads.push_back(&mg[k].c);
    }
  }
  if (!medusa) {
    eg = {mat<float>::Zero(ep.w1.rows(), ep.w1.cols()), mat<float>::Zero(1, ep.b1.cols()),
          mat<float>::Zero(D, ep.w2.cols()), mat<float>::Zero(1, D)};
    params = {&ep.w1, &ep.b1, &ep.w2, &ep.b2};
    grads = {&eg.w1, &eg.b1, &eg.w2, &eg.b2};
  }
  adam opt;
  opt.lr = o.lr;

  const std::size_t batch = std::min(o.batch, train.size());
  mat<float> x(static_cast<Eigen::Index>(batch), D), e(x.rows(), D), tgt(x.rows(), D);
  std::vector<int> labels(batch);
  std::size_t cursor = train.size();
  for (std::size_t step = 0; step < o.steps; ++step) {
    if (bookkeeping.out_of_time(o.seconds)) break;
    if (cursor + batch > train.size()) {
      detail::shuffle(train, gen);
      cursor = 0;
    }
    for (std::size_t i = 0; i < batch; ++i) {
      const auto [s, t] = train[cursor + i];
      x.row(static_cast<Eigen::Index>(i)) = corpus[s].hidden.row(t);
      if (!medusa) {
        const token_id next = corpus[s].tokens[t + 1];
        e.row(static_cast<Eigen::Index>(i)) = embedding.row(next);
        tgt.row(static_cast<Eigen::Index>(i)) = corpus[s].hidden.row(t + 1);
        labels[i] = corpus[s].tokens[t + 2];
        if (o.noise > 0.0f)
          for (Eigen::Index j = 0; j < D; ++j)
            x(static_cast<Eigen::Index>(i), j) +=
                o.noise * static_cast<float>(2.0 * gen.uniform_open() - 1.0);
      }
    }
    for (auto* g : grads) g->setZero();
    float loss = 0.0f;
    if (medusa) {
      for (std::size_t k = 0; k < mp.size(); ++k) {
        for (std::size_t i = 0; i < batch; ++i) {
          const auto [s, t] = train[cursor + i];
          const std::size_t at = t + k + 2;
          labels[i] = at < corpus[s].tokens.size() ? corpus[s].tokens[at] : -1;
        }
        loss += medusa_loss<float>(mp[k], x, labels, classifier, &mg[k]);
      }
    } else {
      loss = eagle_loss<float>(ep, x, e, tgt, labels, classifier, o.regression, &eg,
                               {o.distill, o.distill_temperature});
    }
    cursor += batch;
    opt.step(params, grads);
    bookkeeping.done(step, loss);
  }
  bookkeeping.finish();

  // Held-out accuracy: medusa head k against token t + k + 2; eagle at depth j (its own
  // predicted features, the text's tokens) against token t + j + 1.
  const std::size_t ranks = medusa ? o.ranks : 5;
  detail::held_out_tally tally(outputs, std::max<std::size_t>(ranks, 5));
  for (const auto& [s, t] : held) {
    const sequence& q = corpus[s];
    const Eigen::RowVectorXf h = q.hidden.row(t);
    Eigen::RowVectorXf f = h;
    tally.start(!medusa && q.greedy_chain(t, outputs));
    for (std::size_t k = 0; k < outputs; ++k) {
      const std::size_t at = t + k + 2;
      if (at >= q.tokens.size()) break;
      Eigen::RowVectorXf logits;
      if (medusa) {
        const Eigen::RowVectorXf z = h * mp[k].w.transpose() + mp[k].b.row(0);
        const Eigen::RowVectorXf r = h + (z.array() / (1.0f + (-z.array()).exp())).matrix();
        logits = r * (o.own_classifier ? mp[k].c : classifier).transpose();
      } else {
        const Eigen::RowVectorXf emb = embedding.row(q.tokens[at - 1]);
        Eigen::RowVectorXf u(2 * D);
        u << f, emb;
        const Eigen::RowVectorXf z = u * ep.w1.transpose() + ep.b1.row(0);
        f = f + (z.array() / (1.0f + (-z.array()).exp())).matrix() * ep.w2.transpose() +
            ep.b2.row(0);
        logits = f * classifier.transpose();
      }
      tally.record(k, detail::rank_of(logits, q.tokens[at], tally.columns()));
    }
  }
  const row_matrix table = tally.finish(report);
  if (!medusa) return eagle_record(ep, target, report);
  rec.accuracy = table;
  rec.train_tokens = static_cast<std::uint32_t>(report.train_positions);
  rec.train_seconds = static_cast<float>(report.seconds);
  for (auto& p : mp) rec.medusa.heads.push_back({p.w, p.b.row(0), p.c});
  rec.medusa.rank_accuracy = rec.accuracy;
  return rec;
}

}  // namespace specdec::llama2c::train
