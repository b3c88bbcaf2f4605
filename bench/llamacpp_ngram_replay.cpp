// bench/llamacpp_ngram_replay.cpp - tokens per verification step of every n-gram speculative
// type of the pinned llama.cpp (ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache)
// and of specdec's ngram-specdec, all driven through llama.cpp's own common_speculative API
// (common_speculative_init / _begin / _draft / _accept, linked from the patched pinned source, as
// llama-server calls them), on the same token streams.
//
// Sets (Llama 2 subword tokens, $SPECDEC_MODELS_DIR/llama2.tokenizer.bin, no BOS):
// - code edits: bench/data/ngram (input-grounded edits of this project's source files);
// - prose edits: bench/data/ngram_prose and the held-out edits made from $SPECDEC_HELDOUT_DIR
//   (tests/support/heldout_edits.hpp);
// - natural continuation: each held-out document's first half as the prompt and its second half
//   (at most 1500 tokens) as the output: text that repeats only as much as prose does.
// A step: the type drafts at most K tokens for the history (dp.n_max = K, as the server's cap); a
// perfect target keeps the draft's prefix that matches the true output and adds one token
// (n_accepted goes back through common_speculative_accept when something was drafted). As in
// llama-server, begin() gets the prompt, the first output token comes from the prompt's batch
// (a step without a draft), and each draft sees the tokens before the last one as dp.prompt and
// the last one as dp.id_last. (bench/ngram_rules_bench.cpp drafts from the prompt's end too, so
// its tokens per step are a little higher on the same tasks.) Printed: markdown tables of tokens
// per step (output tokens / steps) and drafted tokens per step at K = 8, 16, 64, each type at
// llama.cpp's defaults and at the variants named in its row; "best llama.cpp" is the highest of
// llama.cpp's rows in each column.
//
//   examples/llamacpp/server/build-server.sh (or the llamacpp preset), then
//   cmake --build build/llamacpp --target specdec-llamacpp-ngram-replay
//   build/llamacpp/bin/specdec-llamacpp-ngram-replay      # a few minutes on 2 cores
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/support/edit_tasks.hpp"
#include "bench/support/models.hpp"
#include "llama2c/engine/tokenizer.hpp"
#include "tests/support/heldout_edits.hpp"

#include "common.h"
#include "log.h"
#include "speculative.h"

namespace {

namespace fs = std::filesystem;
using task = specdec::bench::edit_task;
using tokens = specdec::bench::tokens;

struct score {
  std::size_t out_tokens = 0, steps = 0, drafted = 0;
  double per_step() const { return steps ? double(out_tokens) / double(steps) : 0.0; }
  double drafted_per_step() const { return steps ? double(drafted) / double(steps) : 0.0; }
  score& operator+=(const score& o) {
    out_tokens += o.out_tokens;
    steps += o.steps;
    drafted += o.drafted;
    return *this;
  }
};

struct rule {
  std::string name;
  bool ours = false;
  std::function<void(common_params_speculative&)> set;
};

// One task through one speculative context of one sequence, as llama-server drives it: begin
// with the prompt, then per step the draft params (the tokens before the last one, the last one,
// the cap K), draft, accept what matched.
score replay(const task& t, std::size_t k, const rule& r) {
  common_params_speculative params;
  r.set(params);
  common_speculative_ptr spec(common_speculative_init(params, 1));
  if (!spec) throw std::runtime_error("common_speculative_init made nothing for " + r.name);
  llama_tokens history(t.prompt.begin(), t.prompt.end());
  common_speculative_begin(spec.get(), 0, history);
  llama_tokens before_last, draft;
  score s;
  // The first output token comes from the prompt's batch, undrafted (as in llama-server).
  history.push_back(t.output.front());
  s.steps = 1;
  for (std::size_t pos = 1; pos < t.output.size();) {
    before_last.assign(history.begin(), history.end() - 1);
    draft.clear();
    auto& dp = common_speculative_get_draft_params(spec.get(), 0);
    dp.drafting = true;
    dp.n_max = static_cast<int32_t>(k);
    dp.pos0 = static_cast<llama_pos>(before_last.size());
    dp.id_last = history.back();
    dp.prompt = &before_last;
    dp.result = &draft;
    common_speculative_draft(spec.get());
    std::size_t a = 0;
    while (a < draft.size() && a < k && pos + a < t.output.size() && draft[a] == t.output[pos + a])
      ++a;
    s.drafted += std::min(draft.size(), k);
    if (!draft.empty()) common_speculative_accept(spec.get(), 0, static_cast<uint16_t>(a));
    const std::size_t kept = std::min(a + 1, t.output.size() - pos);
    history.insert(history.end(), t.output.begin() + static_cast<std::ptrdiff_t>(pos),
                   t.output.begin() + static_cast<std::ptrdiff_t>(pos + kept));
    pos += kept;
    ++s.steps;
  }
  s.out_tokens = t.output.size();
  return s;
}

score run(const std::vector<task>& set, std::size_t k, const rule& r) {
  score total;
  for (const task& t : set) total += replay(t, k, r);
  return total;
}

std::vector<rule> rules() {
  using P = common_params_speculative;
  const auto type = [](P& p, common_speculative_type t) { p.types = {t}; };
  std::vector<rule> out;
  // The three map types: their defaults (n 12) and shorter keys (n 4).
  struct map_type {
    const char* name;
    common_speculative_type type;
    common_params_speculative_ngram_map P::*params;
  };
  for (const map_type m : {map_type{"ngram-simple", COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE, &P::ngram_simple},
                           map_type{"ngram-map-k", COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K, &P::ngram_map_k},
                           map_type{"ngram-map-k4v", COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V, &P::ngram_map_k4v}}) {
    out.push_back({std::string(m.name) + " (n 12, m 48; defaults)", false,
                   [=](P& p) { type(p, m.type); }});
    out.push_back({std::string(m.name) + " (n 4, m 48)", false, [=](P& p) {
                     type(p, m.type);
                     (p.*m.params).size_n = 4;
                   }});
  }
  out.push_back({"ngram-mod (match 24, drafts 48-64; defaults)", false,
                 [=](P& p) { type(p, COMMON_SPECULATIVE_TYPE_NGRAM_MOD); }});
  out.push_back({"ngram-mod (match 24, drafts 1-64)", false, [=](P& p) {
                   type(p, COMMON_SPECULATIVE_TYPE_NGRAM_MOD);
                   p.ngram_mod.n_min = 1;
                 }});
  out.push_back({"ngram-mod (match 8, drafts 1-64)", false, [=](P& p) {
                   type(p, COMMON_SPECULATIVE_TYPE_NGRAM_MOD);
                   p.ngram_mod.n_match = 8;
                   p.ngram_mod.n_min = 1;
                 }});
  out.push_back({"ngram-cache (defaults)", false,
                 [=](P& p) { type(p, COMMON_SPECULATIVE_TYPE_NGRAM_CACHE); }});
  const auto specdec = [=](P& p, int n_min, float adaptive) {
    type(p, COMMON_SPECULATIVE_TYPE_NGRAM_SPECDEC);
    p.ngram_specdec.n_max = 256;  // K alone caps the draft
    p.ngram_specdec.n_min = n_min;
    p.ngram_specdec.adaptive = adaptive;
  };
  out.push_back({"ngram-specdec (min match 1, adaptive 2; defaults)", true,
                 [=](P& p) { specdec(p, 1, 2.0f); }});
  for (const float f : {1.0f, 4.0f})
    out.push_back({"ngram-specdec (min match 1, adaptive " + std::to_string(int(f)) + ")", true,
                   [=](P& p) { specdec(p, 1, f); }});
  for (const int n_min : {1, 2, 3})
    out.push_back({"ngram-specdec (min match " + std::to_string(n_min) + ", no adaptive cap)", true,
                   [=](P& p) { specdec(p, n_min, 0.0f); }});
  return out;
}

// The natural-continuation set: each held-out document's first half, then its next tokens.
std::vector<task> continuations(const fs::path& dir,
                                const std::function<tokens(const std::string&)>& encode) {
  std::vector<task> out;
  if (!fs::is_directory(dir)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const tokens all = encode(specdec::bench::slurp(f));
    if (all.size() < 200) continue;
    const std::size_t half = all.size() / 2;
    const std::size_t end = std::min(all.size(), half + 1500);
    out.push_back({f.stem().string(), tokens(all.begin(), all.begin() + half),
                   tokens(all.begin() + half, all.begin() + end)});
  }
  return out;
}

}  // namespace

