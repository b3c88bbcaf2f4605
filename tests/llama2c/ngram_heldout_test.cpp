// The held-out prompt-lookup check (issue 11): on edits made at run time from documents kept
// outside the project (SPECDEC_HELDOUT_DIR, ../shared/seeds), in Llama 2 subword tokens, the
// n-gram drafter's defaults draft no fewer tokens per verification step than the former defaults
// (2..4-grams) on any task, at K = 8 and K = 64. Counts, not times: a perfect target keeps the
// matching prefix and one more token. Skips (exit 77) without the documents or the tokenizer.
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <llama2c/engine/tokenizer.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include "support/heldout_edits.hpp"

namespace {

using specdec::token_id;
using tokens = std::vector<token_id>;
namespace ht = specdec::test;

const std::filesystem::path heldout_dir{SPECDEC_HELDOUT_DIR};
const std::filesystem::path vocab_path = std::filesystem::path(SPECDEC_MODELS_DIR) /
                                         "llama2.tokenizer.bin";

struct task {
  std::string name;
  tokens prompt, output;
};

std::vector<task> heldout_tasks() {
  const specdec::llama2c::tokenizer tok(vocab_path);
  const auto encode = [&](const std::string& s) { return tok.encode(s, {.bos = false}); };
  return ht::heldout_tasks<task>(heldout_dir, encode);
}

// Verification steps to produce t.output with `options` and a perfect target, K drafts a step.
std::size_t steps(const task& t, specdec::ngram_options options, std::size_t k) {
  specdec::ngram_drafter d(options);
  tokens h = t.prompt;
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < t.output.size(); ++n) {
    const tokens draft = d.propose(h, k);
    std::size_t a = 0;
    while (a < draft.size() && pos + a < t.output.size() && draft[a] == t.output[pos + a]) ++a;
    const std::size_t kept = std::min(a + 1, t.output.size() - pos);
    const std::span<const token_id> accepted(t.output.data() + pos, kept);
    d.accept(accepted);
    h.insert(h.end(), accepted.begin(), accepted.end());
    pos += kept;
  }
  return n;
}

}  // namespace

TEST_CASE("held-out edits: rename, delete and number lines as their instructions say") {
  const std::string document = "Speculation pays.\n\nIt drafts 4 tokens\nSpeculation";
  const auto edits = ht::heldout_edits("doc", document);
  REQUIRE(edits.size() == 3);
  CHECK(edits[0].name == "doc.rename");
  CHECK(edits[0].instruction == "Rename 'Speculation' to 'noitalucepS' everywhere.");
  CHECK(edits[0].edited == "noitalucepS pays.\n\nIt drafts 4 tokens\nnoitalucepS\n");
  CHECK(edits[1].name == "doc.delete");
  CHECK(edits[1].edited == "Speculation pays.\n\nSpeculation\n");
  CHECK(edits[2].name == "doc.number");
  CHECK(edits[2].edited == "[1] Speculation pays.\n\n[2] It drafts 4 tokens\n[3] Speculation\n");
  for (const auto& e : edits) CHECK(e.original == document + "\n");
  // A word must stand alone to be renamed; no digit, no delete edit.
  const auto plain = ht::heldout_edits("p", "Speculations and Speculation");
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].instruction == "Rename 'Speculation' to 'noitalucepS' everywhere.");
  CHECK(plain[0].edited == "Speculations and noitalucepS\n");
  CHECK(plain[1].name == "p.number");
}

TEST_CASE("prompt lookup's defaults on the held-out set: no task worse than the former defaults") {
  const auto tasks = heldout_tasks();
  REQUIRE(tasks.size() >= 10);
  for (const std::size_t k : {8u, 64u}) {
    std::size_t out = 0, former_steps = 0, default_steps = 0;
    for (const task& t : tasks) {
      const std::size_t former = steps(t, {.min_ngram = 2, .max_ngram = 4, .max_draft = k}, k);
      const std::size_t now = steps(t, {.max_draft = k}, k);
      INFO(t.name << ", K = " << k << ": " << t.output.size() << " tokens in " << now
                  << " steps with the defaults, " << former << " with 2..4");
      CHECK(now <= former);
      out += t.output.size();
      former_steps += former;
      default_steps += now;
    }
    std::cout << "held-out set, K = " << k << ": " << tasks.size() << " tasks, " << out
              << " output tokens; tokens per step " << static_cast<double>(out) / default_steps
              << " with the defaults, " << static_cast<double>(out) / former_steps
              << " with 2..4\n";
  }
}

int main(int argc, char* argv[]) {
  for (const auto& needed : {heldout_dir, vocab_path})
    if (!std::filesystem::exists(needed)) {
      std::cout << "skipping: " << needed.string()
                << " not found; the held-out check needs ../shared (set SPECDEC_HELDOUT_DIR and "
                   "SPECDEC_MODELS_DIR)\n";
      return 77;
    }
  return specdec_test::run_catch(argc, argv);
}
