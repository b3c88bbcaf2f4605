// Losslessness at full draft depth (issue 26): every chain length up to 8 and every tree depth up
// to 4 actually drafted (each case asserts the depth it reached), for each verifier and drafter,
// at T = 1 and under a combined warp (T = 0.8, top-k 3, top-p 0.9).
//
// The statistic (support/chain_sim.hpp): a target over V = 4 tokens whose next token depends on
// the last two (an order-3 table), and for every generated position j the window
// (x_{j-2}, x_{j-1}, x_j) (64 cells) against its exact law, enumerated over all 4^L sequences.
// The window holds all the target says about x_j, so a verifier or drafter that gets the
// conditioning wrong at depth j moves it; the runs generate K + 1 tokens (a tree: depth + 1; the
// heads, n-gram and batch cases: 9), so the first step drafts to full depth and every position
// it can emit is tested. Cells expecting fewer than 25 counts are pooled (chi_square_pooled:
// the statistic's far tail is trustworthy only then). Each chi-square is at the repository's
// level (z = 3.719, 1e-4) with no correction for multiplicity: this file runs about 540 of them,
// so on correct code a given set of seeds fails one with probability about 5%. The seeds are
// fixed, so the outcome is reproducible; a failure is worth a look at ten times the runs from
// the same seed (a real bias grows tenfold, a chance one does not) before anything else.
//
// A large vocabulary (V = 1100: a full block of the kernels' 1024 and a partial one) is checked
// too, with rows that depend on the position only and the likely tokens on the block boundary.
//
// Verifier-level tests run a chain simulator whose verifier is a parameter; the accepted length
// of token-wise verification is checked against its closed form; and a deliberately biased copy
// of the token rule (accept when u < p / q + epsilon) goes through the same harnesses and must
// fail them: the accepted length at epsilon = 0.01 (chi-square 73.6 against a critical 31.8),
// the window law at 0.03 (up to 2.2 times the critical value), which shows the statistics have
// the power to see a bias of that size.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/composed_drafter.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_cache.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/verify/block.hpp>
#include <specdec/verify/rejection.hpp>
#include <string>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/chain_sim.hpp"
#include "support/chi_square.hpp"
#include "support/hidden_table_model.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"
#include "support/window_law_runs.hpp"

