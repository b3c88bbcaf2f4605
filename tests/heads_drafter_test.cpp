// Draft heads on the target's hidden states (medusa_drafter, eagle_drafter, hidden_capture) on a
// table model whose hidden row is its logits: greedy-exact, the sampled joint law of the first
// three tokens by chi-square for both candidate modes, bad input.
#include <catch2/catch.hpp>
#include <specdec/cost/calibrate.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/expected_acceptance.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/testing.hpp>

#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/hidden_table_model.hpp"
#include "support/table_model.hpp"

namespace {

using specdec::candidate_draw;
using specdec::head_candidates;
using specdec::row_matrix;
using specdec::token_id;
using specdec::test::hidden_table_model;
using specdec::test::table_model;
using specdec::test::table_model_options;
using capture = specdec::hidden_capture<hidden_table_model>;

row_matrix random_matrix(Eigen::Index rows, Eigen::Index cols, float scale, std::uint64_t seed) {
  specdec::rng g(seed);
  row_matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = scale * static_cast<float>(2.0 * g.uniform_open() - 1.0);
  return m;
}

specdec::medusa_weights medusa(std::size_t v, std::size_t heads, bool own) {
  specdec::medusa_weights w;
  const auto V = static_cast<Eigen::Index>(v);
  for (std::size_t k = 0; k < heads; ++k)
    w.heads.push_back({random_matrix(V, V, 0.8f, 10 + k), random_matrix(1, V, 0.5f, 20 + k),
                       own ? random_matrix(V, V, 1.5f, 30 + k) : row_matrix()});
  return w;
}

specdec::eagle_weights eagle(std::size_t v, std::size_t inner, std::size_t attn_heads = 0) {
  const auto V = static_cast<Eigen::Index>(v), M = static_cast<Eigen::Index>(inner);
  specdec::eagle_weights w{random_matrix(M, 2 * V, 0.8f, 41), random_matrix(1, M, 0.3f, 42),
                           random_matrix(V, M, 0.8f, 43), random_matrix(1, V, 0.3f, 44), 1.0f, {},
                           {}};
  if (attn_heads > 0) {  // heads of width 4, large enough weights to matter
    const auto A = static_cast<Eigen::Index>(4 * attn_heads);
    w.attention.wq = random_matrix(A, 2 * V, 1.5f, 45);
    w.attention.wk = random_matrix(A, 2 * V, 1.5f, 46);
    w.attention.wv = random_matrix(A, 2 * V, 1.0f, 47);
    w.attention.wo = random_matrix(V, A, 1.0f, 48);
    w.attention.heads = attn_heads;
  }
  return w;
}

// The embedding of a vocabulary of v tokens (one matrix per v, kept for the drafters' views).
const row_matrix& embedding_of(std::size_t v) {
  static std::vector<row_matrix> made(64);
  row_matrix& e = made.at(v);
  if (e.size() == 0) e = random_matrix(static_cast<Eigen::Index>(v), static_cast<Eigen::Index>(v), 1.0f, 50);
  return e;
}

specdec::weight_view view(const row_matrix& m) { return {m.data(), m.rows(), m.cols()}; }

// Greedy decoding through `make(capture&)`'s drafter equals plain greedy decoding.
template <class Make>
void check_greedy(const table_model_options& t, Make&& make) {
  hidden_table_model target(t);
  capture cap(target);
  auto drafter = make(cap, target);
  specdec::speculative_decoder decoder(cap, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 50;
  o.sampling.temperature = 0.0f;
  for (const std::vector<token_id>& prompt : {std::vector<token_id>{4, 1, 7},
                                              std::vector<token_id>{3},
                                              std::vector<token_id>{2, 2, 9, 5, 0}}) {
    table_model plain(t);
    const auto want = specdec::generate_autoregressive(plain, prompt, o).tokens;
    for (std::size_t k : {1, 2, 4}) {
      o.tree.clear();
      o.draft_length = k;
      CHECK(decoder.generate(prompt, o).tokens == want);
    }
    for (const auto& shape : std::vector<std::vector<std::size_t>>{{2, 2}, {3, 1, 1}, {4, 2, 2}}) {
      o.tree = shape;
      const auto r = decoder.generate(prompt, o);
      CHECK(r.tokens == want);
      CHECK(cap.size() + 1 == decoder.history().size());
    }
  }
}

// The joint law of the first three tokens equals the target's.
template <class Make>
void check_sampled(Make&& make, const std::vector<std::size_t>& shape, std::size_t k,
                   candidate_draw draw, int trials) {
  const table_model_options t{.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f};
  hidden_table_model target(t);
  capture cap(target);
  auto drafter = make(cap, target);
  specdec::speculative_decoder decoder(cap, drafter);
  const std::vector<token_id> prompt{1, 2};
  specdec::sampling_params sp;
  sp.temperature = 0.9f;
  sp.top_k = 4;
  const auto expected = specdec::test::exact_joint(table_model(t), prompt, 3, sp);
  specdec::generate_options o;
  o.tree = shape;
  o.draft_length = k;
  o.tree_draw = draw;
  o.sampling = sp;
  const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, trials, 7);
  const auto chi = specdec::test::chi_square(got.counts, expected);
  INFO(chi.describe());
  CHECK(chi.pass());
  CHECK(got.accepted > 0);
}

auto make_medusa(std::size_t heads, bool own, specdec::medusa_drafter_options o = {}) {
  return [=](capture& cap, hidden_table_model& target) {
    return specdec::medusa_drafter(cap, medusa(target.vocab_size(), heads, own),
                                   view(target.classifier()), o);
  };
}

auto make_eagle(specdec::eagle_drafter_options o = {}, std::size_t attn_heads = 0) {
  return [=](capture& cap, hidden_table_model& target) {
    return specdec::eagle_drafter(cap, eagle(target.vocab_size(), 16, attn_heads),
                                  view(target.classifier()),
                                  view(embedding_of(target.vocab_size())), o);
  };
}

}  // namespace

