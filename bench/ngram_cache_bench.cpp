// bench/ngram_cache_bench.cpp - what the cross-request cache (ngram_options::cache) adds to
// prompt lookup: tokens per verification step on the edit tasks of ngram_rules_bench (byte tokens
// and Llama 2 subword tokens), with a perfect target (a step keeps the matching prefix + 1 token;
// 8 candidates count as a trie: the longest matching one), defaults otherwise (only K set).
//
// Scenarios, each without and with a cache holding earlier outputs:
//   related pair  two requests on the same file (table_model_add_param, table_model_reorder):
//                 the second one, with the first's output in the cache, both orders;
//   retry         every task asked twice: the second time with the first output in the cache;
//   stream        all tasks one after the other (by name), one shared cache receiving each
//                 output when its request ends (unrelated requests: what the cache costs).
// Also the time to insert every output into a cache (build of the snapshot).
//
//   cmake --preset bench && cmake --build build/bench --target ngram_cache_bench
//   build/bench/bench/ngram_cache_bench
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <specdec/draft/ngram_cache.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <string>
#include <vector>

#include "bench/support/edit_tasks.hpp"
#include "bench/support/models.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace sb = specdec::bench;
using sb::edit_task;
using sb::tokens;
using specdec::token_id;

struct score {
  std::size_t out_tokens = 0, steps = 0;
  void add(const score& s) {
    out_tokens += s.out_tokens;
    steps += s.steps;
  }
  double per_step() const { return double(out_tokens) / double(steps); }
};

// One request replayed with a perfect target; `cache` may be null.
score replay(const edit_task& t, std::size_t k, std::size_t candidates,
             const std::shared_ptr<const specdec::ngram_cache>& cache) {
  specdec::ngram_drafter d({.max_draft = k, .cache = cache});
  tokens h = t.prompt;
  score s;
  for (std::size_t pos = 0; pos < t.output.size(); ++s.steps) {
    std::vector<tokens> c;
    if (candidates > 1)
      c = d.propose_candidates(h, k, candidates);
    else
      c.push_back(d.propose(h, k));
    std::size_t best = 0;
    for (const tokens& x : c) {
      std::size_t a = 0;
      while (a < x.size() && pos + a < t.output.size() && x[a] == t.output[pos + a]) ++a;
      best = std::max(best, a);
    }
    const std::size_t kept = std::min(best + 1, t.output.size() - pos);
    const std::span<const token_id> accepted(t.output.data() + pos, kept);
    d.accept(accepted);
    h.insert(h.end(), accepted.begin(), accepted.end());
    pos += kept;
  }
  s.out_tokens = t.output.size();
  return s;
}

std::shared_ptr<specdec::ngram_cache> cache_of(std::initializer_list<const tokens*> outputs) {
  auto c = std::make_shared<specdec::ngram_cache>();
  for (const tokens* o : outputs) c->insert(*o);
  return c;
}

const edit_task* find(const std::vector<edit_task>& tasks, const std::string& name) {
  for (const auto& t : tasks)
    if (t.name == name) return &t;
  return nullptr;
}

struct config {
  std::size_t k, candidates;
  std::string label() const {
    return "K=" + std::to_string(k) + (candidates > 1 ? ", 8 candidates" : "");
  }
};

void run_set(const char* set, const std::vector<edit_task>& tasks) {
  const config configs[] = {{8, 1}, {64, 1}, {8, 8}};
  std::printf("\n### %s\n\n| scenario | setting | without cache | with cache | gain |\n", set);
  std::printf("|---|---|---|---|---|\n");
  const auto row = [](const std::string& what, const config& c, const score& a, const score& b) {
    std::printf("| %s | %s | %.2f | %.2f | %+.1f%% |\n", what.c_str(), c.label().c_str(),
                a.per_step(), b.per_step(), 100 * (b.per_step() / a.per_step() - 1));
  };
  const edit_task* add = find(tasks, "table_model_add_param");
  const edit_task* reorder = find(tasks, "table_model_reorder");
  for (const config& c : configs) {
    if (add != nullptr && reorder != nullptr) {
      row("related pair: reorder after add_param", c, replay(*reorder, c.k, c.candidates, nullptr),
          replay(*reorder, c.k, c.candidates, cache_of({&add->output})));
      row("related pair: add_param after reorder", c, replay(*add, c.k, c.candidates, nullptr),
          replay(*add, c.k, c.candidates, cache_of({&reorder->output})));
    }
    score plain, retried;
    for (const auto& t : tasks) {
      plain.add(replay(t, c.k, c.candidates, nullptr));
      retried.add(replay(t, c.k, c.candidates, cache_of({&t.output})));
    }
    row("retry (same request again)", c, plain, retried);
    score alone, shared;
    auto cache = std::make_shared<specdec::ngram_cache>();
    std::string worse;
    for (const auto& t : tasks) {
      const score a = replay(t, c.k, c.candidates, nullptr);
      const score b = replay(t, c.k, c.candidates, cache);
      if (b.per_step() < a.per_step())
        worse += " " + t.name + " (" + std::to_string(a.per_step()).substr(0, 5) + " -> " +
                 std::to_string(b.per_step()).substr(0, 5) + ")";
      alone.add(a);
      shared.add(b);
      cache->insert(t.output);
    }
    row("stream of unrelated requests", c, alone, shared);
    if (!worse.empty()) std::printf("|  worse with the cache:%s | | | | |\n", worse.c_str());
  }
  auto cache = std::make_shared<specdec::ngram_cache>();
  std::size_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& t : tasks) {
    cache->insert(t.output);
    total += t.output.size();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "\n%s: %zu inserts (%zu tokens at the end) took %.2f ms in all (each rebuilds the "
      "snapshot); the last snapshot: %zu bytes, %.1f bytes per token\n",
      set, tasks.size(), total, ms, cache->memory_bytes(),
      double(cache->memory_bytes()) / double(cache->token_count()));
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path data = fs::path(__FILE__).parent_path() / "data";
  run_set("byte tokens (bench/data/ngram)", sb::load_edit_tasks({data / "ngram"}, sb::byte_tokens));
  const fs::path vocab = sb::models_dir / "llama2.tokenizer.bin";
  if (!fs::exists(vocab)) {
    std::printf("subword set skipped: %s not found (set SPECDEC_MODELS_DIR)\n", vocab.c_str());
    return 0;
  }
  const specdec::llama2c::tokenizer tok(vocab);
  run_set("Llama 2 subword tokens (bench/data/ngram + ngram_prose)",
          sb::load_edit_tasks({data / "ngram", data / "ngram_prose"},
                              [&](const std::string& s) { return tok.encode(s, {.bos = false}); }));
  return 0;
}