namespace {

using specdec::candidate_draw;
using specdec::row_matrix;
using specdec::sampling_params;
using specdec::token_id;
using specdec::test::depth_reached;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::window_counts;
using laws_t = std::vector<std::vector<double>>;

// The order-3 tables, the vocabulary, the window and the prompt: support/window_law_runs.hpp
// (the draft is close to the target: a draft is kept with probability about 0.87 at T = 1, so a
// step of 8 drafts is often kept whole, 27% of first steps at T = 1 and 18% under the combined
// warp, and the bonus token at depth 8 is drawn, yet rejections happen at every depth).
using specdec::test::law::draft_table;
using specdec::test::law::prompt;
using specdec::test::law::target_table;
using specdec::test::law::vocab;
using specdec::test::law::width;

struct warping {
  std::string name;
  sampling_params sp;
};
const std::vector<warping> warps{
    {"T = 1", {.temperature = 1.0f}},
    {"T = 0.8, top-k 3, top-p 0.9", {.temperature = 0.8f, .top_k = 3, .top_p = 0.9f}},
};

// The target's warped next-token law, as the decoder computes it (float warp).
auto target_probs(const sampling_params& sp) {
  return [sp, model = table_model(target_table)](std::span<const token_id> seq,
                                                 std::vector<double>& p) {
    std::vector<float> logits(vocab), w(vocab);
    model.next_logits(seq, logits);
    specdec::warp(logits, sp, w);
    for (std::size_t t = 0; t < vocab; ++t) p[t] = w[t];
  };
}

// Exact window laws of `length` tokens after the prompt, memoised per (warp, length).
const laws_t& exact_laws(std::size_t warp_index, std::size_t length) {
  static std::map<std::pair<std::size_t, std::size_t>, laws_t> memo;
  auto& laws = memo[{warp_index, length}];
  if (laws.empty())
    laws = specdec::test::exact_window_laws(target_probs(warps[warp_index].sp), prompt, vocab,
                                            length, width);
  return laws;
}

using specdec::test::law::sampled;

// `trials` generations of `length` tokens by run(seed) -> generate_result.
// The laws depend on the context's last two tokens only, so any prompt ending in {1, 2} shares
// them (the n-gram cases use longer ones).
template <class Run>
sampled sample_runs(Run&& run, std::size_t length, int trials, std::uint64_t first_seed,
                    std::span<const token_id> context = prompt) {
  REQUIRE(context.size() >= 2);
  REQUIRE(context[context.size() - 2] == prompt[0]);
  REQUIRE(context.back() == prompt[1]);
  return specdec::test::law::sample_runs(run, length, trials, first_seed, context);
}

// Options of one sampled generation of `length` tokens.
specdec::generate_options options_of(std::size_t warp_index, std::size_t length) {
  specdec::generate_options o;
  o.max_new_tokens = length;
  o.sampling = warps[warp_index].sp;
  return o;
}

void check_law(const sampled& got, std::size_t warp_index) {
  const auto verdict = specdec::test::check_positions(
      got.windows, exact_laws(warp_index, got.windows.counts.size()));
  INFO(verdict.describe());
  CHECK(verdict.pass());
}

// A chain case reached depth k: k positions drafted on at least `min_full` steps, and the
// draft at position k kept (so the bonus token after k drafts was drawn) at least once.
void check_chain_depth(const depth_reached& d, std::size_t k, std::size_t min_full) {
  INFO("drafted at depth " << k << ": " << (d.drafted_at.size() >= k ? d.drafted_at[k - 1] : 0));
  REQUIRE(d.drafted_at.size() == k);
  CHECK(d.drafted_at[k - 1] >= min_full);
  CHECK(d.accepted_at[k - 1] > 0);
}

// A tree case reached depth `depth`: candidates judged at that depth and one of them kept.
void check_tree_depth(const depth_reached& d, std::size_t depth) {
  REQUIRE(d.drafted_at.size() == depth);
  REQUIRE(d.offered_at_depth.size() == depth);
  CHECK(d.offered_at_depth[depth - 1] > 0);
  CHECK(d.accepted_at_depth[depth - 1] > 0);
}

std::string shape_name(const std::vector<std::size_t>& shape) {
  std::string s;
  for (std::size_t k : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(k);
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Verifier level: the accepted length's closed form, the simulator, the negative control.

namespace {

// Position-only rows: p_j, q_j for j = 0..8 (p_8 is the bonus row), independent of the drafts.
struct position_rows {
  std::vector<std::vector<double>> p, q;
};

position_rows random_rows(std::size_t v, std::size_t k, std::uint64_t seed) {
  // p_j: a peak of about 3/4 on token j % V over a random rest; q_j: 0.7 p_j + 0.3 random. So
  // a_j is 0.80-0.89 (sampled q) and 0.77-0.83 (one-hot q on the peak), all 8 drafts are kept
  // on 20% and 16% of the steps, and p < q on part of the vocabulary (where a biased rule
  // shows).
  specdec::rng g(seed);
  position_rows r;
  const auto random_row = [&] {
    std::vector<double> x(v);
    double s = 0;
    for (auto& e : x) s += e = g.uniform_open() + 0.05;
    for (auto& e : x) e /= s;
    return x;
  };
  for (std::size_t j = 0; j <= k; ++j) {
    auto x = random_row();
    for (auto& e : x) e *= 0.25;
    x[j % v] += 0.75;
    r.p.push_back(x);
  }
  for (std::size_t j = 0; j < k; ++j) {
    auto x = random_row();
    for (std::size_t c = 0; c < v; ++c) x[c] = 0.7 * r.p[j][c] + 0.3 * x[c];
    r.q.push_back(x);
  }
  return r;
}

// Counts of the accepted length over `trials` single steps of k drafts drawn from the q rows
// (one_hot: draft j is the fixed token j % V, no q rows), each judged by verify(...).
template <class Verify>
std::vector<std::size_t> accepted_lengths(const position_rows& rows, std::size_t k, bool one_hot,
                                          Verify&& verify, int trials, std::uint64_t seed) {
  const std::size_t v = rows.p[0].size();
  const auto V = static_cast<Eigen::Index>(v);
  row_matrix target(static_cast<Eigen::Index>(k + 1), V),
      q(one_hot ? 0 : static_cast<Eigen::Index>(k), V);
  std::vector<std::vector<float>> qf(k, std::vector<float>(v));
  for (std::size_t j = 0; j <= k; ++j)
    for (std::size_t c = 0; c < v; ++c) {
      target(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(c)) =
          static_cast<float>(std::log(rows.p[j][c]));
      if (j < k) {
        qf[j][c] = static_cast<float>(rows.q[j][c]);
        if (!one_hot) q(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(c)) = qf[j][c];
      }
    }
  const specdec::logits_view tv(target.data(), target.rows(), V), qv(q.data(), q.rows(), V);
  specdec::rng draft_gen(seed), verify_gen(seed + 1);
  std::vector<token_id> drafts(k);
  std::vector<std::size_t> counts(k + 1, 0);
  for (int t = 0; t < trials; ++t) {
    for (std::size_t j = 0; j < k; ++j)
      drafts[j] = one_hot ? static_cast<token_id>(j % v) : specdec::sample(qf[j], draft_gen);
    counts[verify(tv, std::span<const token_id>(drafts), qv, sampling_params{}, verify_gen)
               .accepted]++;
  }
  return counts;
}

// a_j of the closed form, from the rows as the verifier sees them (the float logits, softmaxed).
std::vector<double> acceptance_by_position(const position_rows& rows, std::size_t k, bool one_hot) {
  const std::size_t v = rows.p[0].size();
  std::vector<double> a;
  for (std::size_t j = 0; j < k; ++j) {
    std::vector<float> logits(v), p(v);
    for (std::size_t c = 0; c < v; ++c) logits[c] = static_cast<float>(std::log(rows.p[j][c]));
    specdec::warp(logits, sampling_params{}, p);
    double aj = 0;
    if (one_hot) {
      aj = p[j % v];
    } else {
      for (std::size_t c = 0; c < v; ++c)
        aj += std::min(static_cast<double>(p[c]),
                       static_cast<double>(static_cast<float>(rows.q[j][c])));
    }
    a.push_back(aj);
  }
  return a;
}

const auto token_wise = [](specdec::logits_view t, std::span<const token_id> d,
                           specdec::logits_view q, const sampling_params& sp,
                           specdec::rng& g) { return specdec::verify_rejection(t, d, q, sp, g); };
const auto block_wise = [](specdec::logits_view t, std::span<const token_id> d,
                           specdec::logits_view q, const sampling_params& sp,
                           specdec::rng& g) { return specdec::verify_block(t, d, q, sp, g); };

}  // namespace

TEST_CASE("lossless depth: token-wise accepted length follows prod a_j (1 - a_i), K = 1..8") {
  // Rows that depend on the position only, so P(accepted = i) has the closed form; 100,000 steps
  // a case, a chi-square over the K + 1 lengths.
  const int trials = 100000;
  const position_rows rows = random_rows(6, 8, 77);
  for (const bool one_hot : {false, true})
    for (std::size_t k = 1; k <= 8; ++k) {
      SECTION((one_hot ? "one-hot q, K = " : "sampled q, K = ") + std::to_string(k)) {
        const auto law =
            specdec::test::accepted_length_law(acceptance_by_position(rows, k, one_hot));
        const auto counts = accepted_lengths(rows, k, one_hot, token_wise, trials, 100 + k);
        const auto chi = specdec::test::chi_square(counts, law);
        INFO(chi.describe());
        CHECK(chi.pass());
        CHECK(counts[k] > 0);  // all K drafts kept on some steps: the full depth was judged
      }
    }
}

TEST_CASE("lossless depth: negative control - a biased token rule fails the same statistics") {
  // specdec::test::biased_rejection accepts when u < p / q + 0.01. Through the accepted-length
  // harness above (K = 8, sampled q, the same rows, seeds and trials) its chi-square must
  // exceed the critical value (it is 73.6 against 31.8). The window law's control is below.
  const position_rows rows = random_rows(6, 8, 77);
  const specdec::test::biased_rejection biased{0.01};
  SECTION("accepted length, K = 8") {
    const auto law = specdec::test::accepted_length_law(acceptance_by_position(rows, 8, false));
    const auto counts = accepted_lengths(rows, 8, false, biased, 100000, 108);
    const auto chi = specdec::test::chi_square(counts, law);
    INFO(chi.describe());
    CHECK(chi.statistic > chi.critical);
  }
}

namespace {

// The chain simulator's target (logits of the order-3 table) and draft (the draft table's
// warped row): the same models as the decoder-level cases, the verifier a parameter.
struct sim_models {
  table_model target{target_table}, draft;
  sampling_params sp;
  explicit sim_models(const table_model_options& d, const sampling_params& s) : draft(d), sp(s) {}
  auto target_logits() const {
    return [this](std::span<const token_id> seq, std::span<float> out) {
      target.next_logits(seq, out);
    };
  }
  auto draft_probs() const {
    return [this](std::span<const token_id> seq, std::span<float> out) {
      std::vector<float> logits(vocab);
      draft.next_logits(seq, logits);
      specdec::warp(logits, sp, out);
    };
  }
};

// `trials` simulated generations of `length` tokens with K drafts a step, judged by `verify`.
template <class Verify>
window_counts simulate(const sim_models& m, Verify&& verify, std::size_t k, std::size_t length,
                       bool one_hot, int trials, std::uint64_t seed,
                       specdec::test::chain_depth& depth) {
  window_counts counts(vocab, length, width);
  const specdec::test::chain_sim_options o{
      .vocab = vocab, .draft_length = k, .length = length, .one_hot = one_hot, .sampling = m.sp};
  specdec::rng gen(seed);
  for (int t = 0; t < trials; ++t)
    counts.add(prompt, specdec::test::simulate_chain(m.target_logits(), m.draft_probs(), verify,
                                                     prompt, o, gen, depth));
  return counts;
}

}  // namespace

TEST_CASE("lossless depth: chain simulator, K = 8 - token-wise, block and one-hot drafts") {
  // The simulator drafts 8 tokens from q rows (or their argmax: one-hot), verifies with the
  // library's verifier, emits, and goes on until 9 tokens: positions 0..8 against their laws.
  const int trials = 20000;
  struct verifier {
    std::string name;
    bool block, one_hot;
  };
  const std::vector<verifier> verifiers{
      {"verify_rejection, sampled q", false, false},
      {"verify_block, sampled q", true, false},
      {"verify_rejection, one-hot q", false, true},
  };
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (const auto& v : verifiers) {
      SECTION(v.name + ", " + warps[w].name) {
        const sim_models m(draft_table, warps[w].sp);
        specdec::test::chain_depth depth;
        const auto counts = v.block
                                ? simulate(m, block_wise, 8, 9, v.one_hot, trials, 31 + w, depth)
                                : simulate(m, token_wise, 8, 9, v.one_hot, trials, 31 + w, depth);
        REQUIRE(depth.drafted_at.size() == 8);
        CHECK(depth.drafted_at[7] == static_cast<std::size_t>(trials));
        CHECK(depth.accepted_at[7] > 0);
        const auto verdict = specdec::test::check_positions(counts, exact_laws(w, 9));
        INFO(verdict.describe());
        CHECK(verdict.pass());
      }
    }
}

TEST_CASE("lossless depth: negative control in the chain simulator - the window law fails") {
  // The same harness and statistic as above with biased_rejection: a draft far from the target
  // (mix 0.9), so that p < q on much of each row and the bias moves the emitted law. The window
  // law at 20,000 runs sees a bias of 0.03 (its chi-square exceeds the critical value at 8 of
  // the 9 positions, up to 2.2 times it); a bias of 0.01 moves a cell's probability by about
  // 0.003, below its reach (0.9 of the critical value at worst). The accepted length, above,
  // is the sharper statistic for the acceptance test itself and sees 0.01.
  const int trials = 20000;
  const table_model_options far{
      .vocab_size = vocab, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.9f, .mix_seed = 4};
  const sim_models m(far, warps[0].sp);
  SECTION("verify_rejection passes") {
    specdec::test::chain_depth depth;
    const auto verdict = specdec::test::check_positions(
        simulate(m, token_wise, 8, 9, false, trials, 41, depth), exact_laws(0, 9));
    INFO(verdict.describe());
    CHECK(verdict.pass());
  }
  SECTION("biased_rejection (epsilon 0.03) fails") {
    specdec::test::chain_depth depth;
    const auto verdict = specdec::test::check_positions(
        simulate(m, specdec::test::biased_rejection{0.03}, 8, 9, false, trials, 41, depth),
        exact_laws(0, 9));
    INFO(verdict.describe());
    CHECK(verdict.worst_ratio() > 1.0);
  }
}

// ---------------------------------------------------------------------------------------------
// Decoder level: speculative_decoder and batch_decoder for real.

namespace {

using model_drafter_t = specdec::model_drafter<table_model>;

// The decoder with a model drafter on `Target` (table_model, or tree_table_model for trees).
template <class Target>
sampled run_model_drafter(const specdec::generate_options& o, int trials, std::uint64_t seed) {
  Target target(target_table);
  table_model draft_model(draft_table);
  model_drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  return sample_runs(
      [&](std::uint64_t s) {
        auto oo = o;
        oo.sampling.seed = s;
        return decoder.generate(prompt, oo);
      },
      o.max_new_tokens, trials, seed);
}

}  // namespace

TEST_CASE("lossless depth: model drafter chains, token-wise verification, K = 1..8") {
  const int trials = 8000;
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (std::size_t k = 1; k <= 8; ++k) {
      SECTION(warps[w].name + ", K = " + std::to_string(k)) {
        auto o = options_of(w, k + 1);
        o.draft_length = k;
        const auto got = run_model_drafter<table_model>(o, trials, 1000 * k + 100 * w);
        check_chain_depth(got.depth, k, static_cast<std::size_t>(trials));
        check_law(got, w);
      }
    }
}

TEST_CASE("lossless depth: model drafter chains, block verification, K = 2..8") {
  const int trials = 8000;
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (std::size_t k = 2; k <= 8; ++k) {
      SECTION(warps[w].name + ", K = " + std::to_string(k)) {
        auto o = options_of(w, k + 1);
        o.draft_length = k;
        o.verification = specdec::verification_rule::block;
        const auto got = run_model_drafter<table_model>(o, trials, 2000 * k + 100 * w);
        check_chain_depth(got.depth, k, static_cast<std::size_t>(trials));
        check_law(got, w);
      }
    }
}

TEST_CASE("lossless depth: model drafter trees of depth 1..4, i.i.d. and without replacement") {
  const int trials = 8000;
  const std::vector<std::vector<std::size_t>> shapes{{3}, {2, 2}, {2, 2, 2}, {2, 2, 2, 2}};
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement})
      for (const auto& shape : shapes) {
        SECTION(warps[w].name +
                (draw == candidate_draw::iid ? ", i.i.d., " : ", without replacement, ") +
                shape_name(shape)) {
          auto o = options_of(w, shape.size() + 1);
          o.tree = shape;
          o.tree_draw = draw;
          const auto got = run_model_drafter<specdec::test::tree_table_model>(
              o, trials, 3000 * shape.size() + 100 * w + (draw == candidate_draw::iid ? 0 : 50));
          check_tree_depth(got.depth, shape.size());
          CHECK(got.depth.drafted_at[shape.size() - 1] == static_cast<std::size_t>(trials));
          check_law(got, w);
        }
      }
  // A target without tree attention: the decoder scores the tree path by path
  // (tree/tree_fallback.hpp).
  for (std::size_t w = 0; w < warps.size(); ++w) {
    SECTION(warps[w].name + ", without replacement, 2x2x2x2, path by path") {
      auto o = options_of(w, 5);
      o.tree = {2, 2, 2, 2};
      o.tree_draw = candidate_draw::without_replacement;
      const auto got = run_model_drafter<table_model>(o, trials, 3900 + 100 * w);
      check_tree_depth(got.depth, 4);
      check_law(got, w);
    }
  }
}

// Draft heads on the target's hidden states (hidden_table_model: the hidden row is the logits
// row, the classifier the identity), built as in heads_drafter_test.cpp with 8 Medusa heads so
// a chain can reach 8 drafts.
namespace {

using specdec::test::hidden_table_model;
using capture = specdec::hidden_capture<hidden_table_model>;

using specdec::test::law::eagle_predictor;
using specdec::test::law::embedding;
using specdec::test::law::head_kind;
using specdec::test::law::medusa_heads;
using specdec::test::law::view;

sampled run_heads(head_kind kind, specdec::head_candidates candidates,
                  const specdec::generate_options& o, int trials, std::uint64_t seed) {
  hidden_table_model target(target_table);
  capture cap(target);
  const auto run = [&](auto& drafter) {
    specdec::speculative_decoder decoder(cap, drafter);
    return sample_runs(
        [&](std::uint64_t s) {
          auto oo = o;
          oo.sampling.seed = s;
          return decoder.generate(prompt, oo);
        },
        o.max_new_tokens, trials, seed);
  };
  if (kind == head_kind::medusa) {
    specdec::medusa_drafter drafter(cap, medusa_heads(8), view(target.classifier()),
                                    {.candidates = candidates});
    return run(drafter);
  }
  specdec::eagle_drafter drafter(cap, eagle_predictor(), view(target.classifier()),
                                 view(embedding()), {.expand = 0, .candidates = candidates});
  return run(drafter);
}

}  // namespace

namespace {

struct heads_case {
  std::string name;
  std::vector<std::size_t> tree;  // empty: a chain of 8
  candidate_draw draw;
  specdec::head_candidates candidates = specdec::head_candidates::sampled;
};

// Each case at both warps: the depth reached and every position's window law.
void check_heads(head_kind kind, const std::vector<heads_case>& cases, std::uint64_t seed) {
  const int trials = 10000;
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (std::size_t c = 0; c < cases.size(); ++c) {
      SECTION(cases[c].name + ", " + warps[w].name) {
        auto o = options_of(w, 9);
        o.draft_length = 8;
        o.tree = cases[c].tree;
        o.tree_draw = cases[c].draw;
        const auto got = run_heads(kind, cases[c].candidates, o, trials, seed + 100 * w + 10 * c);
        if (o.tree.empty()) {
          check_chain_depth(got.depth, 8, static_cast<std::size_t>(trials));
        } else {
          check_tree_depth(got.depth, 4);
          CHECK(got.depth.drafted_at[3] >= static_cast<std::size_t>(trials));
        }
        check_law(got, w);
      }
    }
}

}  // namespace

TEST_CASE("lossless depth: Medusa heads, a chain of 8 and trees of depth 4") {
  check_heads(
      head_kind::medusa,
      {{"chain of 8", {}, candidate_draw::iid},
       {"tree 2x2x2x2, without replacement", {2, 2, 2, 2}, candidate_draw::without_replacement},
       {"tree 2x2x2x2, top candidates (one-hot q)",
        {2, 2, 2, 2},
        candidate_draw::iid,
        specdec::head_candidates::top}},
      5000);
}

TEST_CASE("lossless depth: EAGLE predictor, a chain of 8 and trees of depth 4") {
  check_heads(head_kind::eagle,
              {{"chain of 8", {}, candidate_draw::iid},
               {"tree 2x2x2x2, i.i.d.", {2, 2, 2, 2}, candidate_draw::iid},
               {"tree 2x2x2x2, top candidates (one-hot q)",
                {2, 2, 2, 2},
                candidate_draw::iid,
                specdec::head_candidates::top}},
              6000);
}

// N-gram drafts (deterministic: one-hot q) and the composed drafter.
namespace {

// The target's most likely continuation of `from`, `n` tokens; with `first` >= 0 its first token
// is forced (an alternative branch).
std::vector<token_id> likely_path(std::vector<token_id> from, std::size_t n, token_id first = -1) {
  const table_model t(target_table);
  std::vector<float> logits(vocab);
  std::vector<token_id> path;
  for (std::size_t i = 0; i < n; ++i) {
    t.next_logits(from, logits);
    const token_id x = i == 0 && first >= 0 ? first : specdec::argmax(logits);
    path.push_back(x);
    from.push_back(x);
  }
  return path;
}

// The target's second most likely token after `from`.
token_id second_choice(const std::vector<token_id>& from) {
  const table_model t(target_table);
  std::vector<float> logits(vocab);
  t.next_logits(from, logits);
  logits[static_cast<std::size_t>(specdec::argmax(logits))] = -1e30f;
  return specdec::argmax(logits);
}

std::vector<token_id> concat(std::initializer_list<std::vector<token_id>> parts) {
  std::vector<token_id> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

template <class Drafter, class Target = table_model>
sampled run_drafter(Drafter& drafter, std::span<const token_id> context,
                    const specdec::generate_options& o, int trials, std::uint64_t seed) {
  Target target(target_table);
  specdec::speculative_decoder decoder(target, drafter);
  return sample_runs(
      [&](std::uint64_t s) {
        auto oo = o;
        oo.sampling.seed = s;
        return decoder.generate(context, oo);
      },
      o.max_new_tokens, trials, seed, context);
}

}  // namespace

TEST_CASE("lossless depth: n-gram drafts of 8 from the cross-request cache (one-hot q)") {
  // The cache holds an earlier generation that continued {1, 2} along the target's most likely
  // path; the request's own context {1, 2} has no earlier match, so the first step drafts 8
  // tokens from the cache, deterministically.
  const int trials = 20000;
  auto cache = std::make_shared<specdec::ngram_cache>();
  cache->insert(concat({{0, 3}, prompt, likely_path(prompt, 12)}));
  for (std::size_t w = 0; w < warps.size(); ++w) {
    SECTION(warps[w].name) {
      specdec::ngram_drafter lookup({.cache = cache});
      auto o = options_of(w, 9);
      o.draft_length = 8;
      const auto got = run_drafter(lookup, prompt, o, trials, 70000 + 100 * w);
      check_chain_depth(got.depth, 8, static_cast<std::size_t>(trials));
      check_law(got, w);
    }
  }
}

TEST_CASE("lossless depth: composed drafter (n-gram lookup, model fallback), chains of 8") {
  const int trials = 20000;
  // A prompt with no earlier match: the fallback drafts the first step's 8 tokens. A prompt
  // that repeats {1, 2} after the target's likely path: the lookup drafts them (one-hot q).
  const std::vector<token_id> repeated = concat({prompt, likely_path(prompt, 10), prompt});
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (const bool lookup_first : {false, true}) {
      SECTION(warps[w].name +
              (lookup_first ? ", the lookup drafts 8" : ", the fallback drafts 8")) {
        specdec::ngram_drafter lookup({.match = specdec::ngram_match_policy::longest_continuation});
        table_model draft_model(draft_table);
        model_drafter_t fallback(draft_model);
        specdec::composed_drafter both(lookup, fallback);
        auto o = options_of(w, 9);
        o.draft_length = 8;
        const auto got = run_drafter(
            both,
            lookup_first ? std::span<const token_id>(repeated) : std::span<const token_id>(prompt),
            o, trials, 8000 + 100 * w + (lookup_first ? 50 : 0));
        check_chain_depth(got.depth, 8, static_cast<std::size_t>(trials));
        CHECK(both.lookup_steps() > 0);
        CHECK(both.fallback_steps() > 0);
        if (lookup_first) {
          CHECK(both.lookup_steps() >= static_cast<std::size_t>(trials));
        } else {
          CHECK(both.fallback_steps() >= static_cast<std::size_t>(trials));
        }
        check_law(got, w);
      }
    }
}

TEST_CASE("lossless depth: n-gram candidate tries of depth 4 (deterministic tree)") {
  // {1, 2} occurs twice before the end of the prompt, followed by the target's likely path and
  // by a path through its second choice: two candidates of 4 tokens, a trie 2x1x1x1.
  const int trials = 20000;
  const std::vector<token_id> context =
      concat({prompt, likely_path(prompt, 6), prompt, likely_path(prompt, 6, second_choice(prompt)),
              prompt});
  for (std::size_t w = 0; w < warps.size(); ++w) {
    SECTION(warps[w].name) {
      specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 2});
      auto o = options_of(w, 5);
      o.tree = {2, 1, 1, 1};
      const auto got = run_drafter<specdec::ngram_drafter, specdec::test::tree_table_model>(
          lookup, context, o, trials, 9000 + 100 * w);
      check_tree_depth(got.depth, 4);
      CHECK(got.depth.drafted_at[3] >= static_cast<std::size_t>(trials));
      REQUIRE(got.depth.offered_at_depth.size() == 4);
      check_law(got, w);
    }
  }
}

