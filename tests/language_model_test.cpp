#include <catch2/catch.hpp>
#include <specdec/concepts/language_model.hpp>
#include <specdec/concepts/tree_language_model.hpp>

#include "support/table_model.hpp"

namespace {
struct not_a_model {
  std::size_t vocab_size() const { return 1; }
};
}  // namespace

TEST_CASE("language_model: the test table model models the concept") {
  STATIC_REQUIRE(specdec::LanguageModel<specdec::test::table_model>);
  STATIC_REQUIRE_FALSE(specdec::TreeLanguageModel<specdec::test::table_model>);
  STATIC_REQUIRE_FALSE(specdec::LanguageModel<not_a_model>);
  specdec::test::table_model m({.vocab_size = 5, .max_size = 9});
  CHECK(specdec::max_size_of(m) == 9);
}

TEST_CASE("language_model: table model append/truncate act on a real cache") {
  specdec::test::table_model m({.vocab_size = 5});
  std::vector<specdec::token_id> toks{1, 2, 3, 4};
  std::vector<float> batched(4 * 5), single(5);
  m.append(toks, batched);
  REQUIRE(m.size() == 4);
  m.truncate(2);
  m.append(std::span(toks).subspan(2, 1), single);
  for (int t = 0; t < 5; ++t) CHECK(single[t] == batched[2 * 5 + t]);
  CHECK_THROWS_AS(m.truncate(10), std::out_of_range);
  std::vector<specdec::token_id> bad{7};
  CHECK_THROWS_AS(m.append(bad, single), std::out_of_range);
  CHECK(m.size() == 3);
}
