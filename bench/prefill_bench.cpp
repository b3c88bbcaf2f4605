// bench/prefill_bench.cpp - what feeding a prompt costs: the heap the decoder's start allocates,
// and the time of a prefill without logits against an append with them.
//
//   BM_PrefillBytes/<variant>  heap bytes allocated (a replaced global operator new counts them)
//                      by speculative_decoder::start on a 4096-token prompt at V = 32000, the
//                      model a stub that computes nothing. Same-run reference: the feed as start
//                      did it before prefill existed (the prompt copied into the history, one
//                      append into a (prompt - 1) x V buffer kept for the sequence's life).
//                      Variants: `prefill` (the model has prefill()), `chunked` (it does not:
//                      specdec::prefill appends prefill_chunk_tokens(V) = 32 rows at a time).
//                      Counters: bytes, ref_bytes, ratio = bytes / ref_bytes. No model file.
//   BM_PrefillTime/<shape>/<n>  prefill of an n-token prompt on a llama2c target, against
//                      appending the same prompt with its logits (the reference, interleaved
//                      in each iteration, thread CPU time, one thread). Counters: us, ref_us,
//                      ratio = time(prefill) / time(append), and `kept` = the share of the
//                      append's matrix work (multiply-adds of the projections, FFN and
//                      classifier; attention over the context not counted) that prefill still
//                      does: prefill skips the classifier and the last layer's work after its
//                      K/V. Shapes: `110M` (aidreams260K reshaped to the 110M shape, V = 512,
//                      bench/support/reshaped.hpp) and `110M-V32000` (the 110M shape with a
//                      32000-token vocabulary and a separate classifier, random weights, written
//                      to the bench data folder on first use: 0.5 GB).
//
//   cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DSPECDEC_BUILD_BENCHMARKS=ON
//   cmake --build build/bench --target prefill_bench
//   build/bench/bench/prefill_bench --benchmark_min_time=1 --benchmark_repetitions=3 --benchmark_report_aggregates_only
//
// BM_PrefillTime skips (prints why) when the checkpoint is not in SPECDEC_MODELS_DIR.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts/language_model.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/no_drafter.hpp>

#include "bench/support/models.hpp"
#include "bench/support/reshaped.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/tools/checkpoint_writer.hpp"
#include "llama2c/engine/model.hpp"

// Every heap byte of the program, counted while `counting` is on.
namespace {
std::atomic<bool> counting{false};
std::atomic<std::uint64_t> counted_bytes{0};
void* counted_alloc(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) counted_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* counted_aligned(std::size_t n, std::align_val_t a) {
  if (counting.load(std::memory_order_relaxed)) counted_bytes.fetch_add(n, std::memory_order_relaxed);
  const auto al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al == 0 ? al : (n + al - 1) / al * al))
    return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::token_id;

constexpr std::size_t bytes_prompt = 4096, bytes_vocab = 32000;

// A LanguageModel that checks sizes and keeps a count: the memory measured is specdec's alone.
struct stub_model {
  std::size_t n = 0;
  std::size_t vocab_size() const { return bytes_vocab; }
  std::size_t size() const { return n; }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    if (logits.size() != tokens.size() * bytes_vocab) throw std::invalid_argument("stub: logits");
    n += tokens.size();
  }
  void truncate(std::size_t k) { n = k; }
};
struct stub_prefill_model : stub_model {
  void prefill(std::span<const token_id> tokens) { n += tokens.size(); }
};

std::vector<token_id> prompt_of(std::size_t n, std::size_t v) {
  std::vector<token_id> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<token_id>((7 * i + 3) % v);
  return p;
}

template <class F>
std::uint64_t bytes_of(F&& f) {
  counted_bytes = 0;
  counting = true;
  f();
  counting = false;
  return counted_bytes.load();
}

