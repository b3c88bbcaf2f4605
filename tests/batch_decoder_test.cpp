#include <catch2/catch.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/composed_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include <cmath>
#include <deque>
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/table_model.hpp"

namespace {

using specdec::sequence_id;
using specdec::token_id;
using specdec::test::batch_table_model;
using specdec::test::batch_table_options;
using specdec::test::table_model;
using specdec::test::table_model_options;
using drafter_t = specdec::model_drafter<table_model>;
using view_t = specdec::sequence_view<batch_table_model>;

const table_model_options target_table{.vocab_size = 16, .order = 3, .seed = 7};
const table_model_options draft_table{.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.35f,
                                      .mix_seed = 9};

struct request {
  std::vector<token_id> prompt;
  specdec::generate_options options;
};

// Each sequence's drafter (and its draft model), kept at stable addresses.
struct drafters {
  std::deque<table_model> models;
  std::deque<drafter_t> list;
  drafter_t& make() {
    models.emplace_back(draft_table);
    return list.emplace_back(models.back());
  }
};

// Five requests that differ in everything a sequence may choose.
std::vector<request> varied_requests() {
  std::vector<request> r(5);
  r[0].prompt = {3, 1, 4, 1, 5};
  r[0].options.sampling.temperature = 0.0f;
  r[0].options.draft_length = 4;
  r[0].options.max_new_tokens = 40;
  r[1].prompt = {2, 7};
  r[1].options.sampling = {.temperature = 0.9f, .top_p = 0.9f, .seed = 11};
  r[1].options.draft_length = 3;
  r[1].options.max_new_tokens = 50;
  r[2].prompt = {9, 9, 2, 6, 5, 3, 5};
  r[2].options.sampling = {.temperature = 1.0f, .seed = 12};
  r[2].options.draft_length = 6;
  r[2].options.verification = specdec::verification_rule::block;
  r[2].options.max_new_tokens = 35;
  r[3].prompt = {1};
  r[3].options.sampling = {.temperature = 0.7f, .top_k = 5, .seed = 13};
  r[3].options.tree = {2, 2};
  r[3].options.max_new_tokens = 30;
  r[4].prompt = {4, 4, 4};
  r[4].options.sampling.temperature = 0.0f;
  r[4].options.draft_length = 2;
  r[4].options.stop_tokens = {0, 15};
  r[4].options.max_new_tokens = 60;
  return r;
}

// The tokens of decoding `q` alone: the single-sequence decoder on one sequence of a fresh model.
std::vector<token_id> alone(const request& q) {
  batch_table_model model({.model = target_table});
  view_t view(model, model.create_sequence());
  table_model draft_model(draft_table);
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(view, drafter);
  return decoder.generate(q.prompt, q.options).tokens;
}

}  // namespace

TEST_CASE("batch_decoder: each sequence's tokens equal decoding it alone, with one call a step") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table});
  drafters d;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  std::vector<sequence_id> ids;
  std::vector<std::vector<token_id>> streamed(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto o = requests[i].options;
    o.on_token = [&streamed, i](token_id t) {
      streamed[i].push_back(t);
      return true;
    };
    ids.push_back(batch.add(requests[i].prompt, o, d.make()));
  }
  const std::size_t prefill_calls = model.score_calls();
  std::size_t steps = 0;
  while (batch.running_count() > 0) {
    const auto& s = batch.step();
    CHECK(s.calls == 1);
    ++steps;
  }
  CHECK(model.score_calls() == prefill_calls + steps);
  CHECK(batch.stats().target_calls == steps);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    INFO("sequence " << i);
    const auto r = batch.result(ids[i]);
    CHECK(batch.status(ids[i]) == specdec::sequence_status::finished);
    CHECK(r.tokens == alone(requests[i]));
    CHECK(streamed[i] == r.tokens);
    CHECK(model.size(ids[i]) == requests[i].prompt.size() + r.tokens.size() - 1);
  }
  CHECK(batch.result(ids[4]).reason != specdec::stop_reason::callback);
  CHECK(batch.stats().sequence_steps > steps);
}