TEST_CASE("hidden_capture: keeps the rows of the committed positions") {
  const table_model_options t{.vocab_size = 7, .order = 3, .seed = 3};
  hidden_table_model target(t);
  capture cap(target);
  std::vector<float> logits(4 * 7);
  const std::vector<token_id> seq{1, 5, 2, 6};
  cap.append(seq, logits);
  cap.truncate(2);
  const std::vector<token_id> tail{3, 4};
  cap.append(tail, std::span<float>(logits).first(14));
  const std::vector<token_id> now{1, 5, 3, 4};
  REQUIRE(cap.size() == 4);
  CHECK(std::vector<token_id>(cap.tokens().begin(), cap.tokens().end()) == now);
  std::vector<float> want(7);
  for (std::size_t i = 0; i < now.size(); ++i) {
    table_model(t).next_logits(std::span<const token_id>(now).first(i + 1), want);
    const auto row = cap.hidden(i);
    REQUIRE(row.size() == 7);
    for (std::size_t j = 0; j < 7; ++j) CHECK(row[j] == want[j]);
  }
  SECTION("a model used behind its back has no rows until truncated away") {
    std::vector<float> one(7), h(7);
    target.append(std::span<const token_id>(now).first(1), one, h);
    CHECK(cap.hidden(4).empty());
    cap.truncate(4);
    CHECK(cap.hidden(3).size() == 7);
  }
}

TEST_CASE("hidden_capture: the conformance kit's hidden-row check passes on the test model") {
  auto rep = specdec::testing::run_all([] {
    return hidden_table_model({.vocab_size = 9, .order = 3, .seed = 5});
  });
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.message.find("hidden_rows") != std::string::npos);
}

namespace {
// A hidden_table_model with the optional prefill(tokens, hidden); `shift` moves its hidden rows
// off append's (a wrong adapter the kit must catch).
class prefill_hidden_model : public hidden_table_model {
 public:
  prefill_hidden_model(table_model_options o, float shift) : hidden_table_model(o), shift_(shift) {}
  void prefill(std::span<const token_id> tokens, std::span<float> hidden) {
    std::vector<float> logits(tokens.size() * vocab_size());
    append(tokens, logits, hidden);
    for (float& x : hidden) x += shift_;
  }

 private:
  float shift_;
};
}  // namespace

TEST_CASE("conformance kit: prefill(tokens, hidden) must give append's hidden rows") {
  const table_model_options t{.vocab_size = 9, .order = 3, .seed = 5};
  auto good = specdec::testing::run_all([&] { return prefill_hidden_model(t, 0.0f); });
  INFO(good.message);
  CHECK(good.ok);
  auto bad = specdec::testing::run_all([&] { return prefill_hidden_model(t, 0.5f); });
  CHECK(!bad.ok);
  CHECK(bad.message.find("prefill's hidden row differs from append's") != std::string::npos);
}

