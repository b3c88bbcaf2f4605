// The conformance kit (specdec/testing.hpp) run against the table test models (with and without
// tree attention), and against deliberately broken models whose failures it must name.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <specdec/testing.hpp>

#include "support/four_member_model.hpp"
#include "support/prefill_models.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

using namespace specdec;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::tree_table_model;

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

// commit ignores its path: it keeps the tokens of the first path.size() nodes (0, 1, ...),
// whichever nodes the path names, and validates nothing. size() comes out right; the context is
// wrong for any path other than {0, 1, ...}.
class path_ignoring_tree_model {
 public:
  std::size_t vocab_size() const { return m_.vocab_size(); }
  std::size_t size() const { return m_.size(); }
  void append(std::span<const token_id> t, std::span<float> l) { m_.append(t, l); }
  void truncate(std::size_t n) { m_.truncate(n); }
  void append_tree(std::span<const token_id> t, std::span<const std::int32_t> p,
                   std::span<float> l) {
    m_.append_tree(t, p, l);
    tree_.assign(t.begin(), t.end());
  }
  void commit(std::span<const std::int32_t> path) {
    m_.commit({});  // keep no node, then append the wrong ones
    const std::size_t n = std::min(path.size(), tree_.size());
    if (n == 0) return;
    std::vector<float> scratch(n * vocab_size());
    m_.append(std::span<const token_id>(tree_).first(n), scratch);
  }

 private:
  tree_table_model m_{table_model_options{.vocab_size = 7}};
  std::vector<token_id> tree_;
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

TEST_CASE("testing: the tree table model passes every check, the tree checks included") {
  SECTION("given a model") {
    tree_table_model m({.vocab_size = 11, .max_size = 40});
    testing::conformance_options o;
    o.tolerance = 0.0f;  // deterministic: tree rows are computed exactly as appended rows
    const auto rep = testing::run_all(m, o);
    INFO(rep.message);
    CHECK(rep.ok);
    REQUIRE(rep.checks.size() == 8);
    for (const auto& c : rep.checks) CHECK(c.ok);
    CHECK(find(rep, "tree_append").message == "tree_append: largest |diff| 0");
    CHECK(find(rep, "tree_commit").message == "tree_commit: largest |diff| 0");
    CHECK(find(rep, "tree_rejects_bad_input").message ==
          "tree_rejects_bad_input: bad parents, tokens and paths rejected");
    CHECK_THAT(find(rep, "rejects_bad_input").message,
               Catch::Contains("capacity boundary at max_size() = 40 enforced"));
    CHECK(m.tree_calls() > 0);  // the tree checks ran on this very model
  }
  SECTION("given a factory and a chosen tree") {
    testing::conformance_options o;
    o.tokens = {3, 1, 4, 1, 5, 9, 2, 6};
    o.tree_tokens = {5, 3, 5, 8, 9, 7};
    o.tree_parents = {-1, 0, 1, 1, -1, 4};
    o.tolerance = 0.0f;
    const auto rep = testing::run_all([] { return tree_table_model({.vocab_size = 10}); }, o);
    INFO(rep.message);
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 8);
  }
}

TEST_CASE("testing: a commit that ignores its path is reported") {
  const auto rep = testing::run_all([] { return path_ignoring_tree_model(); });
  INFO(rep.message);
  CHECK_FALSE(rep.ok);
  CHECK(find(rep, "tree_append").ok);  // append_tree is right; only commit is broken
  const auto& r = find(rep, "tree_commit");
  CHECK_FALSE(r.ok);
  // Paths {0} and {0, 1} are what the broken commit keeps anyway; {0, 2} is the first it breaks.
  CHECK(r.message ==
        "tree_commit: after commit of the path to node 2 (length 2), the next tokens' logits "
        "differ from appending that path alone: position 10 (token 1), logit 0: expected "
        "-1.0334, got 1.86822 (|diff| 2.90162 > tolerance 0.0001; largest |diff| so far "
        "2.90162)");
  CHECK(r.max_abs_diff > 2.9f);
  // It validates nothing either.
  CHECK(find(rep, "tree_rejects_bad_input").message ==
        "tree_rejects_bad_input: commit of path {1, 2} (node 1 is not a root) did not throw");
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

TEST_CASE("testing: prefill then append equals append alone (check i)") {
  using specdec::test::prefill_table_model;
  SECTION("a model with a correct prefill passes, and run_all runs the check") {
    prefill_table_model m({.vocab_size = 11, .max_size = 40});
    const auto rep = testing::run_all(m);
    INFO(rep.message);
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 6);
    CHECK(find(rep, "prefill").max_abs_diff == 0.0f);
    CHECK_THAT(find(rep, "prefill").message, Catch::Contains("prefill at size 0 and 1"));
  }
  SECTION("a prefill that forgets a token fails") {
    prefill_table_model m({.vocab_size = 11});
    m.forget_last = true;
    const auto r = testing::check_prefill(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::StartsWith("prefill: size() is 7 after prefill(8 tokens)"));
    CHECK_FALSE(testing::run_all(m).ok);
  }
  SECTION("a model without prefill is not given the check") {
    table_model m({.vocab_size = 11});
    CHECK(testing::run_all(m).checks.size() == 5);
  }
}

TEST_CASE("testing: a model without max_size() is reported as having none") {
  table_model inner({.vocab_size = 11});
  specdec::test::four_member_model m(inner);
  const auto rep = testing::run_all(m);
  INFO(rep.message);
  CHECK_THAT(find(rep, "size_reporting").message, Catch::Contains("max_size none"));
}
