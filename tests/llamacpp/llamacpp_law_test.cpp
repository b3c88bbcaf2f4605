// tests/llamacpp/llamacpp_law_test.cpp - sampled speculative decoding through the llama.cpp
// adapters keeps the target's law: the joint law of the first 3 tokens after a prompt, from
// thousands of fixed-seed runs, against the law computed exactly from the adapter's own rows
// (Pearson's chi-square, significance 1e-4). Target aidreams260K Q8_0, whose rows are
// bit-identical however they are batched, so the exact law is the law of the rows the decoder
// verifies with; top-k 4 at T = 1 keeps the joint to at most 64 cells. Drafters: the GGUF draft
// model (chains with token and block verification, a tree) and EAGLE-style heads on
// hidden_model's rows. Controls that must fail: runs of the draft model alone (what a verifier
// that kept every draft would give) and plain sampling at T = 1.25.
#include "common.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>

#include <llama2c/engine/heads_file.hpp>
#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/hidden_model.hpp>
#include <llamacpp/adapters/tree_model.hpp>
#include <specdec/specdec.hpp>

#include "support/chi_square.hpp"

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;

namespace {

constexpr std::size_t length = 3;  // tokens whose joint law is tested
const std::vector<token_id>& prompt() { return t::prompts[1]; }
const specdec::sampling_params law_params{.temperature = 1.0f, .top_k = 4};

using joint = std::array<token_id, length>;

/// The exact joint law of the first `length` tokens after the prompt under `sp`, from the rows
/// `model` gives one prefix at a time (a fresh context per prefix).
std::map<joint, double> exact_law(const gguf_model& file, const specdec::sampling_params& sp) {
  std::map<joint, double> law;
  context_model m(file, {.n_ctx = 64, .n_threads = 1});
  const std::size_t v = m.vocab_size();
  std::vector<float> logits;
  std::vector<std::vector<float>> probs(length, std::vector<float>(v));  // one row per depth
  joint path{};
  const auto walk = [&](auto& self, std::size_t depth, double mass) -> void {
    std::vector<token_id> seq = prompt();
    seq.insert(seq.end(), path.begin(), path.begin() + static_cast<std::ptrdiff_t>(depth));
    m.truncate(0);
    logits.resize(seq.size() * v);
    m.append(seq, logits);
    specdec::warp(std::span<const float>(logits).last(v), sp, probs[depth]);
    for (std::size_t tok = 0; tok < v; ++tok) {
      if (probs[depth][tok] <= 0.0f) continue;
      path[depth] = static_cast<token_id>(tok);
      const double p = mass * probs[depth][tok];
      if (depth + 1 < length)
        self(self, depth + 1, p);
      else
        law[path] += p;
    }
  };
  walk(walk, 0, 1.0);
  return law;
}

/// `trials` runs of run(seed) (seeds first_seed, first_seed + 1, ...), counted by their first
/// `length` tokens.
template <class Run>
std::map<joint, std::size_t> count_runs(Run&& run, int trials, std::uint64_t first_seed,
                                        std::size_t* accepted = nullptr) {
  std::map<joint, std::size_t> counts;
  for (int i = 0; i < trials; ++i) {
    const auto r = run(first_seed + static_cast<std::uint64_t>(i));
    if (accepted) *accepted += r.stats.accepted_tokens;
    REQUIRE(r.tokens.size() == length);
    joint j;
    std::copy_n(r.tokens.begin(), length, j.begin());
    ++counts[j];
  }
  return counts;
}

/// Chi-square of the counts against the law (a count outside the law's support fails outright).
specdec::test::chi_square_result judge(const std::map<joint, std::size_t>& counts,
                                       const std::map<joint, double>& law) {
  std::vector<std::size_t> c;
  std::vector<double> p;
  for (const auto& [j, prob] : law) {
    const auto it = counts.find(j);
    c.push_back(it == counts.end() ? 0 : it->second);
    p.push_back(prob);
  }
  for (const auto& [j, n] : counts)
    if (!law.contains(j)) {  // a sequence the law gives probability 0
      c.push_back(n);
      p.push_back(0.0);
    }
  return specdec::test::chi_square(c, p);
}

specdec::generate_options sampled_options(std::size_t k) {
  specdec::generate_options o;
  o.max_new_tokens = length;
  o.sampling = law_params;
  o.draft_length = k;
  o.reuse_prefix = true;  // the prompt stays in the cache between runs
  return o;
}

template <class Decoder>
auto runner(Decoder& decoder, const specdec::generate_options& o) {
  return [&decoder, o](std::uint64_t seed) {
    auto oo = o;
    oo.sampling.seed = seed;
    return decoder.generate(prompt(), oo);
  };
}

constexpr int trials = 5000;

}  // namespace