TEST_CASE("batch_decoder: sequences join and leave between steps (continuous batching)") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table});
  drafters d;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  const sequence_id a = batch.add(requests[0].prompt, requests[0].options, d.make());
  const sequence_id b = batch.add(requests[1].prompt, requests[1].options, d.make());
  batch.step();
  batch.step();
  const sequence_id c = batch.add(requests[2].prompt, requests[2].options, d.make());
  batch.step();
  // b leaves early: what it emitted so far is a prefix of its run alone.
  const auto b_part = batch.result(b).tokens;
  const auto b_full = alone(requests[1]);
  REQUIRE(b_part.size() < b_full.size());
  CHECK(std::equal(b_part.begin(), b_part.end(), b_full.begin()));
  batch.remove(b);
  CHECK(model.live() == 2);
  const sequence_id e = batch.add(requests[3].prompt, requests[3].options, d.make());
  batch.run();
  CHECK(batch.result(a).tokens == alone(requests[0]));
  CHECK(batch.result(c).tokens == alone(requests[2]));
  CHECK(batch.result(e).tokens == alone(requests[3]));
  CHECK(batch.ids() == std::vector<sequence_id>{a, c, e});
}

TEST_CASE("batch_decoder: prompt lookup drafters, greedy, equal plain decoding") {
  batch_table_model model({.model = {.vocab_size = 5, .order = 2, .seed = 5, .scale = 3.0f}});
  std::deque<specdec::ngram_drafter> lookups;
  specdec::batch_decoder<batch_table_model, specdec::ngram_drafter> batch(model);
  table_model plain_target({.vocab_size = 5, .order = 2, .seed = 5, .scale = 3.0f});
  std::vector<std::pair<sequence_id, std::vector<token_id>>> want;
  for (token_id first = 0; first < 4; ++first) {
    const std::vector<token_id> prompt{first, 2, 3, 1, 2, 3, 1, 2};
    specdec::generate_options o;
    o.max_new_tokens = 40;
    o.sampling.temperature = 0.0f;
    o.draft_length = 3 + static_cast<std::size_t>(first);
    const auto id = batch.add(prompt, o, lookups.emplace_back(specdec::ngram_options{.min_ngram = 1, .max_ngram = 3}));
    want.emplace_back(id, specdec::generate_autoregressive(plain_target, prompt, o).tokens);
  }
  batch.run();
  for (const auto& [id, tokens] : want) CHECK(batch.result(id).tokens == tokens);
  CHECK(batch.stats().generated_tokens > batch.stats().sequence_steps);  // drafts were accepted
}

