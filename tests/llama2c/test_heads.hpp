// tests/llama2c/test_heads.hpp - draft heads trained at test time, for the real-model tests:
// short runs (seconds) on text the model generates itself, good enough that the heads agree with
// the target often enough to be exercised. One record per (kind, attention) per program.
#pragma once

#include <cstddef>
#include <map>
#include <utility>

#include <llama2c/engine/heads_file.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/training/eagle_attn_train.hpp>
#include <llama2c/training/heads_train.hpp>

namespace llama2c_test {

/// What a test's heads are trained with: the model's weights, its context cap (a smaller cap keeps
/// the generated corpus small) and the number of training steps.
struct test_heads_setup {
  std::shared_ptr<const specdec::llama2c::weights> weights;
  std::size_t max_context = 0;  // 0: the checkpoint's
  std::size_t steps = 150;
};

/// Heads of `kind` (with `attention`: the EAGLE-style predictor with its attention layer, 2 heads
/// of width 8) trained on 60 sequences the model generates (seed 3); trained once per program.
inline const specdec::llama2c::heads_record& trained_heads(const test_heads_setup& setup,
                                                           specdec::llama2c::heads_kind kind,
                                                           bool attention = false) {
  namespace l2 = specdec::llama2c;
  static std::map<std::pair<l2::heads_kind, bool>, l2::heads_record> made;
  if (const auto it = made.find({kind, attention}); it != made.end()) return it->second;
  l2::model m(setup.weights, {.max_context = setup.max_context, .threads = 1});
  const auto corpus = l2::train::generate_corpus(m, {.sequences = 60, .seed = 3});
  l2::train::train_report report;
  l2::train::train_options o;
  o.kind = kind;
  o.steps = setup.steps;
  o.heads = 3;
  o.inner = 64;
  if (attention)
    return made[{kind, true}] = l2::train::attn_record(
               l2::train::train_eagle_attn(m, corpus, o, {.heads = 2, .width = 8}, report), m,
               report);
  return made[{kind, false}] = l2::train::train_heads(m, corpus, o, report);
}

}  // namespace llama2c_test
