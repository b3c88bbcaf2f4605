// Real-model tests of the batched engine (llama2c/engine/batch_model.hpp) and the batch decoder on it:
// the batch conformance checks (rows bit-identical to scoring alone), the reference text, every
// sequence of a batch decoding exactly as it does alone, greedy and sampled, and token-tree
// entries (tree attention and commit as llama2c::model's, bad trees and paths refused).
#include "common.hpp"  // Catch's runner, main(), the model paths and run.c's reference

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <llama2c/engine/batch_model.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

namespace l2 = specdec::llama2c;
using specdec::sequence_id;
using specdec::token_id;
using llama2c_test::checkpoint_path;
using llama2c_test::tokenizer_path;

namespace {

using draft_t = specdec::model_drafter<l2::layer_skip_draft>;
using view_t = specdec::sequence_view<l2::batch_model>;

struct fixture {
  std::shared_ptr<const l2::weights> w = l2::load_checkpoint(checkpoint_path);
  l2::tokenizer tok{tokenizer_path, w->cfg().vocab_size};
};

// Layer-skip drafts (the first 2 layers), one per sequence, at stable addresses.
struct drafts {
  std::shared_ptr<const l2::weights> w;
  std::deque<l2::layer_skip_draft> models;
  std::deque<draft_t> list;
  draft_t& make() {
    models.emplace_back(w, 2, l2::model_options{.threads = 1});
    return list.emplace_back(models.back());
  }
};

// Sequence i decodes texts[i] with options[i] and its own layer-skip drafter, all through one
// batch_decoder on one batch_model, run to the end.
struct batch_run {
  l2::batch_model model;
  drafts d;
  specdec::batch_decoder<l2::batch_model, draft_t> decoder;
  std::vector<sequence_id> ids;

  batch_run(fixture& f, const std::vector<std::string>& texts,
            const std::vector<specdec::generate_options>& options)
      : model(f.w, {.max_sequences = 8, .max_batch_tokens = 64}), d{f.w, {}, {}}, decoder(model) {
    for (std::size_t i = 0; i < texts.size(); ++i)
      ids.push_back(decoder.add(f.tok.encode(texts[i]), options[i], d.make()));
    decoder.run();
  }
};

std::vector<specdec::generate_options> varied_options() {
  std::vector<specdec::generate_options> o(4);
  o[0].sampling.temperature = 0.0f;
  o[0].draft_length = 4;
  o[1].sampling = {.temperature = 0.8f, .seed = 3};
  o[1].draft_length = 3;
  o[2].sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = 4};
  o[2].draft_length = 5;
  o[3].sampling.temperature = 0.0f;
  o[3].draft_length = 1;
  for (auto& x : o) x.max_new_tokens = 60;
  return o;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// One entry (a chain when `parents` is empty) scored alone; returns its rows.
std::vector<float> score(l2::batch_model& m, sequence_id id, std::span<const token_id> tokens,
                         std::span<const std::int32_t> parents = {}) {
  std::vector<float> rows(tokens.size() * m.vocab_size());
  const specdec::batch_entry e{id, tokens, parents, rows};
  m.score(std::span<const specdec::batch_entry>(&e, 1));
  return rows;
}

// llama2c::model's rows for `tokens` (a tree when `parents` is not empty) after `context`; the
// tree stays pending in `m`.
std::vector<float> single_rows(l2::model& m, std::span<const token_id> context,
                               std::span<const token_id> tokens,
                               std::span<const std::int32_t> parents = {}) {
  std::vector<float> ctx(context.size() * m.vocab_size()), rows(tokens.size() * m.vocab_size());
  m.append(context, ctx);
  if (parents.empty()) {
    m.append(tokens, rows);
  } else {
    m.append_tree(tokens, parents, rows);
  }
  return rows;
}

}  // namespace

TEST_CASE("llama2c batch_model: passes the batch conformance checks, rows bit-identical") {
  fixture f;
  l2::batch_model m(f.w, {.max_sequences = 16, .max_batch_tokens = 64});
  const auto rep = specdec::testing::run_batch_checks(m);
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.checks.size() == 6);  // (g1)-(g4), (g5) batch_tree and (g6) batch_prefill
  CHECK(rep.checks.back().name == "batch_prefill");
}