TEST_CASE("batch_decoder: bad input fails one sequence with a clear error, the others go on") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table, .max_sequences = 3});
  drafters d;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  const sequence_id a = batch.add(requests[0].prompt, requests[0].options, d.make());
  const sequence_id b = batch.add(requests[1].prompt, requests[1].options, d.make());

  SECTION("unknown and removed ids") {
    REQUIRE_THROWS_WITH(batch.result(999), "batch_decoder::result: sequence 999 is not held by "
                                           "this decoder (never added, or removed)");
    batch.remove(b);
    REQUIRE_THROWS_WITH(batch.remove(b), "batch_decoder::remove: sequence " + std::to_string(b) +
                                             " is not held by this decoder (never added, or "
                                             "removed)");
    REQUIRE_THROWS_AS(batch.status(b), std::invalid_argument);
    batch.run();
    CHECK(batch.result(a).tokens == alone(requests[0]));
  }
  SECTION("a batch larger than the model holds is refused, nothing added") {
    batch.add(requests[2].prompt, requests[2].options, d.make());
    REQUIRE_THROWS_WITH(batch.add(requests[3].prompt, requests[3].options, d.make()),
                        "batch_decoder::add: the model holds at most 3 sequences "
                        "(max_sequences()); 3 are live, remove one first");
    CHECK(model.live() == 3);
    CHECK(batch.ids().size() == 3);
    batch.run();
    CHECK(batch.result(a).tokens == alone(requests[0]));
    CHECK(batch.result(b).tokens == alone(requests[1]));
  }
  SECTION("a bad prompt or option is refused, naming it, nothing added") {
    auto o = requests[2].options;
    REQUIRE_THROWS_WITH(batch.add(std::vector<token_id>{1, 16}, o, d.make()),
                        "prompt[1] = 16 is outside the vocabulary [0, 16)");
    o.max_new_tokens = 0;
    REQUIRE_THROWS_WITH(batch.add(requests[2].prompt, o, d.make()),
                        "generate_options.max_new_tokens: must be >= 1");
    CHECK(model.live() == 2);
    batch.run();
    CHECK(batch.result(b).tokens == alone(requests[1]));
  }
  SECTION("NaN logits fail that sequence; its tokens so far are kept") {
    batch.step();
    const auto before = batch.result(b).tokens;
    model.poison(b);
    batch.step();
    CHECK(batch.status(b) == specdec::sequence_status::failed);
    CHECK_THAT(batch.error(b), Catch::Contains("NaN"));
    CHECK(batch.result(b).tokens == before);
    CHECK(model.size(b) == requests[1].prompt.size() + before.size() - 1);
    batch.run();
    CHECK(batch.result(a).tokens == alone(requests[0]));
    CHECK(batch.error(a).empty());
  }
  SECTION("an entry the model refuses fails that sequence only") {
    batch.step();
    model.refuse(a);
    const auto& s = batch.step();
    CHECK(s.failed == 1);
    CHECK(s.calls == 1);  // the refused call changed nothing; b was then scored alone
    CHECK(batch.status(a) == specdec::sequence_status::failed);
    CHECK_THAT(batch.error(a), Catch::Contains("is refused"));
    batch.run();
    CHECK(batch.result(b).tokens == alone(requests[1]));
  }
}

namespace {
// Proposes token 99 (outside a 16-token vocabulary) once it has seen `after` tokens.
struct bad_drafter {
  std::size_t after = 0;
  void propose(std::span<const token_id> history, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.clear();
    if (k > 0) out.tokens.push_back(history.size() >= after ? 99 : history.back());
  }
  void accept(std::span<const token_id>) {}
  void reset() {}
};
}  // namespace

TEST_CASE("batch_decoder: a drafter's token outside the vocabulary fails its sequence only") {
  batch_table_model model({.model = target_table});
  specdec::batch_decoder<batch_table_model, bad_drafter> batch(model);
  bad_drafter good{1000}, bad{8};
  specdec::generate_options o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = 30;
  const std::vector<token_id> prompt{3, 1, 4};
  const sequence_id g = batch.add(prompt, o, good);
  const sequence_id x = batch.add(prompt, o, bad);
  batch.run();
  CHECK(batch.status(x) == specdec::sequence_status::failed);
  CHECK(batch.error(x) == "drafter: proposed token 99 outside the vocabulary [0, 16)");
  table_model plain(target_table);
  const auto want = specdec::generate_autoregressive(plain, prompt, o).tokens;
  const auto kept = batch.result(x).tokens;  // up to the failed step, a prefix of the same run
  CHECK(kept.size() + prompt.size() >= 8);
  CHECK(std::equal(kept.begin(), kept.end(), want.begin()));
  CHECK(batch.result(g).tokens == want);
  CHECK(batch.status(g) == specdec::sequence_status::finished);
}