TEST_CASE("medusa_drafter: sparse trees keep the most probable rank paths, breadth first") {
  const std::vector<std::size_t> branching{3, 2};
  const double acc[2][3] = {{0.6, 0.2, 0.1}, {0.5, 0.2, 0.0}};
  const auto tree = specdec::detail::best_rank_tree(
      branching, 4, [&](std::size_t j, std::size_t r) { return acc[j][r]; });
  REQUIRE(tree.size() == 4);  // 0 (.6), 0-0 (.3), 1 (.2), 0-1 (.12); not 2 (.1)
  CHECK((tree[0].parent == -1 && tree[0].rank == 0));
  CHECK((tree[1].parent == -1 && tree[1].rank == 1));
  CHECK((tree[2].parent == 0 && tree[2].rank == 0 && tree[2].depth == 2));
  CHECK((tree[3].parent == 0 && tree[3].rank == 1));
}

TEST_CASE("medusa_drafter: greedy decoding with heads equals greedy decoding") {
  const table_model_options t{.vocab_size = 12, .order = 2, .seed = 8};
  check_greedy(t, make_medusa(3, false));
  check_greedy(t, make_medusa(4, true, {.max_nodes = 5}));
}

TEST_CASE("medusa_drafter: a one-token prompt (no start row) is a plain step, sampled trees too") {
  // No hidden row precedes the prompt's last token, so the heads have nothing to draft from:
  // the sampled tree is the root alone, which the decoder takes as a plain step.
  const table_model_options t{.vocab_size = 9, .order = 2, .seed = 8};
  for (const bool tree : {false, true}) {
    hidden_table_model target(t);
    capture cap(target);
    auto drafter = make_medusa(3, true)(cap, target);
    specdec::speculative_decoder decoder(cap, drafter);
    specdec::generate_options o;
    if (tree) o.tree = {2, 2};
    o.sampling.temperature = 0.8f;
    o.max_new_tokens = 12;
    const auto r = decoder.generate(std::vector<token_id>{4}, o);
    INFO((tree ? "tree" : "chain"));
    CHECK(r.tokens.size() == 12);
    CHECK(r.stats.drafted_tokens > 0);  // drafting starts once a row is captured
  }
}

TEST_CASE("eagle_drafter: greedy decoding with the predictor equals greedy decoding") {
  const table_model_options t{.vocab_size = 12, .order = 2, .seed = 8};
  check_greedy(t, make_eagle());
  check_greedy(t, make_eagle({.max_nodes = 6, .expand = 2}));
  SECTION("with an attention layer") {
    check_greedy(t, make_eagle({}, 2));
    check_greedy(t, make_eagle({.max_nodes = 6, .expand = 2}, 2));
  }
}

TEST_CASE("medusa_drafter: sampled decoding keeps the target's joint law") {
  const int trials = 20000;
  SECTION("chain, drawn from the heads") { check_sampled(make_medusa(3, true), {}, 3, candidate_draw::iid, trials); }
  SECTION("chain, top candidates") {
    check_sampled(make_medusa(3, true, {.candidates = head_candidates::top}), {}, 3,
                  candidate_draw::iid, trials);
  }
  SECTION("tree, i.i.d.") { check_sampled(make_medusa(2, false), {3, 2}, 0, candidate_draw::iid, trials); }
  SECTION("sparse tree, without replacement") {
    check_sampled(make_medusa(2, true, {.max_nodes = 4}), {3, 2}, 0,
                  candidate_draw::without_replacement, trials);
  }
  SECTION("tree, top candidates") {
    check_sampled(make_medusa(2, true, {.max_nodes = 5, .candidates = head_candidates::top}),
                  {3, 2}, 0, candidate_draw::iid, trials);
  }
}

