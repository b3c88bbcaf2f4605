#include <catch2/catch.hpp>
#include <cstddef>
#include <specdec/decoder.hpp>
#include <specdec/draft/composed_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <vector>

#include "support/table_model.hpp"

using specdec::token_id;
using specdec::test::table_model;
using tokens = std::vector<token_id>;

namespace {
// Always proposes `k` copies of one token; counts its calls.
struct fixed_drafter {
  token_id token = 4;
  std::size_t proposals = 0, accepted = 0, resets = 0;
  void propose(std::span<const token_id>, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.clear();
    out.tokens.assign(k, token);
    ++proposals;
  }
  void accept(std::span<const token_id> c) { accepted += c.size(); }
  void reset() { ++resets; }
};
template <class D>
concept counts_model_calls = requires(const D& d) { d.model_calls(); };
}  // namespace

TEST_CASE("composed_drafter: lookup first, the fallback when the lookup has nothing") {
  specdec::ngram_drafter lookup;
  fixed_drafter fallback;
  specdec::composed_drafter both(lookup, fallback);
  STATIC_REQUIRE(specdec::Drafter<decltype(both)>);
  specdec::rng g(1);
  specdec::draft out;
  SECTION("a lookup match is used as it is") {
    both.propose(tokens{1, 2, 3, 1, 2}, 4, {}, g, out);
    CHECK(out.tokens == tokens{3, 1, 2});
    CHECK(fallback.proposals == 0);
    CHECK(both.lookup_steps() == 1);
  }
  SECTION("no match: the fallback drafts") {
    both.propose(tokens{1, 2, 3}, 4, {}, g, out);
    CHECK(out.tokens == tokens{4, 4, 4, 4});
    CHECK(both.fallback_steps() == 1);
  }
  SECTION("a lookup draft shorter than min_lookup_tokens is replaced") {
    specdec::composed_drafter strict(lookup, fallback, {.min_lookup_tokens = 4});
    strict.propose(tokens{1, 2, 3, 1, 2}, 4, {}, g, out);
    CHECK(out.tokens == tokens{4, 4, 4, 4});
  }
  SECTION("k = 0 asks nobody") {
    both.propose(tokens{1, 2, 3}, 0, {}, g, out);
    CHECK(out.tokens.empty());
    CHECK(fallback.proposals == 0);
  }
  SECTION("accept and reset reach both") {
    both.propose(tokens{1, 2, 3}, 4, {}, g, out);
    both.accept(tokens{7, 8});
    both.reset();
    CHECK(fallback.accepted == 2);
    CHECK(fallback.resets == 1);
    CHECK(lookup.size() == 0);
  }
  SECTION("options are validated") {
    REQUIRE_THROWS_WITH(specdec::composed_drafter(lookup, fallback, {.min_lookup_tokens = 0}),
                        "composed_options.min_lookup_tokens: must be >= 1, got 0");
  }
}

TEST_CASE("composed_drafter: greedy decoding through it equals plain greedy decoding") {
  table_model target({.vocab_size = 6, .order = 2, .seed = 5, .scale = 3.0f});
  table_model draft_model({.vocab_size = 6, .order = 2, .seed = 5, .scale = 3.0f, .mix = 0.3f});
  specdec::ngram_drafter lookup({.min_ngram = 2});
  specdec::model_drafter model(draft_model);
  specdec::composed_drafter both(lookup, model);
  specdec::speculative_decoder decoder(target, both);
  const tokens prompt{1, 2, 3, 4, 1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 80;
  o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, o);
  for (const std::size_t k : {1u, 4u, 8u}) {
    o.draft_length = k;
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == plain.tokens);
  }
  CHECK(both.lookup_steps() > 0);
  CHECK(both.fallback_steps() > 0);
  // The draft model's calls reach the statistics (only on the fallback's steps).
  CHECK(both.model_calls() == model.model_calls());
  CHECK(both.model_calls() > 0);
  using lookups = specdec::composed_drafter<specdec::ngram_drafter, specdec::ngram_drafter>;
  STATIC_REQUIRE(!counts_model_calls<lookups>);
}