TEST_CASE("batch_decoder: max_batch_tokens caps K and splits a step into calls that fit") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table, .max_batch_tokens = 2});
  drafters d;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  const sequence_id a = batch.add(requests[0].prompt, requests[0].options, d.make());
  const sequence_id b = batch.add(requests[4].prompt, requests[4].options, d.make());
  REQUIRE_THROWS_WITH(batch.add(requests[1].prompt, requests[1].options, d.make()),
                      "batch_decoder::add: max_batch_tokens() = 2 has no room for one more row "
                      "per step");
  batch.run();
  CHECK(model.max_rows_seen() <= 2);
  CHECK(batch.stats().target_calls > batch.stats().steps);
  // Greedy: capping K changes the number of calls, never the tokens.
  CHECK(batch.result(a).tokens == alone(requests[0]));
  CHECK(batch.result(b).tokens == alone(requests[4]));
}

TEST_CASE("batch_decoder: max_batch_tokens caps a tree's depth so that its nodes fit one call") {
  // A {2, 2} tree has 1 + 2 + 4 = 7 rows; with 4 rows a call, only its first level fits.
  const auto requests = varied_requests();
  auto tree = requests[3];
  tree.options.sampling.temperature = 0.0f;  // greedy: the cap changes the calls, not the tokens
  batch_table_model model({.model = target_table, .max_batch_tokens = 4});
  drafters d;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  const sequence_id t = batch.add(tree.prompt, tree.options, d.make());
  batch.run();
  CHECK(batch.status(t) == specdec::sequence_status::finished);
  CHECK(batch.error(t).empty());
  CHECK(model.max_rows_seen() <= 4);
  CHECK(batch.result(t).tokens == alone(tree));
}

TEST_CASE("batch_decoder: the K policy plans K from the measured cost of a batched call") {
  // A twin draft model: every greedy draft is accepted, so only the cost curve decides.
  const auto requests = varied_requests();
  auto greedy = requests[0];
  greedy.options.draft_length = 6;
  greedy.options.max_new_tokens = 120;
  for (const bool compute_bound : {false, true}) {
    batch_table_model model({.model = target_table});
    std::deque<table_model> twins;
    std::deque<drafter_t> twin_drafters;
    specdec::batch_options bo;
    bo.k_policy.max_k = 6;
    bo.k_policy.min_samples = 8;
    bo.k_policy.probe_every = 5;
    // Memory-bound: a call costs the same whatever its rows. Compute-bound: each row costs 1.
    for (std::size_t n = 0; n <= 64; ++n)
      bo.k_policy.target.push_back(compute_bound ? static_cast<double>(n) : 1.0);
    specdec::batch_decoder<batch_table_model, drafter_t> batch(model, bo);
    std::vector<sequence_id> ids;
    for (int i = 0; i < 4; ++i) {
      twins.emplace_back(target_table);
      ids.push_back(batch.add(greedy.prompt, greedy.options, twin_drafters.emplace_back(twins.back())));
    }
    std::size_t steps = 0, capped_to_0 = 0, uncapped = 0, largest_cap = 0;
    while (batch.running_count() > 0) {
      const std::size_t cap = batch.step().k_cap.k;
      ++steps;
      capped_to_0 += cap == 0;
      uncapped += cap == std::numeric_limits<std::size_t>::max();
      if (cap != std::numeric_limits<std::size_t>::max()) largest_cap = std::max(largest_cap, cap);
    }
    INFO("compute-bound " << compute_bound << ": " << steps << " steps, " << capped_to_0
                          << " capped to K = 0, " << uncapped << " uncapped");
    if (compute_bound) {
      CHECK(capped_to_0 > 0);
      CHECK(uncapped < steps / 2);  // the first steps, until position 0 is measured
      CHECK(largest_cap == 1);      // a probe drafts one position beyond the plan of K = 0
    } else {
      CHECK(capped_to_0 == 0);
    }
    for (const auto id : ids) CHECK(batch.result(id).tokens == alone(greedy));
  }
  specdec::batch_options bad;
  bad.k_policy.target = {0.0, -1.0};
  batch_table_model unused;
  REQUIRE_THROWS_WITH(specdec::batch_decoder<batch_table_model>(unused, bad),
                      "batch_options.k_policy.target[1] must be positive and finite");
}

