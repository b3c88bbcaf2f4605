// bench/memory_bound_bench.cpp - what one append of n tokens costs on a memory-bound target: the
// aidreams260K checkpoint reshaped to a larger public shape (110M by default), whose weights do
// not fit in any cache. This curve t(n) bounds every speculative speed-up: a chain of K drafts is
// scored by one call of n = K + 1.
//
//   BM_Append/n/threads   append of n tokens after a context of 32, then truncate(32). Each
//                         iteration also times, interleaved and in the same state, a streaming
//                         read of the same weight bytes with the same threads (the memory limit)
//                         and a 1-token append: `to_stream` = t(n) / read, `to_1` = t(n) / t(1).
//                         `GFLOPs` is the rate of the weight products (2 x weights x n / t(n)).
//   BM_Peak/threads       the machine's peak fused multiply-add rate (registers only, no memory),
//                         with the kernel's packet width: the ceiling for `GFLOPs`.
//   BM_Load               loading the checkpoint (llama2c::weights) against reading the same file
//                         from the page cache into a new buffer (`to_read`).
//
//   cmake --preset bench && cmake --build --preset bench --target memory_bound_bench
//   build/bench/bench/memory_bound_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only
//
// SPECDEC_BENCH_SHAPE=42M selects another shape. The reshaped checkpoint is written once into
// the build folder (bench/support/reshaped.hpp). Skips (prints why, exits 0) without the model.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/support/models.hpp"
#include "bench/support/reshaped.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/reference.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::token_id;

constexpr std::size_t context = 32;

std::string shape() {
  const char* s = std::getenv("SPECDEC_BENCH_SHAPE");
  return s != nullptr ? s : "110M";
}

const std::shared_ptr<const l2::weights>& target_weights() {
  static const std::shared_ptr<const l2::weights> w = l2::load_checkpoint(sb::reshaped(shape()));
  return w;
}

std::shared_ptr<l2::thread_pool> pool_of(std::size_t threads) {
  static std::shared_ptr<l2::thread_pool> pools[3];
  auto& p = pools[std::min<std::size_t>(threads, 2)];
  if (!p) p = std::make_shared<l2::thread_pool>(threads);
  return p;
}

// Sums every weight float, split over the pool as the kernel splits its work: the time to stream
// the bytes that one forward pass must read.
float stream_read(l2::thread_pool& pool, const l2::weights& w) {
  const float* base = w.token_embedding().data();  // the first tensor: the buffer's start
  const auto floats = static_cast<std::size_t>(w.bytes() / sizeof(float));
  constexpr std::size_t chunks = 64;
  float sums[chunks] = {};
  auto body = [&](std::size_t i) {
    const std::size_t lo = floats * i / chunks, hi = floats * (i + 1) / chunks;
    sums[i] =
        Eigen::Map<const Eigen::VectorXf>(base + lo, static_cast<Eigen::Index>(hi - lo)).sum();
  };
  pool.for_each(chunks, body);
  float total = 0.0f;
  for (const float s : sums) total += s;
  return total;
}

void BM_Append(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto threads = static_cast<std::size_t>(state.range(1));
  const auto& w = target_weights();
  auto pool = pool_of(threads);
  l2::model m(w, {.max_context = context + 64, .pool = pool});
  const std::size_t vocab = m.vocab_size();
  std::vector<float> logits((context + 64) * vocab);
  const std::span<const token_id> ids(l2::reference_ids);
  m.append(ids.first(context), std::span(logits).first(context * vocab));
  std::vector<token_id> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = ids[(context + i) % ids.size()];
  double read_s = 0.0, one_s = 0.0, n_s = 0.0;
  for (auto _ : state) {
    read_s +=
        sb::time_call<sb::wall_clock>([&] { benchmark::DoNotOptimize(stream_read(*pool, *w)); });
    one_s += sb::time_call<sb::wall_clock>(
        [&] { m.append(std::span(tokens).first(1), std::span(logits).first(vocab)); });
    m.truncate(context);
    const double s = sb::time_call<sb::wall_clock>(
        [&] { m.append(tokens, std::span(logits).first(n * vocab)); });
    m.truncate(context);
    n_s += s;
    state.SetIterationTime(s);
  }
  const auto it = static_cast<double>(state.iterations());
  const double weight_floats = static_cast<double>(w->bytes()) / sizeof(float);
  state.counters["read_ms"] = 1e3 * read_s / it;
  state.counters["to_stream"] = n_s / read_s;
  state.counters["to_1"] = n_s / one_s;
  state.counters["GFLOPs"] = 2.0 * weight_floats * static_cast<double>(n) / (n_s / it) / 1e9;
  state.counters["GBs"] = static_cast<double>(w->bytes()) / (read_s / it) / 1e9;
}