TEST_CASE("llama2c batch_model: a batch of one decodes run.c's reference text") {
  fixture f;
  l2::batch_model m(f.w);
  specdec::batch_decoder<l2::batch_model> batch(m);
  specdec::no_drafter none;
  const auto prompt = f.tok.encode(std::string(specdec::llama2c::reference_prompt));
  const std::size_t fed = prompt.size() - 1;  // run.c's reference starts after BOS
  specdec::generate_options o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = llama2c_test::reference_ids.size() - fed;
  const auto id = batch.add(prompt, o, none);
  batch.run();
  const auto got = batch.result(id).tokens;
  REQUIRE(got.size() == o.max_new_tokens);
  CHECK(std::equal(got.begin(), got.end(),
                   llama2c_test::reference_ids.begin() + static_cast<std::ptrdiff_t>(fed)));
}

TEST_CASE("llama2c batch_decoder: each sequence decodes exactly as it does alone") {
  fixture f;
  const auto options = varied_options();
  const std::vector<std::string> texts = {"I dreamed", "The light", "Once upon a time", "A cat"};
  batch_run run(f, texts, options);
  const auto& batch = run.decoder;
  const auto& ids = run.ids;
  CHECK(batch.stats().target_calls == batch.stats().steps);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("sequence " << i << ": " << texts[i]);
    l2::batch_model alone_model(f.w, {.max_sequences = 1});
    view_t view(alone_model, alone_model.create_sequence());
    drafts da{f.w, {}, {}};
    specdec::speculative_decoder alone(view, da.make());
    CHECK(batch.result(ids[i]).tokens == alone.generate(f.tok.encode(texts[i]), options[i]).tokens);
  }
  // Greedy sequences also equal plain greedy decoding on the single-sequence engine.
  l2::model single(f.w);
  specdec::generate_options g = options[0];
  CHECK(batch.result(ids[0]).tokens ==
        specdec::generate_autoregressive(single, f.tok.encode(texts[0]), g).tokens);
}

TEST_CASE("llama2c batch_model: bad input is refused naming the entry, nothing changes") {
  fixture f;
  l2::batch_model m(f.w, {.max_sequences = 2, .max_batch_tokens = 8});
  const auto a = m.create_sequence();
  m.create_sequence();
  REQUIRE_THROWS_WITH(m.create_sequence(),
                      "llama2c::batch_model::create_sequence: 2 sequences are live, "
                      "max_sequences = 2");
  std::vector<float> logits(2 * m.vocab_size());
  const std::vector<token_id> bad{1, 512};
  const specdec::batch_entry e{a, bad, {}, logits};
  REQUIRE_THROWS_WITH(m.score(std::span<const specdec::batch_entry>(&e, 1)),
                      "llama2c::batch_model::score: entry 0 (sequence " + std::to_string(a) +
                          "): token 512 at index 1 outside the vocabulary [0, 512)");
  CHECK(m.size(a) == 0);
  m.release_sequence(a);
  REQUIRE_THROWS_WITH(m.size(a), "llama2c::batch_model::size: sequence " + std::to_string(a) +
                                     " is unknown (never created, or released)");
}