TEST_CASE("batch_decoder: choose_draft_length is plan_chain on the per-sequence share") {
  specdec::decode_stats pooled;
  for (int i = 0; i < 100; ++i)
    for (std::size_t d = 0; d < 4; ++d) pooled.count_judged(d, 0, 1, i % 10 < 8);
  specdec::batch_k_policy p;
  p.max_k = 4;
  for (std::size_t n = 0; n <= 40; ++n) p.target.push_back(1.0 + 0.01 * static_cast<double>(n));
  CHECK(specdec::choose_draft_length(p, 1, pooled).k == 4);   // memory-bound: draft all
  p.target.clear();
  for (std::size_t n = 0; n <= 40; ++n) p.target.push_back(static_cast<double>(n));
  CHECK(specdec::choose_draft_length(p, 8, pooled).k == 0);   // compute-bound: plain decoding
  CHECK(specdec::choose_draft_length(p, 50, pooled).k == 0);  // the curve stops short: plain
  CHECK(specdec::choose_draft_length({}, 8, pooled).k == std::numeric_limits<std::size_t>::max());
}

namespace {
using lookup_then_view = specdec::composed_drafter<specdec::ngram_drafter,
                                                   specdec::model_drafter<view_t>>;
using lookup_then_table = specdec::composed_drafter<specdec::ngram_drafter, drafter_t>;
}  // namespace

TEST_CASE("batch_decoder: add() checks every part of a composed drafter") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table});
  specdec::ngram_drafter lookup;
  SECTION("a fallback drafting with a sequence of the batch model is refused, nothing changes") {
    specdec::batch_decoder<batch_table_model, lookup_then_view> batch(model);
    // The fallback of `a` drafts with a sequence of its own, created beside the decoder's.
    const sequence_id own = model.create_sequence();
    view_t own_view(model, own);
    specdec::model_drafter<view_t> fine(own_view);
    lookup_then_view first(lookup, fine);
    const sequence_id a = batch.add(requests[0].prompt, requests[0].options, first);
    const std::size_t a_size = model.size(a);
    // A fallback drafting with a's context would truncate it: refused.
    view_t a_view(model, a);
    specdec::ngram_drafter lookup2;
    specdec::model_drafter<view_t> on_a(a_view);
    lookup_then_view bad(lookup2, on_a);
    REQUIRE_THROWS_WITH(batch.add(requests[4].prompt, requests[4].options, bad),
                        "drafter.part[1]: the draft model is sequence " + std::to_string(a) +
                            " of the target batch model, a context this decoder decodes; a "
                            "draft model needs a context of its own");
    CHECK(model.size(a) == a_size);
    CHECK(model.live() == 2);
    CHECK(batch.ids() == std::vector<sequence_id>{a});
  }
  SECTION("a fallback with another vocabulary is refused") {
    specdec::batch_decoder<batch_table_model, lookup_then_table> batch(model);
    table_model small({.vocab_size = 5});
    drafter_t wrong(small);
    lookup_then_table both(lookup, wrong);
    REQUIRE_THROWS_WITH(batch.add(requests[0].prompt, requests[0].options, both),
                        "drafter.part[1]: draft vocab_size 5 differs from the target's "
                        "vocab_size 16");
    CHECK(model.live() == 0);
  }
}

