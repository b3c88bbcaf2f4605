// The adapter of README.md, extracted from the page at build time, through the conformance kit
// over the small real engine of my_engine.hpp: the code a newcomer copies first passes the kit.
#include <catch2/catch.hpp>

#include "readme_md.hpp"  // README.md's compiled blocks: my_model, generate()

TEST_CASE("docs: the adapter of README.md passes the conformance kit") {
  my_engine::session s(32, 64);
  my_model model{s};
  specdec::testing::conformance_options o;
  o.tolerance = 0.0f;  // the engine's rows do not depend on how the tokens are batched
  const auto rep = specdec::testing::run_all(model, o);
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.checks.size() == 5);
}

TEST_CASE("docs: README.md's generate() decodes on the small engine") {
  my_engine::session big(32, 256), small(32, 256);
  const std::vector<specdec::token_id> prompt{1, 2, 3};
  const auto r = ::generate(big, small, std::span<const specdec::token_id>(prompt));  // not std::generate
  CHECK(r.tokens.size() == 128);
  CHECK(r.stats.accepted_tokens == r.stats.drafted_tokens);  // the same engine drafts: all kept
}