TEST_CASE("eagle_drafter: sampled decoding keeps the target's joint law") {
  const int trials = 20000;
  SECTION("chain, drawn") { check_sampled(make_eagle(), {}, 3, candidate_draw::iid, trials); }
  SECTION("chain, top") {
    check_sampled(make_eagle({.candidates = head_candidates::top}), {}, 3, candidate_draw::iid,
                  trials);
  }
  SECTION("tree, without replacement, budget") {
    check_sampled(make_eagle({.max_nodes = 5, .expand = 2}), {3, 2, 2}, 0,
                  candidate_draw::without_replacement, trials);
  }
  SECTION("tree, i.i.d.") {
    check_sampled(make_eagle({.expand = 1}), {2, 2}, 0, candidate_draw::iid, trials);
  }
  SECTION("tree, top candidates, re-ranked") {
    check_sampled(make_eagle({.max_nodes = 5, .expand = 2, .candidates = head_candidates::top}),
                  {3, 2, 2}, 0, candidate_draw::iid, trials);
  }
  SECTION("with attention: chain, drawn") {
    check_sampled(make_eagle({}, 2), {}, 3, candidate_draw::iid, trials);
  }
  SECTION("with attention: tree, without replacement, budget") {
    check_sampled(make_eagle({.max_nodes = 5, .expand = 2}, 2), {3, 2, 2}, 0,
                  candidate_draw::without_replacement, trials);
  }
  SECTION("with attention: tree, top candidates, re-ranked") {
    check_sampled(make_eagle({.max_nodes = 5, .expand = 2, .candidates = head_candidates::top}, 2),
                  {3, 2, 2}, 0, candidate_draw::iid, trials);
  }
}

namespace {

// The drafter's greedy chain of k after `history`, with the target holding all but its last token.
template <class Drafter>
std::vector<token_id> chain(capture& cap, Drafter& drafter, const std::vector<token_id>& history,
                            std::size_t k) {
  cap.truncate(0);
  std::vector<float> logits((history.size() - 1) * cap.vocab_size());
  cap.append(std::span<const token_id>(history).first(history.size() - 1), logits);
  specdec::rng gen(1);
  specdec::draft d;
  drafter.propose(history, k, specdec::sampling_params{.temperature = 0.0f}, gen, d);
  return d.tokens;
}

}  // namespace

TEST_CASE("medusa_drafter: each head's row is its own, whichever classifier it reads") {
  // The heads that share the target's classifier are multiplied with it in one product; a head
  // with its own classifier reads that. Shared, own and mixed heads give the q rows that
  // medusa_logits gives head by head (at temperature 1: the softmax of the logits).
  const table_model_options t{.vocab_size = 10, .order = 2, .seed = 4};
  hidden_table_model target(t);
  capture cap(target);
  const std::vector<token_id> history{3, 1, 4, 1, 5};
  for (const int mix : {0, 1, 2}) {  // shared, own, mixed
    INFO("mix " << mix);
    auto w = medusa(10, 4, mix == 1);
    if (mix == 2) w.heads[1].classifier = random_matrix(10, 10, 1.5f, 77);
    w.input_scale = 2.0f;
    const auto weights = w;
    specdec::medusa_drafter drafter(cap, std::move(w), view(target.classifier()));
    cap.truncate(0);
    std::vector<float> logits((history.size() - 1) * cap.vocab_size());
    cap.append(std::span<const token_id>(history).first(history.size() - 1), logits);
    specdec::rng gen(1);
    specdec::draft d;
    drafter.propose(history, 4, specdec::sampling_params{.temperature = 1.0f}, gen, d);
    REQUIRE(d.q.rows() == 4);
    const auto row = cap.hidden(history.size() - 2);
    const Eigen::Map<const specdec::prob_row> hidden(row.data(),
                                                     static_cast<Eigen::Index>(row.size()));
    specdec::prob_row r, out;
    std::vector<float> want(10);
    for (std::size_t k = 0; k < 4; ++k) {
      specdec::medusa_logits(weights, k, hidden, view(target.classifier()), r, out);
      specdec::softmax(std::span<const float>(out.data(), 10), want);
      for (Eigen::Index x = 0; x < 10; ++x)
        CHECK(d.q(static_cast<Eigen::Index>(k), x) ==
              Approx(want[static_cast<std::size_t>(x)]).margin(1e-6));
    }
  }
}