// The batch decoder: 16 sequences at a time, each with its own model drafter and seed.
namespace {

sampled run_batch(const specdec::generate_options& o, int trials, std::uint64_t seed) {
  using specdec::test::batch_table_model;
  batch_table_model model({.model = target_table});
  specdec::batch_decoder<batch_table_model, model_drafter_t> batch(model);
  const int together = 16;
  std::deque<table_model> draft_models;
  std::deque<model_drafter_t> drafters;
  for (int i = 0; i < together; ++i) drafters.emplace_back(draft_models.emplace_back(draft_table));
  sampled out{window_counts(vocab, o.max_new_tokens, width), {}};
  for (int done = 0; done < trials; done += together) {
    std::vector<specdec::sequence_id> ids;
    for (int i = 0; i < together && done + i < trials; ++i) {
      auto oo = o;
      oo.sampling.seed = seed + static_cast<std::uint64_t>(done + i);
      ids.push_back(batch.add(prompt, oo, drafters[static_cast<std::size_t>(i)]));
    }
    batch.run();
    for (const auto id : ids) {
      if (batch.status(id) != specdec::sequence_status::finished) FAIL(batch.error(id));
      const auto r = batch.result(id);
      if (r.tokens.size() != o.max_new_tokens) FAIL("a sequence ended early");
      out.windows.add(prompt, r.tokens);
      out.depth.add(r.stats);
      batch.remove(id);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("lossless depth: batch decoder, chains of 8 (token-wise, block) and trees of depth 4") {
  const int trials = 12000;
  struct batch_case {
    std::string name;
    specdec::verification_rule verification;
    std::vector<std::size_t> tree;
    candidate_draw draw = candidate_draw::iid;
  };
  const std::vector<batch_case> cases{
      {"chain of 8, token-wise", specdec::verification_rule::token, {}},
      {"chain of 8, block", specdec::verification_rule::block, {}},
      {"tree 2x2x2x2, i.i.d.", specdec::verification_rule::token, {2, 2, 2, 2}},
      {"tree 2x2x2x2, without replacement",
       specdec::verification_rule::token,
       {2, 2, 2, 2},
       candidate_draw::without_replacement},
  };
  for (std::size_t w = 0; w < warps.size(); ++w)
    for (std::size_t c = 0; c < cases.size(); ++c) {
      SECTION(cases[c].name + ", " + warps[w].name) {
        auto o = options_of(w, cases[c].tree.empty() ? 9 : 5);
        o.draft_length = 8;
        o.verification = cases[c].verification;
        o.tree = cases[c].tree;
        o.tree_draw = cases[c].draw;
        const auto got = run_batch(o, trials, 10000 + 1000 * w + 100 * c);
        if (o.tree.empty()) {
          check_chain_depth(got.depth, 8, static_cast<std::size_t>(trials));
        } else {
          check_tree_depth(got.depth, 4);
          CHECK(got.depth.drafted_at[3] >= static_cast<std::size_t>(trials));
        }
        check_law(got, w);
      }
    }
}

// ---------------------------------------------------------------------------------------------
// A large vocabulary: the row kernels and sample() work in blocks of 1024 values; V = 1100 has a
// full block and a partial one, and the tokens on either side of the boundary and at both ends
// carry most of the mass.

namespace {

constexpr std::size_t big_vocab = 1100;
constexpr std::size_t big_positions = 9;

// The likely tokens: the first and last few of each block.
const std::vector<std::size_t> hot_tokens{0,    1,    2,    1020, 1021, 1022, 1023,
                                          1024, 1025, 1026, 1027, 1097, 1098, 1099};

// Bins: each hot token alone, then the cold tokens between them, one bin per gap.
std::vector<std::size_t> bin_of_token() {
  std::vector<std::size_t> bin(big_vocab);
  std::size_t next = 0;
  for (std::size_t t = 0; t < big_vocab; ++t) {
    const bool hot = std::find(hot_tokens.begin(), hot_tokens.end(), t) != hot_tokens.end();
    const bool after_hot =
        t > 0 && std::find(hot_tokens.begin(), hot_tokens.end(), t - 1) != hot_tokens.end();
    if (hot || t == 0 || after_hot)
      bin[t] = next++;  // a new bin
    else
      bin[t] = bin[t - 1];
  }
  return bin;
}

// Rows that depend on the position only (so the target's law is the product of its rows):
// target logits +2 on the hot tokens and -4 elsewhere, with noise; the draft's add more noise.
struct big_rows {
  std::vector<std::vector<float>> target, draft;
};

big_rows make_big_rows() {
  specdec::rng g(2100);
  big_rows r;
  for (std::size_t j = 0; j < big_positions; ++j) {
    std::vector<float> t(big_vocab), d(big_vocab);
    for (std::size_t x = 0; x < big_vocab; ++x) {
      const bool hot = std::find(hot_tokens.begin(), hot_tokens.end(), x) != hot_tokens.end();
      t[x] = static_cast<float>((hot ? 2.0 : -4.0) + 1.5 * (g.uniform_open() - 0.5));
      d[x] = t[x] + static_cast<float>(1.2 * (g.uniform_open() - 0.5));
    }
    r.target.push_back(t);
    r.draft.push_back(d);
  }
  return r;
}

}  // namespace

TEST_CASE("lossless depth: V = 1100 (blocks of 1024), a chain of 8, tokens by bin") {
  // The simulator with rows chosen by absolute position; each position's token, binned (14 hot
  // tokens on the block boundaries alone, the gaps between them pooled), against warp(p_j).
  const int trials = 3000;
  const big_rows rows = make_big_rows();
  const auto bins = bin_of_token();
  const std::size_t nbins = bins.back() + 1;
  struct big_case {
    std::string name;
    sampling_params sp;
    bool block;
  };
  const std::vector<big_case> cases{
      {"verify_rejection, T = 1", {.temperature = 1.0f}, false},
      {"verify_rejection, T = 0.8, top-p 0.9", {.temperature = 0.8f, .top_p = 0.9f}, false},
      {"verify_block, T = 0.8, top-p 0.9", {.temperature = 0.8f, .top_p = 0.9f}, true},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    SECTION(cases[c].name) {
      const auto& bc = cases[c];
      const std::vector<token_id> context{0};
      const auto position = [&](std::span<const token_id> seq) {
        return seq.size() - context.size();
      };
      const auto target_logits = [&](std::span<const token_id> seq, std::span<float> out) {
        const auto& row = rows.target[position(seq)];
        std::copy(row.begin(), row.end(), out.begin());
      };
      const auto draft_probs = [&](std::span<const token_id> seq, std::span<float> out) {
        specdec::warp(rows.draft[position(seq)], bc.sp, out);
      };
      const specdec::test::chain_sim_options o{.vocab = big_vocab,
                                               .draft_length = 8,
                                               .length = big_positions,
                                               .one_hot = false,
                                               .sampling = bc.sp};
      specdec::rng gen(400 + c);
      specdec::test::chain_depth depth;
      std::vector<std::vector<std::size_t>> counts(big_positions, std::vector<std::size_t>(nbins));
      for (int t = 0; t < trials; ++t) {
        const auto tokens = bc.block
                                ? specdec::test::simulate_chain(target_logits, draft_probs,
                                                                block_wise, context, o, gen, depth)
                                : specdec::test::simulate_chain(target_logits, draft_probs,
                                                                token_wise, context, o, gen, depth);
        for (std::size_t j = 0; j < big_positions; ++j)
          counts[j][bins[static_cast<std::size_t>(tokens[j])]]++;
      }
      REQUIRE(depth.drafted_at.size() == 8);
      CHECK(depth.drafted_at[7] == static_cast<std::size_t>(trials));
      CHECK(depth.accepted_at[7] > 0);
      for (std::size_t j = 0; j < big_positions; ++j) {
        std::vector<float> p(big_vocab);
        specdec::warp(rows.target[j], bc.sp, p);
        std::vector<double> law(nbins, 0.0);
        for (std::size_t x = 0; x < big_vocab; ++x) law[bins[x]] += p[x];
        const auto chi = specdec::test::chi_square_pooled(counts[j], law);
        INFO("position " << j << ": " << chi.describe());
        CHECK(chi.pass());
      }
    }
  }
}