TEST_CASE("llama2c batch_model: tree and chain entries in one call match llama2c::model alone") {
  fixture f;
  const std::size_t v = 512;
  // A: 12 nodes, three roots, depths up to 4 (llama2c_test's tree); B: a chain; C: a binary tree.
  const std::vector<token_id> ctx_a{1, 303, 281, 269, 435}, ctx_b{1, 447, 328},
      ctx_c{1, 379, 441, 260, 299, 303, 266};
  const std::vector<token_id> tok_a{447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260};
  const std::vector<std::int32_t> par_a{-1, 0, 1, 1, -1, 4, 2, 6, 3, -1, 9, 9};
  const std::vector<token_id> tok_b{446, 299, 303};
  const std::vector<token_id> tok_c{300, 301, 302, 303, 304, 305, 306};
  const std::vector<std::int32_t> par_c{-1, 0, 0, 1, 1, 2, 2};
  l2::batch_model m(f.w, {.max_sequences = 8, .max_batch_tokens = 64});
  const sequence_id a = m.create_sequence(), b = m.create_sequence(), c = m.create_sequence();
  score(m, a, ctx_a);
  score(m, b, ctx_b);
  score(m, c, ctx_c);
  std::vector<float> ra(tok_a.size() * v), rb(tok_b.size() * v), rc(tok_c.size() * v);
  const std::vector<specdec::batch_entry> batch{
      {a, tok_a, par_a, ra}, {b, tok_b, {}, rb}, {c, tok_c, par_c, rc}};
  m.score(batch);
  CHECK(m.size(a) == ctx_a.size());  // a pending tree is not counted
  CHECK(m.size(b) == ctx_b.size() + tok_b.size());
  CHECK(m.size(c) == ctx_c.size());
  CHECK(m.tree_pending(a));
  CHECK_FALSE(m.tree_pending(b));
  CHECK(m.tree_pending(c));

  SECTION("each entry's rows are the bits of scoring it alone on the engine") {
    const auto alone = [&](std::span<const token_id> ctx, std::span<const token_id> tokens,
                           std::span<const std::int32_t> parents) {
      const sequence_id id = m.create_sequence();
      score(m, id, ctx);
      auto rows = score(m, id, tokens, parents);
      m.release_sequence(id);
      return rows;
    };
    CHECK(alone(ctx_a, tok_a, par_a) == ra);
    CHECK(alone(ctx_b, tok_b, {}) == rb);
    CHECK(alone(ctx_c, tok_c, par_c) == rc);
  }

  SECTION("rows, commit and what follows equal llama2c::model on each sequence") {
    l2::model sa(f.w), sb(f.w), sc(f.w);
    const float da = max_abs_diff(single_rows(sa, ctx_a, tok_a, par_a), ra);
    const float db = max_abs_diff(single_rows(sb, ctx_b, tok_b), rb);
    const float dc = max_abs_diff(single_rows(sc, ctx_c, tok_c, par_c), rc);
    std::cout << "llama2c batch_model: max |batch - model| logit difference: tree " << da
              << ", chain " << db << ", tree " << dc << "\n";
    CHECK(da < 1e-4f);
    CHECK(db < 1e-4f);
    CHECK(dc < 1e-4f);
    // A keeps its deepest path, C a path through its second child; both then continue with a
    // chain in one call, B with a tree.
    const std::vector<std::int32_t> path_a{0, 1, 2, 6, 7}, path_c{0, 2, 5};
    m.commit(a, path_a);
    sa.commit(path_a);
    m.commit(c, path_c);
    sc.commit(path_c);
    CHECK(m.size(a) == ctx_a.size() + path_a.size());
    CHECK(m.size(c) == ctx_c.size() + path_c.size());
    CHECK_FALSE(m.tree_pending(a));
    CHECK_FALSE(m.tree_pending(c));
    const std::vector<token_id> next{441, 260};
    const std::vector<std::int32_t> fork{-1, -1};
    std::vector<float> na(2 * v), nb(2 * v), nc(2 * v), wa(2 * v), wb(2 * v), wc(2 * v);
    const std::vector<specdec::batch_entry> again{
        {c, next, {}, nc}, {a, next, {}, na}, {b, next, fork, nb}};
    m.score(again);
    sa.append(next, wa);
    sb.append_tree(next, fork, wb);
    sc.append(next, wc);
    CHECK(max_abs_diff(wa, na) < 1e-4f);
    CHECK(max_abs_diff(wb, nb) < 1e-4f);
    CHECK(max_abs_diff(wc, nc) < 1e-4f);
    CHECK(m.size(a) == sa.size());
    CHECK(m.size(b) == sb.size());
    CHECK(m.size(c) == sc.size());
  }

  SECTION("a tree wider than the positions left grows its sequence's cache, as model's does") {
    // 120 of 128 positions used; 16 roots need 16 cache rows but one position.
    const std::vector<token_id> fill(120, 300), wide(16, 301);
    const std::vector<std::int32_t> roots(16, -1);
    const sequence_id id = m.create_sequence();
    score(m, id, std::span(fill).first(60));  // max_batch_tokens() = 64
    score(m, id, std::span(fill).subspan(60));
    const auto rows = score(m, id, wide, roots);
    l2::model single(f.w);
    CHECK(max_abs_diff(single_rows(single, fill, wide, roots), rows) < 1e-4f);
    m.commit(id, std::vector<std::int32_t>{3});
    single.commit(std::vector<std::int32_t>{3});
    CHECK(m.size(id) == 121);
    std::vector<std::int32_t> chain(8);
    for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = static_cast<std::int32_t>(i) - 1;
    CHECK_THROWS_AS(score(m, id, std::span(wide).first(8), chain), std::length_error);
    CHECK(m.size(id) == 121);
    const std::vector<token_id> next{302, 303};
    std::vector<float> want(2 * v);
    single.append(next, want);
    CHECK(max_abs_diff(want, score(m, id, next)) < 1e-4f);
  }
}

