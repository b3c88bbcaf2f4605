// The conformance kit (specdec/testing.hpp) run against the table test model, and against
// deliberately broken models whose failures it must name.
#include <catch2/catch.hpp>

#include <specdec/testing.hpp>

#include "support/table_model.hpp"

using namespace specdec;
using specdec::test::table_model;
using specdec::test::table_model_options;

namespace {

// truncate() does nothing: the context keeps the dropped tokens.
class lazy_truncate_model {
 public:
  std::size_t vocab_size() const { return m_.vocab_size(); }
  std::size_t size() const { return m_.size(); }
  void append(std::span<const token_id> t, std::span<float> l) { m_.append(t, l); }
  void truncate(std::size_t) {}

 private:
  table_model m_{table_model_options{.vocab_size = 7}};
};

// A batched append drifts: row i of a batch gets + 0.01 * i.
class drifting_batch_model {
 public:
  std::size_t vocab_size() const { return m_.vocab_size(); }
  std::size_t size() const { return m_.size(); }
  void append(std::span<const token_id> t, std::span<float> l) {
    m_.append(t, l);
    for (std::size_t i = 0; i < l.size(); ++i) l[i] += 0.01f * static_cast<float>(i / 7);
  }
  void truncate(std::size_t n) { m_.truncate(n); }

 private:
  table_model m_{table_model_options{.vocab_size = 7}};
};

// Appends valid tokens one at a time and throws only when it meets a bad one: the context has
// changed by then.
class eager_model {
 public:
  std::size_t vocab_size() const { return m_.vocab_size(); }
  std::size_t size() const { return m_.size(); }
  void append(std::span<const token_id> t, std::span<float> l) {
    if (l.size() != t.size() * 7) throw std::invalid_argument("eager_model: logits size");
    for (std::size_t i = 0; i < t.size(); ++i)
      m_.append(t.subspan(i, 1), l.subspan(i * 7, 7));  // table_model checks the token
  }
  void truncate(std::size_t n) { m_.truncate(n); }

 private:
  table_model m_{table_model_options{.vocab_size = 7}};
};

const testing::check_result& find(const testing::conformance_report& rep, const std::string& name) {
  for (const auto& c : rep.checks)
    if (c.name == name) return c;
  FAIL("no check named " << name);
  throw;
}

}  // namespace

TEST_CASE("testing: the table model passes every check") {
  SECTION("given a model") {
    table_model m({.vocab_size = 11, .max_size = 40});
    const auto rep = testing::run_all(m);
    INFO(rep.message);
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 5);  // not a TreeLanguageModel: no tree checks
    CHECK(find(rep, "batched_append").max_abs_diff == 0.0f);
    CHECK_THAT(find(rep, "rejects_bad_input").message,
               Catch::Contains("capacity boundary at max_size() = 40 enforced"));
  }
  SECTION("given a factory and a chosen sequence") {
    testing::conformance_options o;
    o.tokens = {3, 1, 4, 1, 5, 9, 2, 6};
    o.tolerance = 0.0f;
    const auto rep = testing::run_all([] { return table_model({.vocab_size = 10}); }, o);
    INFO(rep.message);
    CHECK(rep.ok);
  }
}

TEST_CASE("testing: a truncate that does nothing is reported") {
  lazy_truncate_model m;
  const auto rep = testing::run_all(m);
  CHECK_FALSE(rep.ok);
  const auto& sizes = find(rep, "size_reporting");
  CHECK_FALSE(sizes.ok);
  CHECK(sizes.message == "size_reporting: size() is 16 after truncate(15)");
  // A factory gives each check a fresh model, so the truncate checks themselves catch it.
  const auto fresh = testing::run_all([] { return lazy_truncate_model(); });
  CHECK(find(fresh, "batched_append").ok);
  const auto& every = find(fresh, "truncate_every_length");
  CHECK_FALSE(every.ok);
  CHECK(every.message == "truncate_every_length: size() is 16 after truncate(15)");
  CHECK_THAT(find(fresh, "truncate_then_append").message, Catch::Contains("after truncate(8)"));
}

TEST_CASE("testing: a batched append that differs is reported with its position") {
  const auto rep = testing::run_all([] { return drifting_batch_model(); });
  const auto& r = find(rep, "batched_append");
  CHECK_FALSE(r.ok);
  INFO(r.message);
  CHECK_THAT(r.message, Catch::StartsWith("batched_append: token-by-token append differs from "
                                          "one batched append: position 1 (token 1), logit 0: "));
  CHECK_THAT(r.message, Catch::Contains("> tolerance 0.0001"));
  CHECK(r.max_abs_diff > 0.009f);
}

TEST_CASE("testing: a model that changes its context before rejecting a token is reported") {
  const auto rep = testing::run_all([] { return eager_model(); });
  const auto& r = find(rep, "rejects_bad_input");
  CHECK_FALSE(r.ok);
  CHECK(r.message ==
        "rejects_bad_input: append of a good token followed by token 7 threw but "
        "changed size() from 8 to 9");
}

TEST_CASE("testing: bad options are reported, not thrown") {
  table_model m({.vocab_size = 5});
  testing::conformance_options o;
  o.tokens = {1, 9};
  const auto r = testing::check_batched_append(m, o);
  CHECK_FALSE(r.ok);
  CHECK(r.message == "batched_append: conformance_options::tokens holds 9, outside the model's "
                     "vocabulary [0, 5)");
}