namespace {
// A model_drafter that throws a foreign exception (not a std::exception) once the history
// reaches `throw_at` tokens.
struct throwing_drafter {
  drafter_t inner;
  std::size_t throw_at = std::numeric_limits<std::size_t>::max();
  void propose(std::span<const token_id> history, std::size_t k, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    if (history.size() >= throw_at) throw 42;
    inner.propose(history, k, sp, g, out);
  }
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const specdec::sampling_params& sp, specdec::rng& g,
                    specdec::candidate_draw draw, specdec::tree_draft& out) {
    if (history.size() >= throw_at) throw 42;
    inner.propose_tree(history, branching, sp, g, draw, out);
  }
  void accept(std::span<const token_id> c) { inner.accept(c); }
  void reset() { inner.reset(); }
};
// A batch model whose score throws a foreign exception for every call holding `thrower`.
struct foreign_model : batch_table_model {
  using batch_table_model::batch_table_model;
  sequence_id thrower = 0;
  bool refuse_release = false;
  bool throw_once_on_batch = false;  // the next call of several entries throws 42
  void score(std::span<const specdec::batch_entry> batch) {
    if (throw_once_on_batch && batch.size() > 1) {
      throw_once_on_batch = false;
      throw 42;
    }
    for (const auto& e : batch)
      if (e.sequence == thrower) throw 42;
    batch_table_model::score(batch);
  }
  void release_sequence(sequence_id id) {
    if (refuse_release) throw std::runtime_error("foreign_model: release refused (test switch)");
    batch_table_model::release_sequence(id);
  }
};
}  // namespace

TEST_CASE("batch_decoder: a foreign exception fails its sequence, is rethrown, others go on") {
  const auto requests = varied_requests();
  foreign_model model({.model = target_table});
  std::deque<table_model> draft_models;
  std::deque<throwing_drafter> list;
  specdec::batch_decoder<foreign_model, throwing_drafter> batch(model);
  std::vector<sequence_id> ids;
  const std::size_t x = 1;  // the sequence that throws
  enum class where { callback, drafter, model };
  const where w = GENERATE(where::callback, where::drafter, where::model);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto o = requests[i].options;
    std::size_t seen = 0;
    if (i == x && w == where::callback)
      o.on_token = [seen](token_id) mutable {
        if (++seen == 5) throw 42;
        return true;
      };
    auto& d = list.emplace_back(throwing_drafter{drafter_t(draft_models.emplace_back(draft_table))});
    if (i == x && w == where::drafter) d.throw_at = requests[i].prompt.size() + 5;
    ids.push_back(batch.add(requests[i].prompt, o, d));
  }
  std::size_t caught = 0, steps = 0;
  while (batch.running_count() > 0 && steps < 500) {
    if (w == where::model && steps == 3) model.thrower = ids[x];
    try {
      batch.step();
    } catch (int e) {
      CHECK(e == 42);
      ++caught;
    }
    ++steps;
    for (const sequence_id id : ids)
      if (batch.status(id) == specdec::sequence_status::running)
        CHECK(model.size(id) == batch.history(id).size() - 1);
  }
  CHECK(caught == 1);
  CHECK(batch.status(ids[x]) == specdec::sequence_status::failed);
  CHECK_THAT(batch.error(ids[x]), Catch::Contains("unknown exception"));
  CHECK(model.size(ids[x]) == batch.history(ids[x]).size() - 1);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (i == x) continue;
    INFO("sequence " << i);
    CHECK(batch.status(ids[i]) == specdec::sequence_status::finished);
    CHECK(batch.result(ids[i]).tokens == alone(requests[i]));
  }
}

TEST_CASE("batch_decoder: a release the model refuses leaves the sequence held") {
  const auto requests = varied_requests();
  foreign_model model({.model = target_table});
  drafters d;
  specdec::batch_decoder<foreign_model, drafter_t> batch(model);
  const sequence_id a = batch.add(requests[0].prompt, requests[0].options, d.make());
  const sequence_id b = batch.add(requests[1].prompt, requests[1].options, d.make());
  batch.step();
  model.refuse_release = true;
  REQUIRE_THROWS_WITH(batch.remove(a), "foreign_model: release refused (test switch)");
  CHECK(batch.ids() == std::vector<sequence_id>{a, b});
  CHECK(model.live() == 2);
  model.refuse_release = false;
  batch.remove(a);
  CHECK(batch.ids() == std::vector<sequence_id>{b});
  CHECK(model.live() == 1);
}

