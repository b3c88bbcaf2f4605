#include <catch2/catch.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/table_model.hpp"

namespace {

using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;
using drafter_t = specdec::model_drafter<table_model>;
using specdec::test::exact_joint;

}  // namespace

TEST_CASE("decoder: greedy speculative output equals greedy decoding, K = 1..8") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model draft_model({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.35f, .mix_seed = 9});
  drafter_t drafter(draft_model);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  specdec::generate_options o;
  o.max_new_tokens = 80;
  o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, o);
  REQUIRE(plain.tokens.size() == 80);
  CHECK(plain.stats.target_calls == 80);
  specdec::speculative_decoder decoder(target, drafter);
  for (std::size_t k = 1; k <= 8; ++k) {
    o.draft_length = k;
    const auto r = decoder.generate(prompt, o);
    INFO("K = " << k);
    CHECK(r.tokens == plain.tokens);
    CHECK(r.stats.target_calls < plain.stats.target_calls);
    CHECK(r.stats.accepted_tokens > 0);
    CHECK(target.size() == prompt.size() + r.tokens.size() - 1);
  }
}

TEST_CASE("decoder: sampled speculative decoding keeps the target's joint distribution") {
  // 5-token vocabulary: the first three generated tokens have 125 outcomes, all enumerated.
  table_model target({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f});
  table_model draft_model({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f, .mix_seed = 4});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2};
  specdec::sampling_params sp;
  sp.temperature = 0.9f;
  sp.top_k = 4;
  sp.top_p = 0.9f;
  const auto expected = exact_joint(target, prompt, 3, sp);
  const int trials = 60000;
  for (std::size_t k : {1u, 2u, 4u}) {
    SECTION("K = " + std::to_string(k)) {
      specdec::generate_options o;
      o.draft_length = k;
      o.sampling = sp;
      const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, trials, 1000 * k);
      const auto chi = specdec::test::chi_square(got.counts, expected);
      INFO(chi.describe());
      CHECK(chi.pass());
      CHECK(got.accepted > 0);
    }
  }
}

TEST_CASE("decoder: prompt lookup (n-gram drafts) is lossless, greedy and sampled") {
  table_model target({.vocab_size = 5, .order = 2, .seed = 5, .scale = 3.0f});
  specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 3});
  specdec::speculative_decoder decoder(target, lookup);
  const std::vector<token_id> prompt{1, 2, 3, 1, 2, 3, 1, 2};
  specdec::generate_options o;
  SECTION("greedy equals greedy decoding") {
    o.max_new_tokens = 60;
    o.sampling.temperature = 0.0f;
    const auto plain = specdec::generate_autoregressive(target, prompt, o);
    for (std::size_t k : {1u, 3u, 8u}) {
      o.draft_length = k;
      const auto r = decoder.generate(prompt, o);
      CHECK(r.tokens == plain.tokens);
      CHECK(r.stats.accepted_tokens > 0);
    }
  }
  SECTION("sampled: the joint distribution of three tokens is the target's") {
    specdec::sampling_params sp;
    sp.temperature = 1.2f;
    sp.top_k = 4;
    const auto expected = exact_joint(target, prompt, 3, sp);
    o.draft_length = 3;
    o.sampling = sp;
    const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, 60000);
    const auto chi = specdec::test::chi_square(got.counts, expected);
    INFO(chi.describe());
    CHECK(chi.pass());
    CHECK(got.accepted > 1000);
  }
}