TEST_CASE("heads drafters: rehearse changes nothing a later propose reads") {
  const table_model_options t{.vocab_size = 10, .order = 2, .seed = 4};
  hidden_table_model target(t);
  capture cap(target);
  const std::vector<token_id> history{3, 1, 4, 1, 5};
  const auto check = [&](auto make) {
    auto fresh = make(cap, target);
    auto rehearsed = make(cap, target);
    const auto want = chain(cap, fresh, history, 4);
    (void)chain(cap, rehearsed, history, 4);
    for (const std::size_t n : {1, 8, 3, 0}) rehearsed.rehearse(n);  // grows, then shrinks
    CHECK(chain(cap, rehearsed, history, 4) == want);
    // calibrate times it as the drafting cost (a counter clock: one tick per read).
    double now = 0.0;
    const auto cost = specdec::calibrate(cap, rehearsed, {.max_n = 3, .draft_width = 4},
                                         [&now] { return now += 1.0; });
    CHECK(cost.draft_per_level == 1.0);  // each timing reads the clock twice
    CHECK(cap.size() == history.size() - 1);  // the target as found
  };
  SECTION("eagle, MLP alone") { check(make_eagle()); }
  SECTION("eagle, with the attention layer") { check(make_eagle({}, 2)); }
  SECTION("medusa") { check(make_medusa(3, false)); }
}

TEST_CASE("eagle_drafter: the attention's context cache follows the history") {
  const table_model_options t{.vocab_size = 10, .order = 2, .seed = 4};
  hidden_table_model target(t);
  capture cap(target);
  auto warm = make_eagle({}, 2)(cap, target);
  const auto fresh_chain = [&](const std::vector<token_id>& history) {
    auto fresh = make_eagle({}, 2)(cap, target);
    return chain(cap, fresh, history, 5);
  };
  // Grown one token at a time, rewritten in the middle, shortened, grown again: the warm
  // drafter (which keeps its keys) drafts what a fresh one drafts each time.
  std::vector<std::vector<token_id>> histories;
  std::vector<token_id> h{3, 1, 4};
  for (token_id x : {1, 5, 9, 2, 6, 5, 3}) histories.push_back(h), h.push_back(x);
  histories.push_back({3, 1, 7, 1, 5, 9, 2});
  histories.push_back({3, 1, 7});
  histories.push_back({3, 1, 7, 8, 8, 8, 0, 2});
  histories.push_back({6, 1, 7, 8, 8, 8, 0, 2});
  for (const auto& history : histories) {
    INFO("history of " << history.size() << " tokens starting " << history[0]);
    const auto want = fresh_chain(history);
    CHECK(chain(cap, warm, history, 5) == want);
  }
  SECTION("the context changes the drafts") {  // else the checks above would prove little
    CHECK(fresh_chain({3, 1, 4, 1, 5, 9}) != fresh_chain({0, 0, 4, 1, 5, 9}));
  }
  SECTION("a tree of single branches drafts the chain") {
    const std::vector<token_id> history{3, 1, 4, 1, 5};
    const auto want = fresh_chain(history);
    specdec::tree_draft tree;
    specdec::rng gen(1);
    const std::vector<std::size_t> ones(5, 1);
    warm.propose_tree(history, ones, specdec::sampling_params{.temperature = 0.0f}, gen,
                      candidate_draw::deterministic, tree);
    REQUIRE(tree.tree.size() == 6);
    for (std::size_t i = 1; i < 6; ++i) CHECK(tree.tree.token(i) == want[i - 1]);
  }
  SECTION("rows filled behind the capture's back are left out of the context") {
    const std::vector<token_id> history{5, 5, 4, 1, 5, 9};
    (void)chain(cap, warm, history, 5);  // the warm drafter holds keys for this history
    const auto propose = [&](auto& drafter) {
      specdec::rng gen(1);
      specdec::draft d;
      drafter.propose(history, 5, specdec::sampling_params{.temperature = 0.0f}, gen, d);
      return d.tokens;
    };
    // Positions 0 and 1 filled behind the capture's back: it has no rows for them.
    cap.truncate(0);
    std::vector<float> logits(5 * 10), rows(2 * 10);
    target.append(std::span<const token_id>(history).first(2), std::span<float>(logits).first(20),
                  rows);
    cap.append(std::span<const token_id>(history).subspan(2, 3),
               std::span<float>(logits).first(30));
    REQUIRE(cap.hidden(1).empty());
    REQUIRE(cap.hidden(2).size() == 10);
    auto fresh = make_eagle({}, 2)(cap, target);
    const auto want = propose(fresh);
    CHECK(propose(warm) == want);
    CHECK(want != chain(cap, fresh, history, 5));  // with every row known, other drafts
  }
}