TEST_CASE("batch_decoder: two views of one sequence are one context to the decoders' checks") {
  batch_table_model model({.model = target_table});
  const sequence_id id = model.create_sequence();
  view_t target(model, id), same(model, id);
  specdec::model_drafter<view_t> drafter(same);
  REQUIRE_THROWS_WITH((specdec::speculative_decoder<view_t, specdec::model_drafter<view_t>>(
                          target, drafter)),
                      Catch::StartsWith("drafter: the draft model is the target itself"));
  view_t other(model, model.create_sequence());
  specdec::model_drafter<view_t> fine(other);
  CHECK_NOTHROW(specdec::speculative_decoder<view_t, specdec::model_drafter<view_t>>(target, fine));
}

TEST_CASE("batch_decoder: add() refuses a draft model a running sequence's drafter uses") {
  const auto requests = varied_requests();
  batch_table_model model({.model = target_table});
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  table_model shared(draft_table);
  drafter_t first(shared), second(shared);
  const sequence_id a = batch.add(requests[0].prompt, requests[0].options, first);
  REQUIRE_THROWS_WITH(batch.add(requests[4].prompt, requests[4].options, second),
                      "drafter: its draft model is also sequence " + std::to_string(a) +
                          "'s drafter's; each draft model needs a context of its own");
  CHECK(batch.ids() == std::vector<sequence_id>{a});
  batch.run();
  CHECK(batch.result(a).tokens == alone(requests[0]));
  // Once a's sequence is over, its draft model is free for the next one.
  const sequence_id b = batch.add(requests[4].prompt, requests[4].options, second);
  batch.run();
  CHECK(batch.result(b).tokens == alone(requests[4]));
}

TEST_CASE("batch_decoder: a foreign exception of a batched call reaches the caller") {
  const auto requests = varied_requests();
  foreign_model model({.model = target_table});
  drafters d;
  specdec::batch_decoder<foreign_model, drafter_t> batch(model);
  std::vector<sequence_id> ids;
  for (const auto& r : requests) ids.push_back(batch.add(r.prompt, r.options, d.make()));
  batch.step();
  model.throw_once_on_batch = true;  // every entry then scores alone: nobody fails
  REQUIRE_THROWS_AS(batch.step(), int);
  for (const sequence_id id : ids) {
    CHECK(batch.status(id) != specdec::sequence_status::failed);
    CHECK(model.size(id) == batch.history(id).size() - 1);
  }
  batch.run();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    INFO("sequence " << i);
    CHECK(batch.result(ids[i]).tokens == alone(requests[i]));
  }
}

TEST_CASE("batch_decoder: a sequence_view reads its tokens back, so reuse_prefix stays exact") {
  // The single-sequence decoder on a view; the batch model's tokens(id) checks the kept prefix.
  const table_model_options order64{.vocab_size = 16, .order = 64, .seed = 7};
  batch_table_model model({.model = order64});
  const sequence_id id = model.create_sequence();
  view_t view(model, id);
  table_model draft_model(draft_table);
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(view, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.reuse_prefix = true;
  decoder.generate(std::vector<token_id>{3, 1, 4, 1, 5}, o);
  std::vector<token_id> turn(decoder.history().begin(), decoder.history().end());
  turn.insert(turn.end(), {9, 2, 6});
  // Someone else rewrites the sequence at the same length.
  const std::size_t n = model.size(id);
  model.truncate(id, 2);
  std::vector<token_id> other(n - 2, 11);
  std::vector<float> rows(other.size() * 16);
  view.append(other, rows);
  REQUIRE(model.size(id) == n);
  const auto r = decoder.generate(turn, o);
  CHECK(r.stats.reused_prompt_tokens == 2);
  table_model plain(order64), fresh_draft(draft_table);
  drafter_t fresh_drafter(fresh_draft);
  specdec::speculative_decoder fresh(plain, fresh_drafter);
  CHECK(r.tokens == fresh.generate(turn, o).tokens);
}