TEST_CASE("decoder: the same seed gives the same tokens") {
  table_model target({.vocab_size = 32, .seed = 3});
  table_model draft_model({.vocab_size = 32, .seed = 3, .mix = 0.5f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 50;
  o.sampling.seed = 1234;
  const std::vector<token_id> prompt{1};
  const auto a = decoder.generate(prompt, o);
  const auto b = decoder.generate(prompt, o);
  CHECK(a.tokens == b.tokens);
  o.sampling.seed = 1235;
  CHECK(decoder.generate(prompt, o).tokens != a.tokens);
}

TEST_CASE("decoder: stop tokens and max_new_tokens inside an accepted block cut there") {
  table_model target({.vocab_size = 16, .seed = 7});
  table_model twin({.vocab_size = 16, .seed = 7});
  drafter_t drafter(twin);  // drafts with an identical model: every draft is accepted under greedy
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{2, 7};
  specdec::generate_options o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = 40;
  o.draft_length = 8;
  const auto full = decoder.generate(prompt, o);
  REQUIRE(full.stats.acceptance_rate() == 1.0);

  SECTION("stop token") {
    o.stop_tokens = {full.tokens[5]};
    std::size_t first = 0;
    while (full.tokens[first] != full.tokens[5]) ++first;
    const auto r = decoder.generate(prompt, o);
    CHECK(r.reason == specdec::stop_reason::stop_token);
    CHECK(r.tokens == std::vector<token_id>(full.tokens.begin(), full.tokens.begin() + first + 1));
  }
  SECTION("max_new_tokens") {
    o.max_new_tokens = 3;
    const auto r = decoder.generate(prompt, o);
    CHECK(r.reason == specdec::stop_reason::max_new_tokens);
    CHECK(r.tokens == std::vector<token_id>(full.tokens.begin(), full.tokens.begin() + 3));
  }
  SECTION("callback") {
    std::vector<token_id> streamed;
    o.on_token = [&](token_id t) {
      streamed.push_back(t);
      return streamed.size() < 6;
    };
    const auto r = decoder.generate(prompt, o);
    CHECK(r.reason == specdec::stop_reason::callback);
    CHECK(streamed == r.tokens);
    CHECK(r.tokens.size() == 6);
  }
  // Whatever the cut, the target holds the prompt and all returned tokens but the last.
  CHECK(target.size() + 1 == decoder.history().size());
  const std::vector<token_id> cache(target.tokens().begin(), target.tokens().end());
  CHECK(cache == std::vector<token_id>(decoder.history().begin(), decoder.history().end() - 1));
}

TEST_CASE("decoder: statistics add up") {
  table_model target({.vocab_size = 16, .seed = 7});
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 64;
  o.draft_length = 4;
  const std::vector<token_id> prompt{1, 2, 3};
  const auto r = decoder.generate(prompt, o);
  const auto& s = r.stats;
  CHECK(s.generated_tokens == r.tokens.size());
  CHECK(s.generated_tokens == s.accepted_tokens + s.target_calls);
  CHECK(s.drafted_at.size() == 4);
  std::size_t accepted = 0, drafted = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    accepted += s.accepted_at[i];
    drafted += s.drafted_at[i];
    if (i > 0) CHECK(s.accepted_at[i] <= s.accepted_at[i - 1]);
  }
  CHECK(accepted == s.accepted_tokens);
  CHECK(drafted == s.drafted_tokens);
  CHECK(s.draft_model_calls >= s.draft_calls);
  CHECK(s.total_seconds >= s.draft_seconds + s.target_seconds + s.verify_seconds);
  CHECK(s.tokens_per_target_call() > 1.0);
  CHECK_FALSE(s.summary().empty());
}

TEST_CASE("decoder: the context limit ends generation, K = 0 is plain decoding") {
  table_model target({.vocab_size = 8, .max_size = 12});
  table_model draft_model({.vocab_size = 8, .max_size = 12, .mix = 0.2f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 100;
  o.draft_length = 5;
  const std::vector<token_id> prompt{1, 2, 3};
  auto r = decoder.generate(prompt, o);
  CHECK(r.reason == specdec::stop_reason::context_full);
  CHECK(prompt.size() + r.tokens.size() == 12);
  o.draft_length = 0;
  r = decoder.generate(prompt, o);
  CHECK(r.stats.drafted_tokens == 0);
  CHECK(r.stats.target_calls == r.tokens.size());
}

TEST_CASE("decoder: bad input throws a clear error and leaves everything usable") {
  table_model target({.vocab_size = 8, .max_size = 10});
  table_model small_draft({.vocab_size = 7});
  table_model draft_model({.vocab_size = 8, .mix = 0.3f});
  drafter_t drafter(draft_model);
  drafter_t wrong(small_draft);
  REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, drafter_t>(target, wrong)),
                      "drafter: draft vocab_size 7 differs from the target's vocab_size 8");
  drafter_t same(target);
  REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, drafter_t>(target, same)),
                      Catch::StartsWith("drafter: the draft model is the target itself"));
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  const std::vector<token_id> empty, bad{1, 8}, negative{-1}, too_long(11, 1), good{1, 2};
  REQUIRE_THROWS_WITH(decoder.generate(empty, o), "prompt: must not be empty");
  REQUIRE_THROWS_WITH(decoder.generate(bad, o), "prompt[1] = 8 is outside the vocabulary [0, 8)");
  REQUIRE_THROWS_WITH(decoder.generate(negative, o), "prompt[0] = -1 is outside the vocabulary [0, 8)");
  REQUIRE_THROWS_WITH(decoder.generate(too_long, o), "prompt: 11 tokens exceed the target's max_size 10");
  o.max_new_tokens = 0;
  REQUIRE_THROWS_WITH(decoder.generate(good, o), "generate_options.max_new_tokens: must be >= 1");
  o.max_new_tokens = 5;
  o.stop_tokens = {9};
  REQUIRE_THROWS_WITH(decoder.generate(good, o),
                      "generate_options.stop_tokens[0] = 9 is outside the vocabulary [0, 8)");
  o.stop_tokens = {};
  o.sampling.top_p = 2.0f;
  REQUIRE_THROWS_WITH(decoder.generate(good, o), Catch::StartsWith("sampling_params.top_p"));
  o.sampling.top_p = 1.0f;
  REQUIRE_THROWS_AS(decoder.step(), std::logic_error);
  CHECK(decoder.generate(good, o).tokens.size() == 5);  // still usable
}