TEST_CASE("expected_acceptance: the heads' measured accuracy as the speed policy's start") {
  auto e = eagle(4, 8);
  CHECK(specdec::expected_acceptance(e).rate.empty());  // no accuracy carried: nothing expected
  e.depth_accuracy = {0.75f, 0.5f, std::nanf(""), 1.5f, -0.25f};
  const auto pe = specdec::expected_acceptance(e);
  REQUIRE(pe.rate.size() == 5);  // a chain: one rank per depth; odd values read as rates
  CHECK(pe.rate[0] == std::vector<double>{0.75});
  CHECK(pe.rate[1] == std::vector<double>{0.5});
  CHECK(pe.rate[2] == std::vector<double>{0.0});
  CHECK(pe.rate[3] == std::vector<double>{1.0});
  CHECK(pe.rate[4] == std::vector<double>{0.0});
  auto m = medusa(4, 2, false);
  m.rank_accuracy = row_matrix{{0.5f, 0.25f, 0.125f}, {0.75f, 0.5f, 0.25f}};
  const auto pm = specdec::expected_acceptance(m);
  REQUIRE(pm.rate.size() == 2);
  CHECK(pm.rate[0] == std::vector<double>{0.5, 0.25, 0.125});
  REQUIRE(pm.rate[1].size() == 3);  // summing past 1: scaled to sum 1
  CHECK(pm.rate[1][0] == Approx(0.5));
  CHECK(pm.rate[1][1] == Approx(1.0 / 3));
  CHECK(pm.rate[1][2] == Approx(1.0 / 6));

  // expected_acceptance_of: a heads drafter's profile, nothing for other drafters.
  hidden_table_model target({.vocab_size = 12, .order = 2, .seed = 8});
  capture cap(target);
  auto weights = eagle(12, 16);
  weights.depth_accuracy = {0.5f, 0.25f};
  specdec::eagle_drafter drafter(cap, weights, view(target.classifier()),
                                 view(embedding_of(12)));
  CHECK(specdec::expected_acceptance_of(drafter).rate ==
        std::vector<std::vector<double>>{{0.5}, {0.25}});
  specdec::ngram_drafter lookup;
  CHECK(specdec::expected_acceptance_of(lookup).rate.empty());
}

TEST_CASE("heads drafters: bad input") {
  const table_model_options t{.vocab_size = 6, .order = 3, .seed = 2};
  hidden_table_model target(t);
  capture cap(target);
  SECTION("weights of another width") {
    auto w = medusa(7, 2, false);
    REQUIRE_THROWS_WITH(specdec::medusa_drafter(cap, w, view(target.classifier())),
                        "medusa_weights: heads[0].w is 7 x 7, expected the hidden width 6 x 6");
    REQUIRE_THROWS_WITH(
        specdec::eagle_drafter(cap, eagle(7, 4), view(target.classifier()), view(embedding_of(6))),
        "eagle_weights: w1 has 14 columns, expected 2 x hidden width = 12");
  }
  SECTION("an attention layer of the wrong shape") {
    auto w = eagle(6, 4, 2);
    w.attention.wv = random_matrix(8, 10, 1.0f, 1);
    REQUIRE_THROWS_WITH(
        specdec::eagle_drafter(cap, w, view(target.classifier()), view(embedding_of(6))),
        "eagle_weights: attention wv is 8 x 10, expected 8 x 2 x hidden width = 12");
    w = eagle(6, 4, 2);
    w.attention.heads = 3;
    REQUIRE_THROWS_WITH(
        specdec::eagle_drafter(cap, w, view(target.classifier()), view(embedding_of(6))),
        "eagle_weights: attention wq has 8 rows, not a positive multiple of heads = 3");
    w = eagle(6, 4, 2);
    w.attention.heads = 8;  // width 1: odd under rotary positions
    REQUIRE_THROWS_WITH(
        specdec::eagle_drafter(cap, w, view(target.classifier()), view(embedding_of(6))),
        "eagle_weights: attention head width 1 must be even with rotary positions");
  }
  SECTION("NaN in a context row under attention: a clear error, then the decoder still works") {
    auto drafter = make_eagle({}, 2)(cap, target);
    specdec::speculative_decoder decoder(cap, drafter);
    specdec::generate_options o;
    o.max_new_tokens = 20;
    o.sampling.temperature = 0.0f;
    const std::vector<token_id> prompt{1, 2, 3, 4};
    target.nan_at = 1;  // the start row (position 2) is finite; position 1 is context
    REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                        "eagle_drafter: the target's hidden row at position 1 is not finite "
                        "(NaN or inf)");
    target.nan_at = static_cast<std::size_t>(-1);
    table_model plain(t);
    const std::vector<token_id> other{1, 5, 3, 4};  // position 1 is computed again
    CHECK(decoder.generate(other, o).tokens ==
          specdec::generate_autoregressive(plain, other, o).tokens);
  }
  SECTION("NaN in a hidden row: a clear error, then the decoder still works") {
    specdec::medusa_drafter drafter(cap, medusa(6, 2, false), view(target.classifier()));
    specdec::speculative_decoder decoder(cap, drafter);
    specdec::generate_options o;
    o.max_new_tokens = 20;
    o.sampling.temperature = 0.0f;
    const std::vector<token_id> prompt{1, 2, 3};
    target.nan_at = 1;
    REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                        "medusa_drafter: the target's hidden row at position 1 is not finite "
                        "(NaN or inf)");
    target.nan_at = static_cast<std::size_t>(-1);
    table_model plain(t);
    const std::vector<token_id> other{1, 4, 3};  // position 1 is computed again
    CHECK(decoder.generate(other, o).tokens ==
          specdec::generate_autoregressive(plain, other, o).tokens);
  }
}