// Peak FMA rate with the kernel's packet type: 12 independent accumulators per thread, in
// registers, so neither memory nor latency limits it.
void BM_Peak(benchmark::State& state) {
  using namespace Eigen::internal;
  using packet = l2::detail::packet;
  const auto threads = static_cast<std::size_t>(state.range(0));
  auto pool = pool_of(threads);
  constexpr long steps = 2'000'000;
  constexpr int chains = 12;
  float sink[256] = {};
  double seconds = 0.0;
  for (auto _ : state) {
    auto body = [&](std::size_t t) {
      packet acc[chains];
      for (int c = 0; c < chains; ++c) acc[c] = pset1<packet>(1.0f + 1e-3f * static_cast<float>(c));
      const packet a = pset1<packet>(0.999999f), b = pset1<packet>(1e-6f);
      for (long i = 0; i < steps; ++i)
        for (int c = 0; c < chains; ++c) acc[c] = pmadd(acc[c], a, b);
      float s = 0.0f;
      for (int c = 0; c < chains; ++c) s += predux(acc[c]);
      sink[t] = s;
    };
    const double s = sb::time_call<sb::wall_clock>([&] { pool->for_each(threads, body); });
    seconds += s;
    state.SetIterationTime(s);
  }
  benchmark::DoNotOptimize(sink);
  const double flops =
      2.0 * steps * chains * l2::detail::packet_size * static_cast<double>(threads);
  state.counters["GFLOPs"] = flops / (seconds / static_cast<double>(state.iterations())) / 1e9;
}

void BM_Load(benchmark::State& state) {
  const auto path = sb::reshaped(shape());
  const auto bytes = static_cast<std::size_t>(std::filesystem::file_size(path));
  double read_s = 0.0, load_s = 0.0;
  for (auto _ : state) {
    // The reference: the file read into a new buffer (as any loader must: its pages are
    // faulted in by the read), from the page cache.
    read_s += sb::time_call<sb::wall_clock>([&] {
      const std::unique_ptr<char[]> buffer(new char[bytes]);
      std::FILE* f = std::fopen(path.c_str(), "rb");
      std::setvbuf(f, nullptr, _IONBF, 0);
      benchmark::DoNotOptimize(std::fread(buffer.get(), 1, bytes, f));
      std::fclose(f);
    });
    const double s = sb::time_call<sb::wall_clock>([&] { l2::load_checkpoint(path); });
    load_s += s;
    state.SetIterationTime(s);
  }
  state.counters["read_ms"] = 1e3 * read_s / static_cast<double>(state.iterations());
  state.counters["to_read"] = load_s / read_s;
}

}  // namespace

BENCHMARK(BM_Peak)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Load)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_Append)
    ->ArgsProduct({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 17, 24, 32, 48, 64}, {2}})
    ->ArgsProduct({{1, 2, 4, 8, 16, 32}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

int main(int argc, char** argv) {
  if (sb::skip_without("memory_bound_bench", {sb::checkpoint_path})) return 0;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("target: aidreams260K reshaped to %s (%s)\n", shape().c_str(),
              sb::reshaped(shape()).string().c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