namespace {
// A target that returns NaN logits on its n-th append call, for error-path tests.
struct nan_model {
  table_model inner{{.vocab_size = 8}};
  std::size_t fail_at = 3, calls = 0;
  std::size_t vocab_size() const { return inner.vocab_size(); }
  std::size_t size() const { return inner.size(); }
  void truncate(std::size_t n) { inner.truncate(n); }
  void append(std::span<const token_id> t, std::span<float> logits) {
    inner.append(t, logits);
    if (++calls == fail_at) logits[logits.size() - 1] = std::nanf("");
  }
};
}  // namespace

TEST_CASE("decoder: NaN logits throw and leave the caches consistent with the history") {
  nan_model target;
  table_model draft_model({.vocab_size = 8, .mix = 0.3f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 30;
  const std::vector<token_id> prompt{1, 2, 3};
  decoder.start(prompt, o);
  bool threw = false;
  try {
    while (!decoder.done()) decoder.step();
  } catch (const std::domain_error& e) {
    threw = true;
    CHECK_THAT(e.what(), Catch::Contains("NaN"));
  }
  CHECK(threw);
  CHECK(target.size() + 1 == decoder.history().size());
  target.fail_at = 0;
  CHECK(decoder.generate(prompt, o).tokens.size() == 30);
}

TEST_CASE("decoder: a prompt sharing a prefix with the last history reuses the target's cache") {
  const table_model_options t{.vocab_size = 16, .seed = 7};
  const table_model_options d{.vocab_size = 16, .seed = 7, .mix = 0.3f};
  table_model target(t), draft_model(d);
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.sampling.seed = 5;
  o.reuse_prefix = true;
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  const auto first = decoder.generate(prompt, o);
  CHECK(first.stats.reused_prompt_tokens == 0);

  // The next turn: the whole history plus new tokens, as a chat engine would send it.
  std::vector<token_id> turn(decoder.history().begin(), decoder.history().end());
  turn.insert(turn.end(), {9, 2, 6});
  const std::size_t fed_before = target.appended_tokens();
  const auto second = decoder.generate(turn, o);
  CHECK(second.stats.reused_prompt_tokens == prompt.size() + first.tokens.size() - 1);
  CHECK(target.appended_tokens() - fed_before <
        turn.size() + second.stats.drafted_tokens + second.stats.target_calls);

  // The same turn from scratch gives the same tokens.
  table_model fresh_target(t), fresh_draft(d);
  drafter_t fresh_drafter(fresh_draft);
  specdec::speculative_decoder fresh(fresh_target, fresh_drafter);
  CHECK(fresh.generate(turn, o).tokens == second.tokens);
  o.reuse_prefix = false;
  const auto again = decoder.generate(turn, o);
  CHECK(again.stats.reused_prompt_tokens == 0);
  CHECK(again.tokens == second.tokens);
  o.reuse_prefix = true;

  SECTION("continuing from the decoder's own history (the prompt views it)") {
    const auto more = decoder.generate(decoder.history(), o);
    CHECK(more.stats.reused_prompt_tokens > 0);
    CHECK(more.tokens.size() == 20);
  }
  SECTION("a target changed behind the decoder's back keeps only what it still holds") {
    target.truncate(2);
    const auto r = decoder.generate(turn, o);
    CHECK(r.stats.reused_prompt_tokens == 2);  // table_model reads its tokens back
    CHECK(r.tokens == second.tokens);
  }
}

TEST_CASE("decoder: reuse_prefix is off by default and never keeps a prefix the target lost") {
  // Logits that depend on the whole context, so that a stale token anywhere shows.
  const table_model_options t{.vocab_size = 16, .order = 64, .seed = 7};
  const table_model_options d{.vocab_size = 16, .order = 64, .seed = 7, .mix = 0.3f};
  table_model target(t), draft_model(d);
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.sampling.seed = 5;
  CHECK_FALSE(o.reuse_prefix);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  decoder.generate(prompt, o);
  std::vector<token_id> turn(decoder.history().begin(), decoder.history().end());
  turn.insert(turn.end(), {9, 2, 6});
  // Someone else uses the target and leaves it at the same length with other tokens.
  const std::size_t n = target.size();
  REQUIRE(n > 4);
  target.truncate(2);
  std::vector<token_id> other(n - 2, 0);
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = static_cast<token_id>((i * 5 + 3) % 16);
  std::vector<float> rows(other.size() * 16);
  target.append(other, rows);
  REQUIRE(target.size() == n);

  table_model fresh_target(t), fresh_draft(d);
  drafter_t fresh_drafter(fresh_draft);
  specdec::speculative_decoder fresh(fresh_target, fresh_drafter);
  const auto want = fresh.generate(turn, o).tokens;
  SECTION("by default the whole prompt is fed again") {
    const auto r = decoder.generate(turn, o);
    CHECK(r.stats.reused_prompt_tokens == 0);
    CHECK(r.tokens == want);
  }
  SECTION("turned on, a target that reads its tokens back keeps only what still matches") {
    o.reuse_prefix = true;
    const auto r = decoder.generate(turn, o);
    CHECK(r.stats.reused_prompt_tokens == 2);
    CHECK(r.tokens == want);
  }
}

TEST_CASE("decoder: start() refusing its arguments mid-generation ends that generation cleanly") {
  table_model target({.vocab_size = 16, .seed = 7});
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 30;
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  decoder.start(prompt, o);
  decoder.step();
  decoder.step();
  REQUIRE_FALSE(decoder.done());
  const std::vector<token_id> before(decoder.history().begin(), decoder.history().end());
  const std::size_t generated = decoder.stats().generated_tokens;
  auto bad = o;
  SECTION("bad options") {
    bad.max_new_tokens = 0;
    REQUIRE_THROWS_WITH(decoder.start(prompt, bad), "generate_options.max_new_tokens: must be >= 1");
  }
  SECTION("a bad prompt") {
    const std::vector<token_id> outside{1, 16};
    REQUIRE_THROWS_WITH(decoder.start(outside, o), "prompt[1] = 16 is outside the vocabulary [0, 16)");
  }
  SECTION("a tree for a drafter that cannot draft trees") {
    specdec::no_drafter none;  // drafts no trees
    specdec::speculative_decoder chains(target, none);
    chains.start(prompt, o);
    chains.step();
    bad.tree = {2, 2};
    REQUIRE_THROWS_WITH(chains.start(prompt, bad), Catch::StartsWith("generate_options.tree"));
    CHECK(chains.done());
    CHECK(chains.reason() == specdec::stop_reason::callback);
    REQUIRE_THROWS_AS(chains.step(), std::logic_error);
    CHECK(target.size() + 1 == chains.history().size());
    return;
  }
  // The old generation is over: nothing steps it, what it emitted and its context are kept.
  CHECK(decoder.done());
  CHECK(decoder.reason() == specdec::stop_reason::callback);
  REQUIRE_THROWS_AS(decoder.step(), std::logic_error);
  CHECK(std::equal(before.begin(), before.end(), decoder.history().begin(),
                   decoder.history().end()));
  CHECK(decoder.stats().generated_tokens == generated);
  CHECK(target.size() + 1 == decoder.history().size());
  table_model fresh_target({.vocab_size = 16, .seed = 7});
  table_model fresh_draft({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t fresh_drafter(fresh_draft);
  specdec::speculative_decoder fresh(fresh_target, fresh_drafter);
  CHECK(decoder.generate(prompt, o).tokens == fresh.generate(prompt, o).tokens);
}

namespace {
// A model_drafter whose reset() throws when asked to.
struct flaky_reset_drafter {
  drafter_t inner;
  bool throw_on_reset = false;
  void propose(std::span<const token_id> h, std::size_t k, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    inner.propose(h, k, sp, g, out);
  }
  void accept(std::span<const token_id> c) { inner.accept(c); }
  void reset() {
    if (throw_on_reset) throw std::runtime_error("flaky_reset_drafter: reset refused");
    inner.reset();
  }
};
// A target (without a token readback) whose truncate throws when asked to.
struct flaky_truncate_model {
  table_model inner{{.vocab_size = 16, .seed = 7}};
  bool throw_on_truncate = false;
  std::size_t vocab_size() const { return inner.vocab_size(); }
  std::size_t size() const { return inner.size(); }
  void append(std::span<const token_id> t, std::span<float> logits) { inner.append(t, logits); }
  void truncate(std::size_t n) {
    if (throw_on_truncate) throw std::runtime_error("flaky_truncate_model: truncate refused");
    inner.truncate(n);
  }
};
}  // namespace

TEST_CASE("decoder: a start() that fails past validation leaves nothing stale") {
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  specdec::generate_options o;
  o.max_new_tokens = 30;
  o.reuse_prefix = true;
  const std::vector<token_id> prompt{3, 1, 4, 1, 5}, other{2, 7, 1, 8};
  SECTION("the drafter's reset() throws: the generation in progress ends, consistent") {
    table_model target({.vocab_size = 16, .seed = 7});
    flaky_reset_drafter drafter{drafter_t(draft_model)};
    specdec::speculative_decoder decoder(target, drafter);
    decoder.start(prompt, o);
    decoder.step();
    const std::vector<token_id> before(decoder.history().begin(), decoder.history().end());
    drafter.throw_on_reset = true;
    REQUIRE_THROWS_WITH(decoder.start(other, o), "flaky_reset_drafter: reset refused");
    CHECK(decoder.done());
    CHECK(std::equal(before.begin(), before.end(), decoder.history().begin(),
                     decoder.history().end()));
    CHECK(target.size() + 1 == decoder.history().size());
    drafter.throw_on_reset = false;
    table_model fresh_target({.vocab_size = 16, .seed = 7});
    table_model fresh_draft({.vocab_size = 16, .seed = 7, .mix = 0.3f});
    drafter_t fresh_drafter(fresh_draft);
    specdec::speculative_decoder fresh(fresh_target, fresh_drafter);
    CHECK(decoder.generate(other, o).tokens == fresh.generate(other, o).tokens);
  }
  SECTION("the target's truncate throws: no history is left to reuse") {
    flaky_truncate_model target;
    drafter_t drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    decoder.generate(prompt, o);
    target.throw_on_truncate = true;
    std::vector<token_id> turn(decoder.history().begin(), decoder.history().end() - 3);
    REQUIRE_THROWS_WITH(decoder.start(turn, o), "flaky_truncate_model: truncate refused");
    CHECK(decoder.done());
    CHECK(decoder.history().empty());
  }
}

namespace {
// A model_drafter whose accept() throws on its n-th call.
struct flaky_accept_drafter {
  drafter_t inner;
  std::size_t throw_at = 0, calls = 0;
  void propose(std::span<const token_id> h, std::size_t k, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    inner.propose(h, k, sp, g, out);
  }
  void accept(std::span<const token_id> c) {
    if (++calls == throw_at) throw std::runtime_error("flaky_accept_drafter: accept refused");
    inner.accept(c);
  }
  void reset() { inner.reset(); }
};
}  // namespace

TEST_CASE("decoder: a drafter whose accept() throws leaves the step counted in the statistics") {
  table_model target({.vocab_size = 16, .seed = 7});
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  flaky_accept_drafter drafter{drafter_t(draft_model), 3};
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 30;
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  decoder.start(prompt, o);
  decoder.step();
  decoder.step();
  REQUIRE_THROWS_WITH(decoder.step(), "flaky_accept_drafter: accept refused");
  // The step was committed: its tokens are in the history, the target holds them, and the
  // statistics count them.
  CHECK(target.size() + 1 == decoder.history().size());
  CHECK(decoder.stats().target_calls == 3);
  CHECK(decoder.stats().generated_tokens == decoder.history().size() - prompt.size());
  while (!decoder.done()) decoder.step();
  CHECK(decoder.stats().generated_tokens == 30);
}

TEST_CASE("decoder: a callback that throws leaves its step counted in the statistics") {
  table_model target({.vocab_size = 16, .seed = 7});
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 30;
  std::size_t seen = 0;
  o.on_token = [&seen](token_id) {
    if (++seen == 7) throw std::runtime_error("on_token: refused");
    return true;
  };
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o), "on_token: refused");
  CHECK(decoder.done());
  CHECK(decoder.reason() == specdec::stop_reason::callback);
  CHECK(decoder.history().size() == prompt.size() + 7);
  CHECK(target.size() + 1 == decoder.history().size());
  CHECK(decoder.stats().generated_tokens == 7);
  CHECK(decoder.stats().accepted_tokens + decoder.stats().target_calls >= 7);
}

TEST_CASE("decoder: reuse_prefix on a target without a token readback trusts its size") {
  flaky_truncate_model target;  // no tokens(): nothing to compare the kept prefix with
  table_model draft_model({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.reuse_prefix = true;
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  const auto first = decoder.generate(prompt, o);
  std::vector<token_id> turn(decoder.history().begin(), decoder.history().end());
  turn.insert(turn.end(), {9, 2, 6});
  const auto second = decoder.generate(turn, o);
  CHECK(second.stats.reused_prompt_tokens == prompt.size() + first.tokens.size() - 1);
  table_model fresh_target({.vocab_size = 16, .seed = 7});
  table_model fresh_draft({.vocab_size = 16, .seed = 7, .mix = 0.3f});
  drafter_t fresh_drafter(fresh_draft);
  specdec::speculative_decoder fresh(fresh_target, fresh_drafter);
  CHECK(fresh.generate(turn, o).tokens == second.tokens);
  // A target emptied behind the decoder's back changes size: nothing is kept.
  target.inner.truncate(0);
  CHECK(decoder.generate(turn, o).stats.reused_prompt_tokens == 0);
}

namespace {
// A drafter that breaks its contract: one token more than the k it is asked for.
struct overlong_drafter {
  void propose(std::span<const token_id> history, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.clear();
    out.tokens.assign(k + 1, history.back());
  }
  void accept(std::span<const token_id>) {}
  void reset() {}
};
}  // namespace

TEST_CASE("decoder: a draft longer than the k asked is refused, not cut") {
  table_model target({.vocab_size = 6});
  overlong_drafter d;
  specdec::speculative_decoder decoder(target, d);
  specdec::generate_options o;
  o.draft_length = 3;
  o.sampling.temperature = 0.0f;
  const std::vector<token_id> prompt{1, 2};
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      "drafter: proposed 4 tokens, more than the k = 3 asked");
  CHECK(target.size() == prompt.size() - 1);  // the target never saw the draft
}

TEST_CASE("decoder: the public enums have names (to_string)") {
  using specdec::to_string;
  CHECK(std::string(to_string(specdec::stop_reason::max_new_tokens)) == "max_new_tokens");
  CHECK(std::string(to_string(specdec::stop_reason::stop_token)) == "stop_token");
  CHECK(std::string(to_string(specdec::stop_reason::callback)) == "callback");
  CHECK(std::string(to_string(specdec::stop_reason::context_full)) == "context_full");
  CHECK(std::string(to_string(specdec::verification_rule::token)) == "token");
  CHECK(std::string(to_string(specdec::verification_rule::block)) == "block");
  CHECK(std::string(to_string(specdec::verification_rule::coupled)) == "coupled");
  CHECK(std::string(to_string(specdec::verification_rule::sample_match)) == "sample-match");
  CHECK(std::string(to_string(specdec::sequence_status::running)) == "running");
  CHECK(std::string(to_string(specdec::sequence_status::finished)) == "finished");
  CHECK(std::string(to_string(specdec::sequence_status::failed)) == "failed");
}