TEST_CASE("llamacpp law: sampled speculative decoding keeps the target's joint law") {
  const auto law = exact_law(t::target_q8(), law_params);
  REQUIRE(law.size() > 8);
  double total = 0.0;
  for (const auto& [j, p] : law) total += p;
  REQUIRE(std::abs(total - 1.0) < 1e-6);

  tree_model target(t::target_q8(), tree_options(8, {.n_ctx = 64, .n_threads = 1}));
  context_model draft(t::draft(), {.n_ctx = 64, .n_threads = 1});
  specdec::model_drafter drafter(draft);
  specdec::speculative_decoder decoder(target, drafter);
  struct config {
    const char* name;
    std::size_t k;
    specdec::verification_rule verification;
    std::vector<std::size_t> tree;
  };
  const std::vector<config> configs{
      {"plain", 0, specdec::verification_rule::token, {}},
      {"draft model, K = 3, token verification", 3, specdec::verification_rule::token, {}},
      {"draft model, K = 3, block verification", 3, specdec::verification_rule::block, {}},
      {"draft model, tree 2x2x1 in one llama_decode",
       3,
       specdec::verification_rule::token,
       {2, 2, 1}},
  };
  std::uint64_t seed = 1000;
  for (const auto& c : configs) {
    auto o = sampled_options(c.k);
    o.verification = c.verification;
    o.tree = c.tree;
    std::size_t accepted = 0;
    const auto counts = count_runs(runner(decoder, o), trials, seed, &accepted);
    seed += trials;
    const auto verdict = judge(counts, law);
    INFO(c.name << ": " << verdict.describe());
    WARN(c.name << ": " << verdict.describe() << "; draft tokens kept " << accepted);
    CHECK(verdict.pass());
    CHECK((c.k == 0 || accepted > 0));
  }
}

TEST_CASE("llamacpp law: EAGLE-style heads on hidden_model keep the target's joint law") {
  const auto heads_path = t::gguf_dir / "eagle.heads";
  if (!std::filesystem::exists(heads_path)) {
    WARN("skipped: " << heads_path.string() << " not made (the llamacpp.train_heads fixture)");
    return;
  }
  const auto law = exact_law(t::target_q8(), law_params);
  hidden_model target(t::target_q8(),
                      hidden_options(tree_options(8, {.n_ctx = 64, .n_threads = 1})));
  specdec::hidden_capture<hidden_model> capture(target);
  const gguf_classifier w = load_gguf_classifier(t::target_q8());
  auto heads = specdec::llama2c::read_heads(heads_path);
  REQUIRE(heads.kind == specdec::llama2c::heads_kind::eagle);
  specdec::eagle_drafter drafter(capture, std::move(heads.eagle),
                                 {w.classifier.data(), w.classifier.rows(), w.classifier.cols()},
                                 {w.embedding.data(), w.embedding.rows(), w.embedding.cols()});
  specdec::speculative_decoder decoder(capture, drafter);
  std::size_t accepted = 0;
  const auto counts = count_runs(runner(decoder, sampled_options(3)), trials, 40000, &accepted);
  const auto verdict = judge(counts, law);
  WARN("EAGLE heads, K = 3: " << verdict.describe() << "; draft tokens kept " << accepted);
  CHECK(verdict.pass());
  CHECK(accepted > 0);
}

TEST_CASE("llamacpp law: control - the statistic sees a wrong law") {
  const auto law = exact_law(t::target_q8(), law_params);
  SECTION("the draft model's own runs (every draft kept) fail the target's law") {
    context_model draft(t::draft(), {.n_ctx = 64, .n_threads = 1});
    specdec::no_drafter none;
    specdec::speculative_decoder decoder(draft, none);
    const auto verdict = judge(count_runs(runner(decoder, sampled_options(0)), trials, 70000), law);
    WARN("draft model alone: " << verdict.describe());
    CHECK_FALSE(verdict.pass());
  }
  SECTION("plain sampling at T = 1.25 fails the law at T = 1") {
    context_model target(t::target_q8(), {.n_ctx = 64, .n_threads = 1});
    specdec::no_drafter none;
    specdec::speculative_decoder decoder(target, none);
    auto o = sampled_options(0);
    o.sampling.temperature = 1.25f;
    const auto verdict = judge(count_runs(runner(decoder, o), trials, 80000), law);
    WARN("T = 1.25 against T = 1: " << verdict.describe());
    CHECK_FALSE(verdict.pass());
  }
}
