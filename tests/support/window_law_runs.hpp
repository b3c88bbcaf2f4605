// tests/support/window_law_runs.hpp - decoder runs judged by their window law: the order-3 table
// target and draft of lossless_depth_test.cpp, runs of any decoder counted by 3-token windows and
// by the draft depth they reached, the exact law of those windows under any sampling_params (its
// row processor included), and the Medusa / EAGLE-style heads on hidden_table_model. Shared by
// the tests of features that must keep the target's law (row processors, draft temperature).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <specdec/decoder.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/math/warp.hpp>
#include <span>
#include <string>
#include <vector>

#include "support/chain_sim.hpp"
#include "support/chi_square.hpp"
#include "support/hidden_table_model.hpp"
#include "support/table_model.hpp"

namespace specdec::test::law {

using specdec::candidate_draw;
using specdec::row_matrix;
using specdec::sampling_params;
using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::window_counts;
using laws_t = std::vector<std::vector<double>>;

inline constexpr std::size_t vocab = 4;
inline constexpr std::size_t width = 3;
inline const table_model_options target_table{
    .vocab_size = vocab, .order = 3, .seed = 21, .scale = 1.5f};
inline const table_model_options draft_table{
    .vocab_size = vocab, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.35f, .mix_seed = 4};
inline const std::vector<token_id> prompt{1, 2};

// Exact window laws of `length` tokens after `context` under `sp` (its processor included).
inline laws_t exact_laws(const sampling_params& sp, std::span<const token_id> context,
                  std::size_t length) {
  const table_model model(target_table);
  return specdec::test::exact_window_laws(
      [&](std::span<const token_id> seq, std::vector<double>& p) {
        std::vector<float> logits(vocab), w(vocab);
        model.next_logits(seq, logits);
        if (sp.processor) sp.processor(seq, logits);
        specdec::warp(logits, sp, w);
        for (std::size_t t = 0; t < vocab; ++t) p[t] = w[t];
      },
      std::vector<token_id>(context.begin(), context.end()), vocab, length, width);
}

struct sampled {
  window_counts windows{vocab, 0, width};
  specdec::test::depth_reached depth;
};

// `trials` generations of `length` tokens by run(seed), windows counted after `context`.
template <class Run>
sampled sample_runs(Run&& run, std::size_t length, int trials, std::uint64_t first_seed,
                    std::span<const token_id> context = prompt) {
  sampled out{window_counts(vocab, length, width), {}};
  for (int t = 0; t < trials; ++t) {
    const specdec::generate_result r = run(first_seed + static_cast<std::uint64_t>(t));
    if (r.tokens.size() != length) FAIL("a run ended after " << r.tokens.size() << " tokens");
    out.windows.add(context, r.tokens);
    out.depth.add(r.stats);
  }
  return out;
}

// Every position's window against the exact law under sp, and (depth > 0) draft position
// `depth` reached: drafted, and a draft there kept at least once (a tree: a candidate there).
inline void check_law(const sampled& got, const sampling_params& sp, std::size_t depth,
               std::span<const token_id> context = prompt) {
  if (depth > 0) {
    const auto& d = got.depth;
    INFO("draft positions reached: " << d.drafted_at.size() << ", kept at the last: "
                                      << (d.accepted_at.empty() ? 0 : d.accepted_at.back()));
    REQUIRE(d.drafted_at.size() == depth);
    CHECK((d.accepted_at.size() == depth && d.accepted_at[depth - 1] > 0));
  }
  const auto verdict = specdec::test::check_positions(
      got.windows, exact_laws(sp, context, got.windows.counts.size()));
  INFO(verdict.describe());
  CHECK(verdict.pass());
}

// Runs `decoder` (any decoder with generate(context, options)) `trials` times.
template <class Decoder>
sampled run_decoder(Decoder& decoder, const specdec::generate_options& o, int trials,
                          std::uint64_t seed, std::span<const token_id> context = prompt) {
  return sample_runs(
      [&](std::uint64_t s) {
        auto oo = o;
        oo.sampling.seed = s;
        return decoder.generate(context, oo);
      },
      o.max_new_tokens, trials, seed, context);
}

inline specdec::generate_options options_of(const sampling_params& sp, std::size_t length) {
  specdec::generate_options o;
  o.max_new_tokens = length;
  o.sampling = sp;
  return o;
}

using model_drafter_t = specdec::model_drafter<table_model>;

template <class Target>
sampled run_model_drafter(const specdec::generate_options& o, int trials,
                                std::uint64_t seed) {
  Target target(target_table);
  table_model draft_model(draft_table);
  model_drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  return run_decoder(decoder, o, trials, seed);
}

// Draft heads on hidden_table_model, as in lossless_depth_test.cpp.
using specdec::test::hidden_table_model;
using capture = specdec::hidden_capture<hidden_table_model>;

inline row_matrix random_matrix(Eigen::Index rows, Eigen::Index cols, float scale,
                                std::uint64_t seed) {
  specdec::rng g(seed);
  row_matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = scale * static_cast<float>(2.0 * g.uniform_open() - 1.0);
  return m;
}

inline specdec::weight_view view(const row_matrix& m) { return {m.data(), m.rows(), m.cols()}; }

inline specdec::medusa_weights medusa_heads(std::size_t heads) {
  specdec::medusa_weights w;
  const auto V = static_cast<Eigen::Index>(vocab);
  for (std::size_t k = 0; k < heads; ++k)
    w.heads.push_back({random_matrix(V, V, 0.8f, 10 + k), random_matrix(1, V, 0.5f, 20 + k),
                       random_matrix(V, V, 1.5f, 30 + k)});
  return w;
}

inline specdec::eagle_weights eagle_predictor() {
  const auto V = static_cast<Eigen::Index>(vocab);
  const Eigen::Index M = 16;
  return {random_matrix(M, 2 * V, 0.8f, 41), random_matrix(1, M, 0.3f, 42),
          random_matrix(V, M, 0.8f, 43),     random_matrix(1, V, 0.3f, 44),
          1.0f,                              {},
          {}};
}

inline const row_matrix& embedding() {
  static const row_matrix e = random_matrix(vocab, vocab, 1.0f, 50);
  return e;
}

enum class head_kind { medusa, eagle };

// Calls f(drafter, target) with a heads drafter of `kind` on a fresh hidden target.
template <class F>
void with_heads(head_kind kind, specdec::head_candidates candidates, F&& f) {
  hidden_table_model target(target_table);
  capture cap(target);
  if (kind == head_kind::medusa) {
    specdec::medusa_drafter drafter(cap, medusa_heads(8), view(target.classifier()),
                                    {.candidates = candidates});
    f(drafter, cap);
  } else {
    specdec::eagle_drafter drafter(cap, eagle_predictor(), view(target.classifier()),
                                   view(embedding()), {.expand = 0, .candidates = candidates});
    f(drafter, cap);
  }
}

}  // namespace specdec::test::law