int main() {
  namespace sb = specdec::bench;
  common_log_set_verbosity_thold(-1);  // the types' start-up lines would fill the tables
  const fs::path data = fs::path(SPECDEC_SOURCE_DIR) / "bench" / "data";
  const fs::path vocab = sb::models_dir / "llama2.tokenizer.bin";
  if (sb::skip_without("specdec-llamacpp-ngram-replay", {vocab})) return 0;
  const specdec::llama2c::tokenizer tok(vocab);
  const auto encode = [&](const std::string& s) { return tok.encode(s, {.bos = false}); };
  struct named_set {
    std::string name;
    std::vector<task> tasks;
  };
  std::vector<named_set> sets;
  sets.push_back({"code edits", sb::load_edit_tasks({data / "ngram"}, encode)});
  auto prose = sb::load_edit_tasks({data / "ngram_prose"}, encode);
  for (auto& t : specdec::test::heldout_tasks<task>(SPECDEC_HELDOUT_DIR, encode))
    prose.push_back(std::move(t));
  sets.push_back({"prose edits", std::move(prose)});
  sets.push_back({"natural continuation", continuations(SPECDEC_HELDOUT_DIR, encode)});

  const std::vector<std::size_t> ks{8, 16, 64};
  const auto all = rules();
  for (const auto& set : sets) {
    std::size_t out_tokens = 0;
    for (const auto& t : set.tasks) out_tokens += t.output.size();
    std::printf("\n%s: %zu tasks, %zu output tokens. Tokens per step (drafted per step)\n\n",
                set.name.c_str(), set.tasks.size(), out_tokens);
    if (set.tasks.empty()) continue;
    std::printf("| type |");
    for (const auto k : ks) std::printf(" K = %zu |", k);
    std::printf("\n|---|");
    for (std::size_t i = 0; i < ks.size(); ++i) std::printf("---|");
    std::printf("\n");
    std::vector<double> best(ks.size(), 0.0), ours(ks.size(), 0.0);
    for (const rule& r : all) {
      std::printf("| %s |", r.name.c_str());
      for (std::size_t i = 0; i < ks.size(); ++i) {
        const score s = run(set.tasks, ks[i], r);
        std::printf(" %.2f (%.1f) |", s.per_step(), s.drafted_per_step());
        auto& b = r.ours ? ours[i] : best[i];
        if (!r.ours || r.name.find("defaults") != std::string::npos)
          b = std::max(b, s.per_step());
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    std::printf("| ngram-specdec (defaults) / best llama.cpp row |");
    for (std::size_t i = 0; i < ks.size(); ++i) std::printf(" %.2fx |", ours[i] / best[i]);
    std::printf("\n");
  }
  return 0;
}