template <class Model>
void BM_PrefillBytes(benchmark::State& state) {
  const auto prompt = prompt_of(bytes_prompt, bytes_vocab);
  specdec::generate_options o;
  o.max_new_tokens = 16;
  o.draft_length = 0;
  std::uint64_t bytes = 0, ref = 0;
  for (auto _ : state) {
    {  // the reference: start's feed before prefill
      stub_model m;
      ref = bytes_of([&] {
        std::vector<token_id> history(prompt.begin(), prompt.end());
        std::unique_ptr<float[]> logits(new float[(history.size() - 1) * bytes_vocab]);
        m.append(std::span<const token_id>(history).first(history.size() - 1),
                 std::span<float>(logits.get(), (history.size() - 1) * bytes_vocab));
        benchmark::DoNotOptimize(logits.get());
      });
    }
    Model m;
    specdec::no_drafter nd;
    specdec::speculative_decoder dec(m, nd);
    bytes = bytes_of([&] { dec.start(prompt, o); });
    benchmark::DoNotOptimize(m.n);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["ref_bytes"] = static_cast<double>(ref);
  state.counters["ratio"] = static_cast<double>(bytes) / static_cast<double>(ref);
}
BENCHMARK(BM_PrefillBytes<stub_prefill_model>)->Name("BM_PrefillBytes/prefill")->Iterations(1);
BENCHMARK(BM_PrefillBytes<stub_model>)->Name("BM_PrefillBytes/chunked")->Iterations(1);

// The 110M shape with a 32000-token vocabulary and its own classifier, random weights (uniform
// in +-0.05, norms 1): the compute of a real 110M model at the vocabulary the issue names.
std::filesystem::path wide_vocab_110m() {
  const auto path = sb::bench_data_dir / "random-110M-V32000.bin";
  if (std::filesystem::exists(path)) return path;
  std::filesystem::create_directories(sb::bench_data_dir);
  l2::config c;
  c.dim = 768;
  c.hidden_dim = 2048;
  c.n_layers = 12;
  c.n_heads = 12;
  c.n_kv_heads = 12;
  c.vocab_size = bytes_vocab;
  c.seq_len = 1024;
  c.shared_classifier = false;
  std::uint64_t x = 88172645463325252ull;
  l2::write_checkpoint(path, c, [&](l2::tensor_kind kind, std::size_t, std::span<float> out) {
    const bool norm = kind == l2::tensor_kind::rms_att || kind == l2::tensor_kind::rms_ffn ||
                      kind == l2::tensor_kind::rms_final;
    for (float& f : out) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      f = norm ? 1.0f : 0.1f * (static_cast<float>(x >> 40) / 16777216.0f - 0.5f);
    }
  });
  std::fprintf(stderr, "wrote %s\n", path.string().c_str());
  return path;
}

// The share of append's matrix work prefill still does (per token, attention over the context
// left out): every layer's projections and FFN but the last layer's after its K/V, no classifier.
double kept_share(const l2::config& c) {
  const double d = c.dim, kv = c.kv_dim(), h = c.hidden_dim, L = c.n_layers;
  const double qkv = d * d + 2 * d * kv, rest = d * d + 3 * d * h;
  const double append = L * (qkv + rest) + d * c.vocab_size;
  return (L * qkv + (L - 1) * rest) / append;
}

void BM_PrefillTime(benchmark::State& state, std::string shape) {
  if (sb::skip_without("prefill_bench", {sb::checkpoint_path})) {
    state.SkipWithError("checkpoint not found");
    return;
  }
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto weights =
      l2::load_checkpoint(shape == "110M" ? sb::reshaped("110M") : wide_vocab_110m());
  l2::model m(weights, {.max_context = n + 1, .threads = 1});
  const auto prompt = prompt_of(n, m.vocab_size());
  std::vector<float> logits(n * m.vocab_size());
  sb::paired_timer<sb::thread_cpu_clock> timer;
  for (auto _ : state) {
    timer.reference([&] { m.append(prompt, std::span<float>(logits)); });
    m.truncate(0);
    state.SetIterationTime(timer.subject([&] { m.prefill(prompt); }));
    m.truncate(0);
  }
  timer.report(state, "ratio", true);
  state.counters["kept"] = kept_share(weights->cfg());
}
BENCHMARK_CAPTURE(BM_PrefillTime, 110M, std::string("110M"))->Arg(128)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PrefillTime, 110M-V32000, std::string("110M-V32000"))->Arg(128)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
