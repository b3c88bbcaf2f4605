// llama2c/training/heads_corpus.hpp - the heads trainer's data: sequences the target generates itself
// from BOS, with the hidden row at every position (self-distillation; heads_train.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <specdec/math/rng.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/math/softmax.hpp>

#include "llama2c/training/heads_losses.hpp"  // mat
#include "llama2c/engine/model.hpp"

namespace specdec::llama2c::train {

/// What generate_corpus() generates.
struct corpus_options {
  std::size_t sequences = 3000;  ///< generated sequences (each up to the model's seq_len)
  std::vector<float> temperatures{0.0f, 0.5f, 1.0f};  ///< cycled per sequence
  std::size_t random_prefix = 4;  ///< sequence i starts with 1 + i % this tokens at temperature 1
  std::uint64_t seed = 1;
};

/// One generated sequence: its tokens (BOS first) and the hidden row at each position.
struct sequence {
  std::vector<token_id> tokens;
  mat<float> hidden;  ///< tokens.size() x d (row t: after tokens[0..t])
  float temperature = 1.0f;  ///< of tokens[prefix + 1 ...]; the ones before it at 1
  std::size_t prefix = 0;

  /// Whether tokens [t + 2, t + 1 + depth] exist and are the target's greedy choices: a greedy
  /// chain of `depth` drafts from position t is accepted exactly as far as its tokens match.
  bool greedy_chain(std::size_t t, std::size_t depth) const noexcept {
    return temperature == 0.0f && t + 1 >= prefix && t + 1 + depth < tokens.size();
  }
};

/// Generates `o.sequences` sequences from BOS on `m` (one token per append, the hidden rows from
/// the same calls). Stops a sequence at EOS/BOS or the model's context. Deterministic for a seed.
inline std::vector<sequence> generate_corpus(model& m, const corpus_options& o,
                                             const std::function<void(std::size_t)>& progress = {}) {
  std::vector<sequence> out;
  const std::size_t v = m.vocab_size(), d = m.hidden_size(), len = m.max_size();
  std::vector<float> logits(v), probs(v), hidden(d);
  rng gen(o.seed);
  for (std::size_t s = 0; s < o.sequences; ++s) {
    m.truncate(0);
    sequence seq;
    seq.tokens.push_back(1);  // BOS
    seq.hidden.resize(static_cast<Eigen::Index>(len), static_cast<Eigen::Index>(d));
    const float temp = o.temperatures.empty() ? 1.0f : o.temperatures[s % o.temperatures.size()];
    const std::size_t prefix = 1 + (o.random_prefix ? s % o.random_prefix : 0);
    seq.temperature = temp;
    seq.prefix = prefix;
    while (true) {
      const std::size_t t = seq.tokens.size() - 1;
      m.append(std::span<const token_id>(&seq.tokens[t], 1), logits, hidden);
      seq.hidden.row(static_cast<Eigen::Index>(t)) =
          Eigen::Map<const Eigen::RowVectorXf>(hidden.data(), static_cast<Eigen::Index>(d));
      if (seq.tokens.size() >= len) break;
      const float tt = t < prefix ? 1.0f : temp;
      token_id next;
      if (tt == 0.0f) {
        next = argmax(std::span<const float>(logits));
      } else {
        softmax(logits, probs, tt);
        next = sample(std::span<const float>(probs), gen);
      }
      if (next == 1 || next == 2) break;
      seq.tokens.push_back(next);
    }
    seq.hidden.conservativeResize(static_cast<Eigen::Index>(seq.tokens.size()), Eigen::NoChange);
    out.push_back(std::move(seq));
    if (progress) progress(s + 1);
  }
  m.truncate(0);
  return out;
}

}  // namespace specdec::llama2c::train
