// Prefill without logits: specdec::prefill (language_model.hpp), its use by the decoder's start,
// the batch decoder's add (through sequence_view), model_drafter and hidden_capture.
#include <catch2/catch.hpp>
#include <specdec/batch/sequence_view.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/concepts/language_model.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/no_drafter.hpp>

#include <stdexcept>
#include <vector>

#include "support/hidden_table_model.hpp"
#include "support/prefill_models.hpp"

using specdec::token_id;
using specdec::test::prefill_batch_table_model;
using specdec::test::prefill_table_model;
using specdec::test::recording_table_model;
using specdec::test::table_model_options;

namespace {

std::vector<token_id> prompt_of(std::size_t n, std::size_t v) {
  std::vector<token_id> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<token_id>((5 * i + 2) % v);
  return p;
}

// A model without prefill whose append writes nothing but checks sizes: large vocabularies
// cost nothing to feed.
struct wide_model {
  std::size_t v = 1 << 16;
  std::size_t n = 0, appends = 0, largest_rows = 0;
  std::size_t vocab_size() const { return v; }
  std::size_t size() const { return n; }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    if (logits.size() != tokens.size() * v) throw std::invalid_argument("wide_model: logits size");
    n += tokens.size();
    ++appends;
    largest_rows = std::max(largest_rows, tokens.size());
  }
  void truncate(std::size_t k) { n = k; }
};

}  // namespace

TEST_CASE("prefill: a model with prefill() is fed in one call, without rows") {
  STATIC_REQUIRE(specdec::PrefillLanguageModel<prefill_table_model>);
  STATIC_REQUIRE_FALSE(specdec::PrefillLanguageModel<recording_table_model>);
  prefill_table_model m({.vocab_size = 7});
  const auto p = prompt_of(100, 7);
  CHECK(specdec::prefill(m, p) == 1);
  CHECK(m.prefills == 1);
  CHECK(m.appends == 0);
  CHECK(m.size() == 100);
  CHECK(specdec::prefill(m, std::span<const token_id>()) == 0);
  CHECK(m.prefills == 1);
}

TEST_CASE("prefill: a model without prefill() is appended in chunks of bounded scratch") {
  wide_model m;  // V = 65536: 16 rows fit in prefill_scratch_floats
  const std::size_t chunk = specdec::prefill_chunk_tokens(m.v);
  REQUIRE(chunk == specdec::prefill_scratch_floats / m.v);
  const auto p = prompt_of(1000, m.v);
  std::vector<float> scratch;
  CHECK(specdec::prefill(m, p, scratch) == (1000 + chunk - 1) / chunk);
  CHECK(m.size() == 1000);
  CHECK(m.largest_rows == chunk);
  CHECK(scratch.size() <= specdec::prefill_scratch_floats);
  SECTION("a short feed uses only the rows it needs") {
    std::vector<float> small;
    CHECK(specdec::prefill(m, std::span<const token_id>(p).first(3), small) == 1);
    CHECK(small.size() == 3 * m.v);
  }
  SECTION("a vocabulary wider than the scratch still feeds one token a call") {
    CHECK(specdec::prefill_chunk_tokens(specdec::prefill_scratch_floats * 4) == 1);
  }
}

TEST_CASE("prefill: the decoder's start feeds a model without prefill() in bounded appends") {
  wide_model m;  // V = 65536
  specdec::no_drafter nd;
  specdec::speculative_decoder dec(m, nd);
  const auto p = prompt_of(1000, m.v);
  specdec::generate_options o;
  o.max_new_tokens = 4;
  dec.start(p, o);
  CHECK(m.size() == 999);
  CHECK(m.largest_rows == specdec::prefill_chunk_tokens(m.v));  // 16 rows, not 999
  CHECK(m.appends == (999 + 15) / 16);
}

TEST_CASE("prefill: the decoder feeds the prompt through prefill and decodes as before") {
  const table_model_options target_o{.vocab_size = 9, .seed = 3};
  const table_model_options draft_o{.vocab_size = 9, .seed = 3, .mix = 0.3f, .mix_seed = 8};
  const auto prompt = prompt_of(120, 9);
  for (const float temperature : {0.0f, 0.9f}) {
    specdec::generate_options o;
    o.max_new_tokens = 40;
    o.draft_length = 4;
    o.sampling.temperature = temperature;
    o.sampling.seed = 11;
    recording_table_model plain_target(target_o), plain_draft(draft_o);
    specdec::model_drafter plain_drafter(plain_draft);
    specdec::speculative_decoder plain(plain_target, plain_drafter);
    const auto want = plain.generate(prompt, o);

    prefill_table_model target(target_o), draft(draft_o);
    specdec::model_drafter drafter(draft);
    specdec::speculative_decoder dec(target, drafter);
    const auto got = dec.generate(prompt, o);
    CHECK(got.tokens == want.tokens);
    CHECK(target.prefills == 1);  // the prompt but its last token, in one call
    CHECK(target.prefilled == prompt.size() - 1);
    CHECK(target.largest_rows <= o.draft_length + 1);  // no row of the prompt was asked for
    CHECK(draft.prefills == 1);  // the drafter's first sync: the prompt but its last token
    CHECK(draft.prefilled == prompt.size() - 1);
    CHECK(draft.largest_rows <= specdec::model_drafter<prefill_table_model>::refeed_rows);
    // Without prefill, the target's prompt goes in bounded appends (V = 9: one call).
    CHECK(plain_target.largest_rows <= std::max<std::size_t>(prompt.size() - 1, o.draft_length + 1));
  }
}

