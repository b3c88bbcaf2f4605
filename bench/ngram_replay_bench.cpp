// bench/ngram_replay_bench.cpp - how many verification steps ngram_drafter saves on real edits.
//
// Each task in bench/data/ngram/ is an input-grounded edit of a source file of this project:
// prompt = "<task>.original.txt" + "\n\n" + "<task>.instruction.txt", output = "<task>.edited.txt",
// tokenised as bytes (token = byte). With a perfect target, a step proposes K tokens, keeps the
// prefix that matches the true output and adds one true token; tokens_per_step = output tokens /
// steps (1 = no speed-up). The same replay with the naive rule under the same options
// (tests/support/naive_prompt_lookup.hpp: rescan the whole history for every occurrence of the
// longest suffix that has one, max_ngram down to min_ngram, and pick by the match policy) gives
// naive_tps, and agree = 1 when every proposal of the drafter equals the naive one (expected
// under both policies).
//
//   BM_replay/<task|all>/k:<K>/n:<min>-<max>/<policy>
// Counters: tokens_per_step, naive_tps, agree, steps, out_tokens. The time is the drafter's whole
// replay (index build of the prompt included). Data directory: $SPECDEC_NGRAM_DATA, else
// bench/data/ngram beside this source file.
//
//   cmake --preset bench && cmake --build --preset bench --target ngram_replay_bench
//   build/bench/bench/ngram_replay_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <specdec/draft/ngram_drafter.hpp>

#include "bench/support/edit_tasks.hpp"
#include "tests/support/naive_prompt_lookup.hpp"

namespace {

using specdec::token_id;
using tokens = std::vector<token_id>;

using task = specdec::bench::edit_task;

std::vector<task> load_tasks() {
  const char* env = std::getenv("SPECDEC_NGRAM_DATA");
  const std::filesystem::path dir =
      env != nullptr ? std::filesystem::path(env)
                     : std::filesystem::path(__FILE__).parent_path() / "data" / "ngram";
  return specdec::bench::load_edit_tasks({dir}, specdec::bench::byte_tokens);
}

struct replay_result {
  std::size_t steps = 0;
  std::vector<tokens> proposals;
};

// Replays one task with a perfect target; `propose(history, k)` is the drafting rule.
template <class Propose, class Accept>
replay_result replay(const task& t, std::size_t k, Propose propose, Accept accept) {
  replay_result r;
  tokens h = t.prompt;
  for (std::size_t pos = 0; pos < t.output.size();) {
    tokens d = propose(h, k);
    std::size_t a = 0;
    while (a < d.size() && pos + a < t.output.size() && d[a] == t.output[pos + a]) ++a;
    const std::size_t c = std::min(a + 1, t.output.size() - pos);
    const std::span<const token_id> kept(t.output.data() + pos, c);
    accept(kept);
    h.insert(h.end(), kept.begin(), kept.end());
    pos += c;
    ++r.steps;
    r.proposals.push_back(std::move(d));
  }
  return r;
}

replay_result replay_drafter(const task& t, std::size_t k, const specdec::ngram_options& o) {
  specdec::ngram_drafter d(o);
  return replay(
      t, k, [&](const tokens& h, std::size_t kk) { return d.propose(h, kk); },
      [&](std::span<const token_id> c) { d.accept(c); });
}

replay_result replay_naive(const task& t, std::size_t k, const specdec::ngram_options& o) {
  const specdec::test::naive_prompt_lookup naive{o, t.prompt.size()};
  return replay(
      t, k, [&](const tokens& h, std::size_t kk) { return naive.propose(h, kk); },
      [](std::span<const token_id>) {});
}

void register_replay(const std::string& label,
                     std::vector<const task*> chosen, std::size_t k,
                     std::size_t min_n, std::size_t max_n, specdec::ngram_match_policy match) {
  const specdec::ngram_options o{.min_ngram = min_n, .max_ngram = max_n, .max_draft = k,
                                 .match = match};
  // Reference numbers are computed once, outside the timed loop.
  std::size_t out_tokens = 0, naive_steps = 0, steps = 0;
  bool agree = true;
  for (const task* t : chosen) {
    const auto naive = replay_naive(*t, k, o);
    const auto mine = replay_drafter(*t, k, o);
    out_tokens += t->output.size();
    naive_steps += naive.steps;
    steps += mine.steps;
    agree = agree && naive.proposals == mine.proposals;
  }
  const std::string name = "BM_replay/" + label + "/k:" + std::to_string(k) + "/n:" +
                           std::to_string(min_n) + "-" + std::to_string(max_n) + "/" +
                           (match == specdec::ngram_match_policy::most_recent ? "most_recent"
                                                                              : "longest_cont");
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    std::size_t s = 0;
    for (auto _ : state) {
      s = 0;
      for (const task* t : chosen) s += replay_drafter(*t, k, o).steps;
      benchmark::DoNotOptimize(s);
    }
    state.counters["tokens_per_step"] =
        static_cast<double>(out_tokens) / static_cast<double>(steps);
    state.counters["naive_tps"] =
        static_cast<double>(out_tokens) / static_cast<double>(naive_steps);
    state.counters["agree"] = agree ? 1.0 : 0.0;
    state.counters["steps"] = static_cast<double>(s);
    state.counters["out_tokens"] = static_cast<double>(out_tokens);
  })->Unit(benchmark::kMillisecond)->Iterations(3);
}

}  // namespace

int main(int argc, char** argv) {
  static const std::vector<task> tasks = load_tasks();
  std::vector<const task*> every;
  for (const auto& t : tasks) every.push_back(&t);
  using specdec::ngram_match_policy;
  const std::vector<std::pair<std::size_t, std::size_t>> ranges{{1, 2}, {1, 4}, {2, 4}, {3, 6},
                                                                {2, 8}};
  const auto policies = {ngram_match_policy::most_recent, ngram_match_policy::longest_continuation};
  for (const auto match : policies)
    for (const std::size_t k : {4u, 8u, 16u})
      for (const auto& [lo, hi] : ranges) register_replay("all", every, k, lo, hi, match);
  for (const auto match : policies)
    for (const auto& t : tasks) register_replay(t.name, {&t}, 8, 2, 4, match);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
