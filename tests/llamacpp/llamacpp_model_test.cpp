// tests/llamacpp/llamacpp_model_test.cpp - the llama.cpp adapters (context_model, tree_model)
// against specdec's conformance kit on real GGUF models (F32 and Q8_0), and their refusals of bad
// input: a missing file, bad options, a context too small, a tree that does not fit.
#include "common.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/tree_model.hpp>
#include <specdec/testing.hpp>

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;

namespace {

// Rows of one batched llama_decode and rows decoded one at a time go through different matrix
// kernels (llama.cpp picks by batch width), so they agree to rounding, not to the bit. The
// largest difference measured here on these models is printed by each run (WARN lines); the
// tolerance sits above it and far below the differences a cache bug makes (of order 1).
constexpr float f32_tolerance = 1e-3f;
constexpr float q8_tolerance = 0.0f;

specdec::testing::conformance_options kit_options(float tolerance) {
  specdec::testing::conformance_options o;
  o.tokens = {1, 303, 281, 269, 435, 447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441};
  o.tolerance = tolerance;
  return o;
}

void report(const specdec::testing::conformance_report& rep, const char* what) {
  float largest = 0.0f;
  for (const auto& c : rep.checks) largest = std::max(largest, c.max_abs_diff);
  WARN(what << ": largest |diff| " << largest << "\n" << rep.message);
  CHECK(rep.ok);
}

}  // namespace

TEST_CASE("context_model: passes the conformance kit (F32)") {
  const auto rep = specdec::testing::run_all(
      [] { return context_model(t::target(), {.n_ctx = 256}); }, kit_options(f32_tolerance));
  report(rep, "context_model F32");
}

TEST_CASE("context_model: passes the conformance kit (Q8_0)") {
  const auto rep = specdec::testing::run_all(
      [] { return context_model(t::target_q8(), {.n_ctx = 256}); }, kit_options(q8_tolerance));
  report(rep, "context_model Q8_0");
}

TEST_CASE("tree_model: passes the conformance kit with the tree checks (F32)") {
  const auto rep = specdec::testing::run_all(
      [] { return tree_model(t::target(), tree_options(16, {.n_ctx = 256})); },
      kit_options(f32_tolerance));
  report(rep, "tree_model F32");
}

TEST_CASE("tree_model: passes the conformance kit with the tree checks (Q8_0)") {
  const auto rep = specdec::testing::run_all(
      [] { return tree_model(t::target_q8(), tree_options(16, {.n_ctx = 256})); },
      kit_options(q8_tolerance));
  report(rep, "tree_model Q8_0");
}

TEST_CASE("context_model: a batch longer than n_batch is decoded in chunks, same rows") {
  context_model small(t::target(), {.n_ctx = 256, .n_batch = 4});
  context_model wide(t::target(), {.n_ctx = 256});
  const auto& seq = kit_options(0).tokens;
  std::vector<float> a(seq.size() * small.vocab_size()), b(a.size());
  small.append(seq, a);
  wide.append(seq, b);
  REQUIRE(small.size() == seq.size());
  float largest = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
  CHECK(largest <= f32_tolerance);
}

TEST_CASE("gguf_model: refuses a missing file and a file that is not GGUF") {
  REQUIRE_THROWS_WITH(gguf_model(t::path_of("no-such.gguf")),
                      "model file '" + t::path_of("no-such.gguf") +
                          "' does not exist or is not a file");
  REQUIRE_THROWS_AS(gguf_model(t::path_of("make_gguf.log")), llama_error);
}

TEST_CASE("context_model: bad options and bad input are refused, nothing changes") {
  REQUIRE_THROWS_WITH(context_model(t::target(), {.n_batch = 0}),
                      "context_options.n_batch: must be >= 1");
  REQUIRE_THROWS_WITH(context_model(t::target(), {.n_seq_max = 300}),
                      Catch::StartsWith("context_options.n_seq_max: must be in [1, 256]"));
  REQUIRE_THROWS_WITH(tree_model(t::target(), tree_options(64, {.n_ctx = 16})),
                      "context_options: n_batch 16 (at most n_ctx) is below n_seq_max 64; raise "
                      "n_ctx or lower n_seq_max");
  REQUIRE_THROWS_WITH(tree_model(t::target(), {.kv_unified = false}),
                      Catch::StartsWith("tree_model: context_options.kv_unified must be true"));

  context_model m(t::target(), {.n_ctx = 256});
  const std::size_t v = m.vocab_size(), cap = m.max_size();
  std::vector<float> row(v);
  m.append(std::vector<token_id>{1}, row);
  std::vector<token_id> too_many(cap, 5);
  std::vector<float> rows(too_many.size() * v);
  REQUIRE_THROWS_WITH(m.append(too_many, rows),
                      Catch::StartsWith("append: " + std::to_string(cap) +
                                        " tokens after 1 exceed the context's max_size()"));
  REQUIRE_THROWS_WITH(m.prefill(std::vector<token_id>{3, -1}),
                      "prefill: tokens[1] = -1 is outside the vocabulary [0, 512)");
  REQUIRE_THROWS_WITH(m.truncate(2), "truncate: n = 2 exceeds size() = 1");
  CHECK(m.size() == 1);
  CHECK(m.tokens().size() == 1);
}

TEST_CASE("tree_model: a tree that does not fit is refused before llama.cpp runs") {
  tree_model m(t::target(), tree_options(2, {.n_ctx = 256}));
  const std::size_t v = m.vocab_size();
  std::vector<float> row(v);
  m.append(std::vector<token_id>{1}, row);
  // Three roots: three leaves, the context takes two.
  const std::vector<token_id> tokens{5, 6, 7};
  const std::vector<std::int32_t> parents{-1, -1, -1};
  std::vector<float> rows(3 * v);
  REQUIRE_THROWS_WITH(m.append_tree(tokens, parents, rows),
                      "append_tree: the tree has 3 leaves, the context takes at most 2 "
                      "(context_options.n_seq_max)");
  CHECK(m.size() == 1);
  // A chain of two under one root fits; the tree is then pending and append waits for commit.
  const std::vector<std::int32_t> chain{-1, 0, 1};
  m.append_tree(tokens, chain, rows);
  REQUIRE_THROWS_WITH(m.append(std::vector<token_id>{5}, row),
                      "append: a tree is pending; commit() comes first");
  REQUIRE_THROWS_WITH(m.commit(std::vector<std::int32_t>{1}),
                      "commit: path[0] = 1 is not a root of the pending tree");
  m.commit(std::vector<std::int32_t>{0, 1});
  CHECK(m.size() == 3);
  REQUIRE_THROWS_WITH(m.commit(std::vector<std::int32_t>{}),
                      "commit: no tree is pending (call append_tree)");
}