TEST_CASE("llama2c batch_model: bad trees and commit paths are refused, nothing changes") {
  fixture f;
  const std::size_t v = 512;
  l2::batch_model m(f.w, {.max_context = 8, .max_sequences = 4, .max_batch_tokens = 16});
  const std::vector<token_id> ctx{1, 303, 281, 269}, good{447, 328, 446};
  const std::vector<std::int32_t> tree{-1, 0, 0};
  const sequence_id a = m.create_sequence(), b = m.create_sequence(), ref = m.create_sequence();
  for (const sequence_id id : {a, b, ref}) score(m, id, ctx);
  const auto ref_tree = score(m, ref, good, tree);  // the rows of a clean run
  const auto what = [](sequence_id id) { return "sequence " + std::to_string(id) + ": "; };
  REQUIRE_THROWS_WITH(m.commit(a, {}), "llama2c::batch_model::commit: " + what(a) +
                                           "no pending tree (score a tree entry for it first)");
  score(m, b, good, tree);  // b holds a pending tree through the failures below
  const auto unchanged = [&] {
    CHECK(m.size(a) == ctx.size());
    CHECK(m.size(b) == ctx.size());
    CHECK_FALSE(m.tree_pending(a));
    CHECK(m.tree_pending(b));
  };

  SECTION("bad parents, in a call whose other entry is good") {
    const std::string where =
        "llama2c::batch_model::score: entry 1 (sequence " + std::to_string(a) + "): ";
    const auto refused = [&](std::span<const token_id> tokens,
                             std::span<const std::int32_t> parents) {
      std::vector<float> rb(good.size() * v), ra(tokens.size() * v);
      const std::vector<specdec::batch_entry> batch{{b, good, tree, rb}, {a, tokens, parents, ra}};
      m.score(batch);
    };
    const std::vector<std::int32_t> short_parents{-1, 0}, forward{-1, 1, 0}, below{-1, 0, -2};
    REQUIRE_THROWS_WITH(refused(good, short_parents),
                        where + "parents.size() = 2 differs from tokens.size() = 3");
    REQUIRE_THROWS_WITH(refused(good, forward), where + "parents[1] = 1 must be -1 or in [0, 1)");
    REQUIRE_THROWS_WITH(refused(good, below), where + "parents[2] = -2 must be -1 or in [0, 2)");
    const std::vector<token_id> five(5, 300);
    const std::vector<std::int32_t> deep{-1, 0, 1, 2, 3};  // depth 4 after 4 tokens: 9 > 8
    REQUIRE_THROWS_AS(refused(five, deep), std::length_error);
    REQUIRE_THROWS_WITH(refused(five, deep),
                        where + "a node of depth 4 after 4 tokens passes max_size() = 8");
    const std::vector<token_id> many(l2::batch_model::max_tree_nodes + 1, 300);
    const std::vector<std::int32_t> flat(many.size(), -1);
    REQUIRE_THROWS_WITH(refused(many, flat),
                        where + "a tree of 4097 nodes exceeds the engine's bound of "
                                "max_tree_nodes = 4096");
    unchanged();
    // b's pending tree survived: committing it gives the clean run's next rows.
    m.commit(b, std::vector<std::int32_t>{0, 2});
    m.commit(ref, std::vector<std::int32_t>{0, 2});
    const std::vector<token_id> next{260};
    CHECK(score(m, b, next) == score(m, ref, next));
    // a's context is untouched: its tree now scores as the clean run's did.
    CHECK(score(m, a, good, tree) == ref_tree);
  }

  SECTION("bad commit paths and ids") {
    const std::string where = "llama2c::batch_model::commit: " + what(b);
    REQUIRE_THROWS_WITH(m.commit(b, std::vector<std::int32_t>{1}),
                        where + "path[0] = 1 has parent 0, expected -1 (a chain from a root)");
    REQUIRE_THROWS_WITH(m.commit(b, std::vector<std::int32_t>{0, 3}),
                        where + "path[1] = 3 is not a node of the pending tree of 3");
    REQUIRE_THROWS_WITH(m.commit(b, std::vector<std::int32_t>{0, 1, 2}),
                        where + "path[2] = 2 has parent 0, expected 1 (a chain from a root)");
    REQUIRE_THROWS_WITH(m.commit(b, std::vector<std::int32_t>{-1}),
                        where + "path[0] = -1 is not a node of the pending tree of 3");
    REQUIRE_THROWS_WITH(m.commit(999, {}), "llama2c::batch_model::commit: sequence 999 is "
                                            "unknown (never created, or released)");
    unchanged();
    m.commit(b, std::vector<std::int32_t>{0, 2});
    m.commit(ref, std::vector<std::int32_t>{0, 2});
    CHECK(m.size(b) == ctx.size() + 2);
    const std::vector<token_id> next{260};
    CHECK(score(m, b, next) == score(m, ref, next));
  }

  SECTION("truncate and a new entry discard a pending tree") {
    m.truncate(b, ctx.size());
    CHECK_FALSE(m.tree_pending(b));
    CHECK(m.size(b) == ctx.size());
    REQUIRE_THROWS_AS(m.commit(b, {}), std::logic_error);
    score(m, b, good, tree);
    score(m, b, std::span(good).first(1));  // a chain: the tree goes, the token stays
    CHECK_FALSE(m.tree_pending(b));
    CHECK(m.size(b) == ctx.size() + 1);
    score(m, b, good, tree);
    const std::vector<std::int32_t> other{-1, -1};
    score(m, b, std::span(good).first(2), other);  // a new tree replaces the pending one
    REQUIRE_THROWS_WITH(m.commit(b, std::vector<std::int32_t>{2}),
                        "llama2c::batch_model::commit: " + what(b) +
                            "path[0] = 2 is not a node of the pending tree of 2");
    m.commit(b, {});  // keeps nothing; the tree is no longer pending
    CHECK_FALSE(m.tree_pending(b));
    CHECK(m.size(b) == ctx.size() + 1);
  }
}