TEST_CASE("prefill: the batch decoder's add feeds the prompt through the view's prefill") {
  STATIC_REQUIRE(specdec::BatchPrefillLanguageModel<prefill_batch_table_model>);
  STATIC_REQUIRE(specdec::PrefillLanguageModel<specdec::sequence_view<prefill_batch_table_model>>);
  STATIC_REQUIRE_FALSE(specdec::PrefillLanguageModel<specdec::sequence_view<specdec::test::batch_table_model>>);
  const table_model_options table{.vocab_size = 9, .seed = 3};
  const auto prompt = prompt_of(60, 9);
  specdec::generate_options o;
  o.max_new_tokens = 12;
  o.draft_length = 0;
  specdec::test::batch_table_model plain_model({.model = table});
  specdec::batch_decoder<specdec::test::batch_table_model, specdec::no_drafter> plain(plain_model);
  specdec::no_drafter nd0, nd1;
  const auto a = plain.add(prompt, o, nd0);
  plain.run();

  prefill_batch_table_model model({.model = table, .max_batch_tokens = 16});
  specdec::batch_decoder<prefill_batch_table_model, specdec::no_drafter> batch(model);
  const auto b = batch.add(prompt, o, nd1);
  CHECK(model.prefills == 4);  // 59 tokens in calls of at most max_batch_tokens = 16
  CHECK(model.prefilled == prompt.size() - 1);
  CHECK(model.largest_rows <= 1);
  batch.run();
  CHECK(batch.result(b).tokens == plain.result(a).tokens);
}

TEST_CASE("prefill: sequence_view's prefill is all or nothing over its calls") {
  prefill_batch_table_model model({.model = {.vocab_size = 5}, .max_batch_tokens = 4});
  const auto id = model.create_sequence();
  specdec::sequence_view view(model, id);
  std::vector<token_id> tokens{1, 2, 3, 4, 0, 1, 2, 3, 7};  // the 9th is outside V = 5
  CHECK_THROWS(view.prefill(tokens));
  CHECK(view.size() == 0);
  tokens.back() = 4;
  view.prefill(tokens);
  CHECK(view.size() == 9);
  CHECK(model.prefills == 2 + 3);  // the refused feed: two calls, then the third threw
}

TEST_CASE("prefill: model_drafter refeeds a long history without rows, a step's tokens in one append") {
  prefill_table_model draft({.vocab_size = 9, .seed = 4});
  specdec::model_drafter drafter(draft);
  specdec::rng gen(1);
  specdec::draft out;
  auto history = prompt_of(200, 9);
  drafter.propose(history, 3, {}, gen, out);
  CHECK(draft.prefills == 1);
  CHECK(draft.prefilled == 199);
  CHECK(draft.largest_rows == 1);
  const std::size_t prefills = draft.prefills;
  history.insert(history.end(), {1, 2, 3});
  drafter.propose(history, 3, {}, gen, out);
  CHECK(draft.prefills == prefills);  // a few new tokens: one append, as before
  CHECK(draft.size() == history.size() + 2);  // the history and the first k - 1 drafts
  SECTION("model_calls counts the prefill") {
    CHECK(drafter.model_calls() == 1 + 1 + 2 + 1 + 2);
  }
  SECTION("a tree's history goes through prefill only") {
    specdec::tree_draft tree;
    const std::vector<std::size_t> shape{2};
    auto longer = history;
    for (int i = 0; i < 40; ++i) longer.push_back(static_cast<token_id>(i % 9));
    drafter.propose_tree(longer, shape, {}, gen, specdec::candidate_draw::iid, tree);
    CHECK(draft.prefills == prefills + 1);
  }
}

TEST_CASE("prefill: hidden_capture keeps the hidden rows of what it prefills") {
  using specdec::test::hidden_table_model;
  hidden_table_model fed({.vocab_size = 6, .seed = 2}), appended({.vocab_size = 6, .seed = 2});
  specdec::hidden_capture a(fed), b(appended);
  STATIC_REQUIRE(specdec::PrefillLanguageModel<specdec::hidden_capture<hidden_table_model>>);
  const auto p = prompt_of(50, 6);
  CHECK(specdec::prefill(a, p) == 1);
  std::vector<float> logits(p.size() * 6);
  b.append(p, logits);
  REQUIRE(a.size() == 50);
  CHECK(a.in_sync());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto x = a.hidden(i), y = b.hidden(i);
    REQUIRE(x.size() == 6);
    CHECK(std::equal(x.begin(), x.end(), y.begin()));
  }
  SECTION("a refused prefill leaves the capture as it was") {
    const std::vector<token_id> bad{1, 2, 9};
    CHECK_THROWS(a.prefill(bad));
    CHECK(a.size() == 50);
    CHECK(a.in_sync());
  }
}