TEST_CASE("heads drafters: shapes whose node count overflows or passes max_tree_nodes") {
  const table_model_options t{.vocab_size = 6, .order = 3, .seed = 2};
  hidden_table_model target(t);
  capture cap(target);
  const std::vector<token_id> history{1, 2, 3, 4};
  std::vector<float> logits(3 * 6);
  cap.append(std::span<const token_id>(history).first(3), logits);
  const specdec::sampling_params greedy{.temperature = 0.0f};
  specdec::rng gen(1);
  specdec::tree_draft out;
  // 2^32 + 2^32 (2^32 - 1) = 2^64 nodes: a size_t product that wraps to 0.
  const std::size_t big = std::size_t{1} << 32;
  const std::vector<std::size_t> wraps{big, big - 1};
  const std::vector<std::size_t> huge{65536, 65536, 65536};
  SECTION("medusa: a sparse tree of max_nodes from a shape whose size wraps") {
    auto drafter = make_medusa(3, false, {.max_nodes = 8})(cap, target);
    drafter.propose_tree(history, wraps, greedy, gen, candidate_draw::iid, out);
    CHECK(out.tree.size() == 9);
    drafter.propose_tree(history, huge, greedy, gen, candidate_draw::iid, out);
    CHECK(out.tree.size() == 9);
  }
  SECTION("medusa: the full shape beyond max_tree_nodes is refused") {
    auto drafter = make_medusa(3, false)(cap, target);
    for (const auto& shape : {wraps, huge})
      REQUIRE_THROWS_WITH(
          drafter.propose_tree(history, shape, greedy, gen, candidate_draw::iid, out),
          Catch::StartsWith("medusa_drafter::propose_tree: the shape ") &&
              Catch::EndsWith(" has more nodes than max_tree_nodes = 1048576; set "
                              "medusa_drafter_options::max_nodes or draft a smaller shape"));
  }
  SECTION("eagle: a pruned tree of max_nodes from a shape whose size wraps") {
    auto drafter = make_eagle({.max_nodes = 8})(cap, target);
    drafter.propose_tree(history, wraps, greedy, gen, candidate_draw::iid, out);
    CHECK(out.tree.size() == 9);
    drafter.propose_tree(history, huge, greedy, gen, candidate_draw::iid, out);
    CHECK(out.tree.size() == 9);
  }
  SECTION("eagle: a tree that would grow past max_tree_nodes is refused before drafting") {
    // Every node expanded, 6 top tokens each: 6 + 36 + ... + 6^8 > 2^20 nodes before pruning.
    auto drafter = make_eagle({.max_nodes = 8, .expand = 0})(cap, target);
    const std::vector<std::size_t> wide(8, 6);
    REQUIRE_THROWS_WITH(
        drafter.propose_tree(history, wide, greedy, gen, candidate_draw::iid, out),
        "eagle_drafter::propose_tree: the shape 6x6x6x6x6x6x6x6 would grow more nodes than "
        "max_tree_nodes = 1048576 (expand = 0); set eagle_drafter_options::expand or draft a "
        "smaller shape");
    auto full = make_eagle()(cap, target);
    REQUIRE_THROWS_WITH(
        full.propose_tree(history, huge, greedy, gen, candidate_draw::iid, out),
        Catch::Contains("has more nodes than max_tree_nodes = 1048576"));
    drafter.propose_tree(history, std::vector<std::size_t>(4, 6), greedy, gen,
                         candidate_draw::iid, out);
    CHECK(out.tree.size() == 9);  // 6 + 36 + 216 + 1296 grown, 8 kept
  }
}

