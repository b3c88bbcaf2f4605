// bench/ngram_misses_bench.cpp - memory accesses of an n-gram drafter step, for a cache simulator
// (this VM has no hardware counters). Builds ngram_drafter on the first CONTEXT tokens of
// ngram_bench's stream (reserved, as ngram_bench does), then runs STEPS steps (propose K = 8 +
// accept what a perfect target keeps). Run it under cachegrind with STEPS = 0 and STEPS = S: the
// difference of the simulated misses, divided by S, is the misses per step (the build cancels).
//
//   build/bench/bench/ngram_misses_bench 1048576 20000 unbounded|bounded
//   valgrind --tool=cachegrind --cache-sim=yes --LL=33554432,16,64
//     build/bench/bench/ngram_misses_bench 1048576 0 unbounded      (then with 20000)
// docs/ngram.md has the figures and the script that runs the pairs.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <specdec/draft/ngram_drafter.hpp>
#include <string>
#include <vector>

#include "bench/support/ngram_stream.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s CONTEXT STEPS unbounded|bounded\n", argv[0]);
    return 2;
  }
  const std::size_t n = std::strtoull(argv[1], nullptr, 10);
  const std::size_t steps = std::strtoull(argv[2], nullptr, 10);
  const bool bounded = std::string(argv[3]) == "bounded";
  constexpr std::size_t k = 8;
  if (steps > 100000) {
    std::fprintf(stderr, "STEPS: at most 100000\n");
    return 2;
  }
  // One stream length whatever STEPS is: the stream is seeded with its length, and the build
  // must be the same in both runs of a pair.
  const auto& s = specdec::bench::stream(n + 65 * 100000);
  specdec::ngram_options o{.max_draft = k};
  if (bounded) o = {.min_ngram = 2, .max_ngram = 4, .max_draft = k};
  specdec::ngram_drafter d(o);
  d.reserve(s.size());
  std::vector<specdec::token_id> out;
  d.propose_into(std::span(s).first(n), k, out);
  std::size_t pos = n, tokens = 0;
  for (std::size_t i = 0; i < steps; ++i) {
    d.propose_into(std::span(s).first(pos), k, out);
    std::size_t a = 0;
    while (a < out.size() && out[a] == s[pos + a]) ++a;
    d.accept(std::span(s).subspan(pos, a + 1));
    pos += a + 1;
    tokens += a + 1;
  }
  std::printf("context %zu, %zu steps, %.3f tokens per step\n", n, steps,
              steps ? double(tokens) / double(steps) : 0.0);
  return 0;
}
