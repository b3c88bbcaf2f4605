#include <catch2/catch.hpp>
#include <specdec/testing.hpp>

#include <span>
#include <string>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/prefill_models.hpp"

namespace {

using specdec::batch_entry;
using specdec::sequence_id;
using specdec::test::batch_table_model;

// batch_table_model with one defect switched on.
struct broken_batch_model {
  enum defect { none, rows_depend_on_batch, reuses_ids, truncates_all, keeps_bad_call };
  defect d = none;
  batch_table_model inner{{.model = {.vocab_size = 32, .order = 3, .seed = 4}}};
  std::vector<sequence_id> released;

  std::size_t vocab_size() const { return inner.vocab_size(); }
  sequence_id create_sequence() {
    if (d == reuses_ids && !released.empty()) {
      // hands out a fresh sequence under an old id: simulate by remembering the mapping
      const sequence_id real = inner.create_sequence();
      alias_from = released.back();
      alias_to = real;
      released.pop_back();
      return alias_from;
    }
    return inner.create_sequence();
  }
  void release_sequence(sequence_id id) {
    inner.release_sequence(map(id));
    released.push_back(id);
  }
  std::size_t size(sequence_id id) const { return inner.size(map(id)); }
  void score(std::span<const batch_entry> batch) {
    std::vector<batch_entry> mapped(batch.begin(), batch.end());
    for (auto& e : mapped) e.sequence = map(e.sequence);
    if (d == keeps_bad_call) {  // applies the good entries before finding a bad one
      for (const auto& e : mapped) {
        const batch_entry one = e;
        inner.score(std::span<const batch_entry>(&one, 1));
      }
      return;
    }
    inner.score(mapped);
    if (d == rows_depend_on_batch && batch.size() > 1)
      for (const auto& e : batch) e.logits[0] += 1e-6f;
  }
  void truncate(sequence_id id, std::size_t n) {
    if (d == truncates_all) {
      for (sequence_id other = 1; other < 64; ++other) try {
          if (inner.size(other) > n) inner.truncate(other, n);
        } catch (...) {
        }
      return;
    }
    inner.truncate(map(id), n);
  }

 private:
  sequence_id alias_from = 0, alias_to = 0;
  sequence_id map(sequence_id id) const { return alias_from && id == alias_from ? alias_to : id; }
};

}  // namespace

TEST_CASE("batch_checks: a conforming batch model passes every check") {
  batch_table_model m({.model = {.vocab_size = 32, .order = 3, .seed = 4}, .max_batch_tokens = 64});
  const auto rep = specdec::testing::run_batch_checks(m);
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.checks.size() == 5);  // g5 too: the model scores trees
  CHECK(m.live() == 0);           // every check released its sequences
}

TEST_CASE("batch_checks: each defect is caught by its check") {
  using specdec::testing::check_batch_lifecycle;
  using specdec::testing::check_batch_rejects_bad_input;
  using specdec::testing::check_batch_rows_independent;
  using specdec::testing::check_batch_truncate_isolated;
  broken_batch_model m;
  SECTION("rows that depend on the rest of the batch") {
    m.d = broken_batch_model::rows_depend_on_batch;
    const auto r = check_batch_rows_independent(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::StartsWith("batch_rows_independent: sequence 0 scored in a batch "
                                            "of 3 differs from alone"));
  }
  SECTION("a released id handed out again") {
    m.d = broken_batch_model::reuses_ids;
    const auto r = check_batch_lifecycle(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("was handed out again"));
  }
  SECTION("a truncate that reaches other sequences") {
    m.d = broken_batch_model::truncates_all;
    const auto r = check_batch_truncate_isolated(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("truncating sequence a changed size(b)"));
  }
  SECTION("a refused call that changed a sequence") {
    m.d = broken_batch_model::keeps_bad_call;
    const auto r = check_batch_rejects_bad_input(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::Contains("threw but changed a size"));
  }
}

namespace {
// A batch model whose prefill forgets the last token it is given.
class forgetful_prefill_model : public specdec::test::batch_table_model {
 public:
  using batch_table_model::batch_table_model;
  void prefill(specdec::sequence_id id, std::span<const specdec::token_id> tokens) {
    if (tokens.size() > 1) tokens = tokens.first(tokens.size() - 1);
    scratch.resize(tokens.size() * vocab_size());
    const specdec::batch_entry e{id, tokens, {}, std::span<float>(scratch)};
    score(std::span<const specdec::batch_entry>(&e, 1));
  }
  std::vector<float> scratch;
};
}  // namespace

TEST_CASE("batch_checks: prefill then score equals scoring alone (g6)") {
  SECTION("a batch model with prefill passes and run_batch_checks runs g6") {
    specdec::test::prefill_batch_table_model m({.model = {.vocab_size = 32, .seed = 4}});
    const auto rep = specdec::testing::run_batch_checks(m);
    INFO(rep.message);
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 6);
    CHECK(m.live() == 0);
  }
  SECTION("a prefill that forgets a token fails") {
    forgetful_prefill_model m({.model = {.vocab_size = 32, .seed = 4}});
    const auto r = specdec::testing::check_batch_prefill(m);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.message, Catch::StartsWith("batch_prefill: size(a) is 7 after prefill(a, 8 tokens)"));
    CHECK_FALSE(specdec::testing::run_batch_checks(m).ok);
  }
}