TEST_CASE("llama2c batch_decoder: tree steps decode as speculative_decoder on llama2c::model") {
  fixture f;
  const std::vector<std::string> texts = {"I dreamed", "The light", "Once upon a time"};
  std::vector<specdec::generate_options> options(3);
  options[0].sampling.temperature = 0.0f;
  options[0].tree = {4, 2, 2};
  options[1].sampling = {.temperature = 0.8f, .seed = 5};
  options[1].tree = {3, 2};
  options[2].sampling.temperature = 0.0f;  // a chain sequence in the same calls
  options[2].draft_length = 4;
  for (auto& o : options) o.max_new_tokens = 60;
  batch_run run(f, texts, options);
  const auto& batch = run.decoder;
  const auto& ids = run.ids;
  CHECK(batch.stats().target_calls == batch.stats().steps);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("sequence " << i << ": " << texts[i]);
    CHECK(batch.status(ids[i]) == specdec::sequence_status::finished);
    l2::model single(f.w);
    drafts da{f.w, {}, {}};
    specdec::speculative_decoder alone(single, da.make());
    const auto want = alone.generate(f.tok.encode(texts[i]), options[i]);
    const auto got = batch.result(ids[i]);
    CHECK(got.tokens == want.tokens);
    CHECK(got.stats.accepted_tokens == want.stats.accepted_tokens);
    CHECK(got.stats.drafted_nodes == want.stats.drafted_nodes);
    // The tree sequences sent trees (more nodes than positions), the chain one chains.
    if (options[i].tree.empty()) {
      CHECK(got.stats.drafted_nodes == got.stats.drafted_tokens);
    } else {
      CHECK(got.stats.drafted_nodes > got.stats.drafted_tokens);
    }
  }
}
