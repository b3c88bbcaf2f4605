// bench/ngram_rules_bench.cpp - tokens per verification step of prompt-lookup rules on
// input-grounded edits, on byte tokens and on Llama 2 subword tokens: ngram_drafter's options
// beside replays of llama.cpp's ngram-simple / ngram-mod and vLLM's ngram proposer, written from
// their documentation (see docs/ngram.md for what each replay does and where it differs).
//
// Tasks: bench/data/ngram (code edits of this project's files) and bench/data/ngram_prose (a
// rename in a design document, a trimmed guide, comments stripped from a header); prompt =
// original + "\n\n" + instruction, output = the edited text. Byte set: bench/data/ngram only,
// one token per byte (as ngram_replay_bench). Subword set: both folders, each text encoded by
// the Llama 2 tokenizer ($SPECDEC_MODELS_DIR/llama2.tokenizer.bin, no BOS) at start-up.
// Held-out set: edits a program makes at start-up from the documents in $SPECDEC_HELDOUT_DIR
// (../shared/seeds: articles and a paper, kept outside the project; tests/support/
// heldout_edits.hpp), subword tokens, reported apart: the defaults were not tuned on it.
// A step: the rule proposes K tokens (or a set of candidates, verified as a trie: the longest
// matching one counts); a perfect target keeps the matching prefix and adds one token.
// Printed: markdown tables of tokens per step (output tokens / steps) and drafted tokens per
// step (what verification paid for), all tasks together and per task.
//
//   cmake --preset bench && cmake --build build/bench --target ngram_rules_bench
//   build/bench/bench/ngram_rules_bench            # about a minute on a 2-core VM
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <specdec/draft/ngram_drafter.hpp>
#include <string>
#include <vector>

#include "bench/support/edit_tasks.hpp"
#include "bench/support/models.hpp"
#include "llama2c/engine/tokenizer.hpp"
#include "tests/support/heldout_edits.hpp"

#ifndef SPECDEC_HELDOUT_DIR
#error "SPECDEC_HELDOUT_DIR is not defined: bench/CMakeLists.txt defines it"
#endif

