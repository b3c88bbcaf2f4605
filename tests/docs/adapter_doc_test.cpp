// The adapter of docs/adapter.md, extracted from the page at build time (so the test follows the
// page) and run through the conformance kit over the small real engine of my_engine.hpp; and the
// kit on the ways a user can get that adapter or its factory wrong.
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "adapter_md.hpp"  // docs/adapter.md's compiled blocks: my_engine_model, run()

my_engine::session session;  // the session the page's kit fragment names (snippet_prelude.hpp)

namespace {

// The page's adapter as it first stood: it refuses a bad token, and, with check_logits_size,
// a logits span of the wrong length; it never compares the context with its capacity.
struct tokens_only_model {
  my_engine::session& s;
  bool check_logits_size = false;
  std::size_t vocab_size() const { return s.vocab(); }
  std::size_t size() const { return s.tokens_in_cache(); }
  std::size_t max_size() const { return s.capacity(); }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    if (check_logits_size && logits.size() != tokens.size() * vocab_size())
      throw std::invalid_argument("append: logits.size() != tokens.size() * vocab_size()");
    for (auto t : tokens)
      if (t < 0 || std::size_t(t) >= vocab_size()) throw std::out_of_range("token");
    s.forward(tokens.data(), tokens.size(), logits.data());
  }
  void truncate(std::size_t n) { s.rollback_to(n); }
};

const specdec::testing::check_result& find(const specdec::testing::conformance_report& rep,
                                           const std::string& name) {
  for (const auto& c : rep.checks)
    if (c.name == name) return c;
  FAIL("no check named " << name);
  throw;
}

specdec::testing::conformance_options exact() {
  specdec::testing::conformance_options o;
  o.tolerance = 0.0f;  // the engine's rows do not depend on how the tokens are batched
  return o;
}

}  // namespace

TEST_CASE("docs: the adapter of docs/adapter.md passes the conformance kit") {
  my_engine::session s(32, 64);
  my_engine_model model{s};
  const auto rep = specdec::testing::run_all(model, exact());
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.checks.size() == 5);
  CHECK(find(rep, "rejects_bad_input").message ==
        "rejects_bad_input: largest |diff| 0; capacity boundary at max_size() = 64 enforced");
}

TEST_CASE("docs: the run() of docs/adapter.md decodes with the adapter") {
  my_engine::session big(32, 512), small(32, 512);
  const std::vector<specdec::token_id> prompt{1, 5, 9, 3};
  const auto tokens = run(big, small, prompt);
  CHECK_FALSE(tokens.empty());
  CHECK(tokens.size() <= 256);
  for (const auto t : tokens) CHECK((t >= 0 && t < 32));
}

TEST_CASE("docs: the kit refuses an adapter that checks only its tokens") {
  my_engine::session s(32, 64);
  SECTION("a logits span of the wrong length is accepted") {
    tokens_only_model m{s};
    const auto rep = specdec::testing::run_all(m, exact());
    CHECK_FALSE(rep.ok);
    CHECK(find(rep, "rejects_bad_input").message ==
          "rejects_bad_input: append of a logits span of 2 rows for 1 token at size 8 did not "
          "throw");
  }
  SECTION("with the logits checked, the capacity is not") {
    tokens_only_model m{s, true};
    const auto rep = specdec::testing::run_all(m, exact());
    CHECK_FALSE(rep.ok);
    CHECK(find(rep, "rejects_bad_input").message ==
          "rejects_bad_input: appending 2 tokens at size 63 with max_size() = 64 did not throw");
  }
}

TEST_CASE("docs: a factory returning the page's adapter over one shared session is reported") {
  // Each call returns a new my_engine_model, but every one refers to the same session: the
  // second check's model starts where the first check's left the session.
  my_engine::session s(32, 64);
  const auto rep = specdec::testing::run_all([&] { return my_engine_model{s}; }, exact());
  CHECK_FALSE(rep.ok);
  CHECK(find(rep, "size_reporting").ok);  // it ends with truncate(0)
  CHECK(find(rep, "batched_append").message ==
        "batched_append: the factory returned a model with size() = 16, not 0: it must return a "
        "model with a new, empty context on every call (a model over a session the factory did "
        "not create shares that session between checks: pass such a model itself, "
        "run_all(model, options))");
}