TEST_CASE("composed_drafter: the decoder's checks see every part") {
  table_model target({.vocab_size = 6, .order = 2, .seed = 5, .scale = 3.0f});
  std::vector<float> rows(3 * 6);
  target.append(tokens{1, 2, 3}, rows);
  specdec::ngram_drafter lookup({.min_ngram = 2});
  SECTION("a fallback drafting with the target itself is refused; the target is untouched") {
    specdec::model_drafter same(target);
    specdec::composed_drafter both(lookup, same);
    using both_t = decltype(both);
    REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, both_t>(target, both)),
                        Catch::StartsWith("drafter.part[1]: the draft model is the target itself"));
    CHECK(target.tokens().size() == 3);
  }
  SECTION("a fallback with another vocabulary is refused") {
    table_model small({.vocab_size = 5});
    specdec::model_drafter wrong(small);
    specdec::composed_drafter both(lookup, wrong);
    using both_t = decltype(both);
    REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, both_t>(target, both)),
                        "drafter.part[1]: draft vocab_size 5 differs from the target's vocab_size 6");
  }
  SECTION("compositions are walked all the way down") {
    specdec::ngram_drafter inner_lookup;
    specdec::model_drafter same(target);
    specdec::composed_drafter inner(inner_lookup, same);
    specdec::composed_drafter outer(lookup, inner);
    using outer_t = decltype(outer);
    REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, outer_t>(target, outer)),
                        Catch::StartsWith("drafter.part[1].part[1]: the draft model is the target"));
    CHECK(target.tokens().size() == 3);
  }
  SECTION("two parts drafting with one model are refused") {
    table_model draft_model({.vocab_size = 6, .order = 2, .seed = 5, .mix = 0.3f});
    specdec::model_drafter first(draft_model), second(draft_model);
    specdec::composed_drafter both(first, second);
    using both_t = decltype(both);
    REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, both_t>(target, both)),
                        Catch::StartsWith("drafter.part[1]: its draft model is also "
                                          "drafter.part[0]'s"));
  }
}

TEST_CASE("composed_drafter: model_calls counts the draft-model calls of both parts") {
  table_model target({.vocab_size = 6, .order = 2, .seed = 5, .scale = 3.0f});
  table_model first_model({.vocab_size = 6, .order = 2, .seed = 5, .mix = 0.3f});
  table_model second_model({.vocab_size = 6, .order = 2, .seed = 5, .mix = 0.5f});
  specdec::model_drafter first(first_model), second(second_model);
  specdec::composed_drafter both(first, second, {.min_lookup_tokens = 3});
  specdec::speculative_decoder decoder(target, both);
  specdec::generate_options o;
  o.max_new_tokens = 40;
  o.sampling.temperature = 0.0f;
  o.draft_length = 3;
  const auto r = decoder.generate(tokens{1, 2, 3}, o);
  CHECK(first.model_calls() > 0);
  CHECK(both.model_calls() == first.model_calls() + second.model_calls());
  CHECK(both.model_calls() == first_model.append_calls() + second_model.append_calls());
  CHECK(r.stats.draft_model_calls == both.model_calls());
}

namespace {
// A wrapper that forwards its inner drafter's model() and also exposes it as its part, as a
// wrapper written before for_each_part existed and then given it would.
template <class Inner>
struct forwarding_wrapper {
  Inner& inner;
  void propose(std::span<const token_id> h, std::size_t k, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    inner.propose(h, k, sp, g, out);
  }
  void accept(std::span<const token_id> c) { inner.accept(c); }
  void reset() { inner.reset(); }
  decltype(auto) model() { return inner.model(); }
  template <class F>
  void for_each_part(F&& f) {
    f(inner);
  }
};
}  // namespace

TEST_CASE("composed_drafter: a part's model forwarded by its wrapper is not a shared model") {
  table_model target({.vocab_size = 6, .order = 2, .seed = 5, .scale = 3.0f});
  table_model draft_model({.vocab_size = 6, .order = 2, .seed = 5, .mix = 0.3f});
  specdec::model_drafter inner(draft_model);
  forwarding_wrapper<decltype(inner)> wrapped{inner};
  using wrapped_t = decltype(wrapped);
  CHECK_NOTHROW(specdec::speculative_decoder<table_model, wrapped_t>(target, wrapped));
  specdec::model_drafter same(target);
  forwarding_wrapper<decltype(same)> wrapped_target{same};
  using wrapped_target_t = decltype(wrapped_target);
  REQUIRE_THROWS_WITH((specdec::speculative_decoder<table_model, wrapped_target_t>(
                          target, wrapped_target)),
                      Catch::StartsWith("drafter: the draft model is the target itself"));
}
