#include <catch2/catch.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/min_length_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include <vector>

#include "support/table_model.hpp"

using specdec::token_id;

namespace {
// Proposes the next `lengths[i]` tokens of 0, 1, 2, ... on the i-th call (cycling).
struct scripted_lengths {
  std::vector<std::size_t> lengths;
  std::size_t calls = 0, resets = 0;
  void propose(std::span<const token_id>, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.clear();
    const std::size_t n = std::min(k, lengths[calls++ % lengths.size()]);
    for (std::size_t i = 0; i < n; ++i) out.tokens.push_back(static_cast<token_id>(i));
  }
  void accept(std::span<const token_id>) {}
  void reset() { ++resets; }
};
}  // namespace

TEST_CASE("min_length_drafter: proposals shorter than the minimum are emptied and counted") {
  scripted_lengths inner{{0, 1, 2, 3, 4}};
  specdec::min_length_drafter d(inner, 3);
  STATIC_REQUIRE(specdec::Drafter<specdec::min_length_drafter<scripted_lengths>>);
  specdec::rng g(1);
  specdec::draft out;
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 5; ++i) {
    d.propose(std::vector<token_id>{1}, 8, {}, g, out);
    sizes.push_back(out.size());
  }
  CHECK(sizes == std::vector<std::size_t>{0, 0, 0, 3, 4});
  CHECK(d.dropped() == 2);  // the empty proposal is not counted
  CHECK(d.min_length() == 3);
  d.reset();
  CHECK(inner.resets == 1);
  SECTION("a minimum of 0 or 1 changes nothing") {
    for (const std::size_t m : {0u, 1u}) {
      scripted_lengths again{{1, 2}};
      specdec::min_length_drafter keep(again, m);
      keep.propose(std::vector<token_id>{1}, 8, {}, g, out);
      CHECK(out.size() == 1);
      CHECK(keep.dropped() == 0);
    }
  }
}

TEST_CASE("min_length_drafter: forwards the optional members and shows its part") {
  specdec::test::table_model draft_model({.vocab_size = 6});
  specdec::model_drafter inner(draft_model);
  specdec::min_length_drafter d(inner, 2);
  STATIC_REQUIRE(specdec::TreeDrafter<decltype(d)>);
  CHECK(d.vocab_size() == 6);
  CHECK(&d.model() == &draft_model);
  CHECK(d.model_calls() == 0);
  int parts = 0;
  d.for_each_part([&](auto& p) {
    CHECK(static_cast<void*>(&p) == static_cast<void*>(&inner));
    ++parts;
  });
  CHECK(parts == 1);
}

TEST_CASE("min_length_drafter: the decoder's output is unchanged, short drafts become plain steps") {
  specdec::test::table_model target({.vocab_size = 5, .order = 2, .seed = 5, .scale = 3.0f});
  specdec::ngram_drafter lookup;
  specdec::min_length_drafter d(lookup, 3);
  specdec::speculative_decoder decoder(target, d);
  std::vector<token_id> prompt;
  for (int i = 0; i < 30; ++i) prompt.push_back(static_cast<token_id>((i * i) % 5));
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.draft_length = 6;
  o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, o);
  const auto r = decoder.generate(prompt, o);
  CHECK(r.tokens == plain.tokens);
}