namespace {

using specdec::token_id;
using tokens = std::vector<token_id>;
namespace fs = std::filesystem;

using task = specdec::bench::edit_task;

// A drafting rule under replay: candidates for the history (one chain, or several for a trie).
struct rule {
  virtual ~rule() = default;
  virtual void start(const tokens& prompt) = 0;
  virtual std::vector<tokens> propose(const tokens& history, std::size_t k) = 0;
  virtual void accept(std::span<const token_id> kept) = 0;
};

struct ours : rule {
  specdec::ngram_options o;
  std::size_t candidates;
  std::optional<specdec::ngram_drafter> d;
  ours(specdec::ngram_options options, std::size_t n) : o(options), candidates(n) {}
  void start(const tokens&) override { d.emplace(o); }
  std::vector<tokens> propose(const tokens& h, std::size_t k) override {
    if (candidates > 1) return d->propose_candidates(h, k, candidates);
    return {d->propose(h, k)};
  }
  void accept(std::span<const token_id> kept) override { d->accept(kept); }
};

bool suffix_ends_at(const tokens& h, std::size_t e, std::size_t n) {
  return std::equal(h.end() - static_cast<std::ptrdiff_t>(n), h.end(),
                    h.begin() + static_cast<std::ptrdiff_t>(e + 1 - n));
}

// vLLM's ngram proposer: the longest n-gram in [min, max] matching the suffix; the tokens after
// its earliest occurrence.
struct vllm_ngram : rule {
  std::size_t min_n, max_n;
  vllm_ngram(std::size_t lo, std::size_t hi) : min_n(lo), max_n(hi) {}
  void start(const tokens&) override {}
  std::vector<tokens> propose(const tokens& h, std::size_t k) override {
    const std::size_t n = h.size();
    for (std::size_t m = std::min(max_n, n); m >= min_n && m > 0; --m)
      for (std::size_t e = m - 1; e + 1 < n; ++e)
        if (suffix_ends_at(h, e, m))
          return {tokens(h.begin() + static_cast<std::ptrdiff_t>(e + 1),
                         h.begin() + static_cast<std::ptrdiff_t>(std::min(n, e + 1 + k)))};
    return {tokens{}};
  }
  void accept(std::span<const token_id>) override {}
};

// llama.cpp ngram-simple: the last occurrence of the current n-gram (exactly n tokens); the m
// tokens after it, at most K.
struct llama_ngram_simple : rule {
  std::size_t n_size, m_size;
  llama_ngram_simple(std::size_t n, std::size_t m) : n_size(n), m_size(m) {}
  void start(const tokens&) override {}
  std::vector<tokens> propose(const tokens& h, std::size_t k) override {
    const std::size_t n = h.size();
    if (n <= n_size) return {tokens{}};
    for (std::size_t e = n - 1; e-- > n_size - 1;)
      if (suffix_ends_at(h, e, n_size))
        return {tokens(
            h.begin() + static_cast<std::ptrdiff_t>(e + 1),
            h.begin() + static_cast<std::ptrdiff_t>(std::min(n, e + 1 + std::min(k, m_size))))};
    return {tokens{}};
  }
  void accept(std::span<const token_id>) override {}
};

// llama.cpp ngram-mod: a fixed pool (2^22 entries, ~16 MB) indexed by a hash of the last n
// tokens holding the token seen after them (collisions overwrite); a draft follows the pool
// token by token while it has an entry, up to K. (llama.cpp also drops drafts shorter than
// n_min = 48, which would leave nothing at K = 8: not replayed, in its favour.) One pool per task.
struct llama_ngram_mod : rule {
  static constexpr std::size_t pool_bits = 22;
  std::size_t n_size;
  std::vector<token_id> pool;
  tokens h;
  explicit llama_ngram_mod(std::size_t n) : n_size(n) {}
  static std::uint64_t hash(std::span<const token_id> w) {
    std::uint64_t x = 0;
    for (const token_id t : w) x = (x ^ static_cast<std::uint32_t>(t)) * 0x100000001B3ULL + 7;
    return (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ULL >> (64 - pool_bits);
  }
  void add(token_id t) {
    if (h.size() >= n_size) pool[hash(std::span(h).last(n_size))] = t;
    h.push_back(t);
  }
  void start(const tokens& prompt) override {
    pool.assign(std::size_t{1} << pool_bits, -1);
    h.clear();
    for (const token_id t : prompt) add(t);
  }
  std::vector<tokens> propose(const tokens&, std::size_t k) override {
    tokens ctx(h.end() - static_cast<std::ptrdiff_t>(std::min(n_size, h.size())), h.end()), out;
    while (ctx.size() >= n_size && out.size() < k) {
      const token_id t = pool[hash(std::span(ctx).last(n_size))];
      if (t < 0) break;
      out.push_back(t);
      ctx.push_back(t);
    }
    return {out};
  }
  void accept(std::span<const token_id> kept) override {
    for (const token_id t : kept) add(t);
  }
};

struct score {
  std::size_t out_tokens = 0, steps = 0, drafted = 0;
  double per_step() const { return double(out_tokens) / double(steps); }
  double drafted_per_step() const { return double(drafted) / double(steps); }
};

score replay(const task& t, std::size_t k, rule& r) {
  score s;
  tokens h = t.prompt;
  r.start(h);
  for (std::size_t pos = 0; pos < t.output.size();) {
    const auto candidates = r.propose(h, k);
    std::size_t best = 0;
    for (const tokens& c : candidates) {
      std::size_t a = 0;
      while (a < c.size() && a < k && pos + a < t.output.size() && c[a] == t.output[pos + a]) ++a;
      best = std::max(best, a);
      s.drafted += std::min(c.size(), k);
    }
    const std::size_t kept = std::min(best + 1, t.output.size() - pos);
    const std::span<const token_id> accepted(t.output.data() + pos, kept);
    r.accept(accepted);
    h.insert(h.end(), accepted.begin(), accepted.end());
    pos += kept;
    ++s.steps;
  }
  s.out_tokens = t.output.size();
  return s;
}

struct row {
  std::string name;
  std::function<std::unique_ptr<rule>(std::size_t k)> make;
  bool chain_only_k8 = false;  // candidates: reported at K = 8 only
};

specdec::ngram_options with(specdec::ngram_options o, std::size_t k) {
  o.max_draft = k;
  return o;
}

std::vector<row> rows() {
  using specdec::ngram_match_policy;
  using specdec::ngram_options;
  auto ngram = [](std::string name, ngram_options o, std::size_t n = 1) {
    return row{std::move(name),
               [o, n](std::size_t k) -> std::unique_ptr<rule> {
                 return std::make_unique<ours>(with(o, k), n);
               },
               n > 1};
  };
  return {
      ngram("former defaults (2..4, most recent)", {.min_ngram = 2, .max_ngram = 4}),
      ngram("2..8, most recent", {.min_ngram = 2, .max_ngram = 8}),
      ngram("2..64, most recent", {.min_ngram = 2, .max_ngram = 64}),
      ngram("unbounded, min 1, most recent", {.min_ngram = 1, .max_ngram = 0}),
      ngram("unbounded, min 2, most recent", {.min_ngram = 2, .max_ngram = 0}),
      ngram("unbounded, min 3, most recent", {.min_ngram = 3, .max_ngram = 0}),
      ngram("unbounded, min 2, longest continuation",
            {.min_ngram = 2, .max_ngram = 0, .match = ngram_match_policy::longest_continuation}),
      ngram("unbounded, min 2, most frequent",
            {.min_ngram = 2, .max_ngram = 0, .match = ngram_match_policy::most_frequent}),
      ngram("unbounded, min 2, most recent, adaptive x2",
            {.min_ngram = 2, .max_ngram = 0, .adaptive_factor = 2}),
      ngram("unbounded, min 2, most recent, adaptive x4",
            {.min_ngram = 2, .max_ngram = 0, .adaptive_factor = 4}),
      ngram("unbounded, min 1, most frequent",
            {.min_ngram = 1, .max_ngram = 0, .match = ngram_match_policy::most_frequent}),
      ngram("unbounded, min 1, most frequent, adaptive x8",
            {.min_ngram = 1,
             .max_ngram = 0,
             .match = ngram_match_policy::most_frequent,
             .adaptive_factor = 8}),
      ngram("unbounded, min 1, recent, adaptive x8",
            {.min_ngram = 1, .max_ngram = 0, .adaptive_factor = 8}),
      ngram("unbounded, min 1, recent, adaptive x16",
            {.min_ngram = 1, .max_ngram = 0, .adaptive_factor = 16}),
      ngram("2..8, 8 candidates (trie)", {.min_ngram = 2, .max_ngram = 8}, 8),
      ngram("unbounded, min 2, 8 candidates (trie)", {.min_ngram = 2, .max_ngram = 0}, 8),
      ngram("unbounded, min 1, 8 candidates (trie)", {.min_ngram = 1, .max_ngram = 0}, 8),
      ngram("unbounded, min 1, most frequent, 8 candidates (trie)",
            {.min_ngram = 1, .max_ngram = 0, .match = ngram_match_policy::most_frequent}, 8),
      {"vLLM ngram (n = 5, earliest)",
       [](std::size_t) { return std::make_unique<vllm_ngram>(5, 5); }},
      {"vLLM ngram (1..5, earliest)",
       [](std::size_t) { return std::make_unique<vllm_ngram>(1, 5); }},
      {"llama.cpp ngram-simple (n = 12, m = 48)",
       [](std::size_t) { return std::make_unique<llama_ngram_simple>(12, 48); }},
      {"llama.cpp ngram-simple (n = 4, m = 48)",
       [](std::size_t) { return std::make_unique<llama_ngram_simple>(4, 48); }},
      {"llama.cpp ngram-mod (n = 24)",
       [](std::size_t) { return std::make_unique<llama_ngram_mod>(24); }},
  };
}

score run(const std::vector<task>& tasks, const row& r, std::size_t k) {
  score total;
  for (const task& t : tasks) {
    auto rule = r.make(k);
    const score s = replay(t, k, *rule);
    total.out_tokens += s.out_tokens;
    total.steps += s.steps;
    total.drafted += s.drafted;
  }
  return total;
}

}  // namespace

int main() {
  namespace sb = specdec::bench;
  const fs::path data = fs::path(__FILE__).parent_path() / "data";
  const auto bytes = sb::load_edit_tasks({data / "ngram"}, sb::byte_tokens);
  const fs::path vocab = sb::models_dir / "llama2.tokenizer.bin";
  std::vector<task> subword, heldout;
  if (fs::exists(vocab)) {
    const specdec::llama2c::tokenizer tok(vocab);
    const auto encode = [&](const std::string& s) { return tok.encode(s, {.bos = false}); };
    subword = sb::load_edit_tasks({data / "ngram", data / "ngram_prose"}, encode);
    heldout = specdec::test::heldout_tasks<task>(SPECDEC_HELDOUT_DIR, encode);
  } else {
    std::printf("subword set skipped: %s not found (set SPECDEC_MODELS_DIR)\n", vocab.c_str());
  }
  const auto output_tokens = [](const std::vector<task>& set) {
    std::size_t n = 0;
    for (const auto& t : set) n += t.output.size();
    return n;
  };
  std::printf(
      "byte set: %zu tasks, %zu output tokens; subword set: %zu tasks, %zu output tokens\n\n",
      bytes.size(), output_tokens(bytes), subword.size(), output_tokens(subword));

  const auto all = rows();
  // One set's cells of a rule's row: tokens/step at K = 8 and 64, drafted tokens/step at 64.
  const auto set_cells = [](const std::vector<task>& set, const row& r) {
    std::printf("%.2f | ", run(set, r, 8).per_step());
    if (r.chain_only_k8) {
      std::printf("- | - |");
    } else {
      const score s = run(set, r, 64);
      std::printf("%.2f | %.1f |", s.per_step(), s.drafted_per_step());
    }
  };
  std::printf(
      "| rule | bytes K=8 | bytes K=64 | subword K=8 | subword K=64 | subword K=64 drafted/step "
      "|\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const row& r : all) {
    std::printf("| %s | %.2f | ", r.name.c_str(), run(bytes, r, 8).per_step());
    if (r.chain_only_k8)
      std::printf("- | ");
    else
      std::printf("%.2f | ", run(bytes, r, 64).per_step());
    if (subword.empty())
      std::printf("- | - | - |");
    else
      set_cells(subword, r);
    std::printf("\n");
    std::fflush(stdout);
  }
  if (subword.empty()) return 0;
  std::vector<std::size_t> shown;  // the former defaults, the defaults, and two alternatives
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].name.starts_with("former defaults") ||
        all[i].name.starts_with("unbounded, min 1, most recent") ||
        all[i].name == "unbounded, min 1, most frequent" ||
        all[i].name == "unbounded, min 1, 8 candidates (trie)")
      shown.push_back(i);
  const auto per_task = [&](const std::vector<task>& set) {
    std::printf("| task | output tokens |");
    for (const std::size_t i : shown) std::printf(" %s |", all[i].name.c_str());
    std::printf("\n|---|---|");
    for (std::size_t i = 0; i < shown.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (const task& t : set) {
      std::printf("| %s | %zu |", t.name.c_str(), t.output.size());
      for (const std::size_t i : shown) {
        const std::vector<task> one{t};
        std::printf(" %.2f", run(one, all[i], 8).per_step());
        if (all[i].chain_only_k8)
          std::printf(" |");
        else
          std::printf(" / %.2f |", run(one, all[i], 64).per_step());
      }
      std::printf("\n");
    }
  };
  std::printf("\nPer task, subword tokens (tokens/step at K = 8 / K = 64):\n\n");
  per_task(subword);
  if (heldout.empty()) {
    std::printf("\nheld-out set skipped: no *.txt in %s (set SPECDEC_HELDOUT_DIR)\n",
                SPECDEC_HELDOUT_DIR);
    return 0;
  }
  std::printf("\nHeld-out set (%s): %zu tasks, %zu output tokens, subword tokens\n\n",
              SPECDEC_HELDOUT_DIR, heldout.size(), output_tokens(heldout));
  std::printf("| rule | K=8 | K=64 | K=64 drafted/step |\n|---|---|---|---|\n");
  for (const row& r : all) {
    std::printf("| %s | ", r.name.c_str());
    set_cells(heldout, r);
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("\nPer task, held-out set (tokens/step at K = 8 / K = 64):\n\n");
  per_task(heldout);
  return 0;
}