namespace {
// A hidden_row_source whose rows are one float short of its hidden_size().
struct short_rows {
  std::vector<token_id> held{1, 2, 3};
  std::vector<float> row = std::vector<float>(5, 0.5f);
  std::size_t size() const { return held.size(); }
  std::size_t hidden_size() const { return 6; }
  std::size_t vocab_size() const { return 6; }
  std::span<const float> hidden(std::size_t) const { return row; }
  std::span<const token_id> tokens() const { return held; }
};
}  // namespace

TEST_CASE("heads drafters: a hidden row of the wrong width is refused, not read past its end") {
  short_rows source;
  const row_matrix classifier = random_matrix(6, 6, 1.0f, 3);
  const std::vector<token_id> history{1, 2, 3, 4};
  const specdec::sampling_params greedy{.temperature = 0.0f};
  specdec::rng gen(1);
  specdec::draft chain;
  specdec::tree_draft tree;
  const std::vector<std::size_t> shape{2, 2};
  specdec::medusa_drafter medusa_d(source, medusa(6, 2, false), view(classifier));
  REQUIRE_THROWS_WITH(medusa_d.propose(history, 2, greedy, gen, chain),
                      "medusa_drafter: the target's hidden row at position 2 has 5 entries, "
                      "not hidden_size() = 6");
  specdec::eagle_drafter eagle_d(source, eagle(6, 4), view(classifier), view(embedding_of(6)));
  REQUIRE_THROWS_WITH(eagle_d.propose_tree(history, shape, greedy, gen, candidate_draw::iid, tree),
                      "eagle_drafter: the target's hidden row at position 2 has 5 entries, not "
                      "hidden_size() = 6");
  source.row.resize(6, 0.5f);
  CHECK_NOTHROW(medusa_d.propose(history, 2, greedy, gen, chain));
  CHECK(chain.size() == 2);
}

TEST_CASE("heads drafters: threads lent to the products change no draft") {
  // An inner width of 8192 makes each half of the EAGLE layer's first product 8192 x 10
  // weights, enough to be split (weight_product::min_split_weights); the runner runs the chunks
  // last first, on the calling thread, and counts the products it was handed.
  struct counting_runner {
    std::size_t runs = 0;
    specdec::draft_threads lend() {
      return {.run = [](void* self, std::size_t chunks, specdec::draft_threads::job_fn job,
                        void* job_context) {
                ++static_cast<counting_runner*>(self)->runs;
                for (std::size_t i = chunks; i-- > 0;) job(job_context, i);
              },
              .context = this,
              .threads = 2};
    }
  } runner;
  const table_model_options t{.vocab_size = 10, .order = 2, .seed = 4};
  const auto make = [&](capture& cap, hidden_table_model& target, specdec::draft_threads threads,
                        std::size_t attn_heads) {
    return specdec::eagle_drafter(cap, eagle(target.vocab_size(), 8192, attn_heads),
                                  view(target.classifier()),
                                  view(embedding_of(target.vocab_size())),
                                  {.expand = 2, .threads = threads});
  };
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  for (const std::size_t attn_heads : {0, 2})
    for (const float temperature : {0.0f, 0.9f})
      for (const auto& shape : std::vector<std::vector<std::size_t>>{{}, {3, 2, 1}}) {
        CAPTURE(attn_heads, temperature, shape.size());
        specdec::generate_options o;
        o.max_new_tokens = 24;
        o.draft_length = 4;
        o.tree = shape;
        o.sampling = {.temperature = temperature, .seed = 11};
        hidden_table_model alone_target(t), lent_target(t);
        capture alone_cap(alone_target), lent_cap(lent_target);
        auto alone = make(alone_cap, alone_target, {}, attn_heads);
        auto lent = make(lent_cap, lent_target, runner.lend(), attn_heads);
        specdec::speculative_decoder a(alone_cap, alone), b(lent_cap, lent);
        const std::size_t before = runner.runs;
        const auto want = a.generate(prompt, o);
        const auto got = b.generate(prompt, o);
        CHECK(got.tokens == want.tokens);
        CHECK(got.stats.accepted_tokens == want.stats.accepted_tokens);
        CHECK(runner.runs > before);
      }
}
