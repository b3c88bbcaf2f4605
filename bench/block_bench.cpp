// bench/block_bench.cpp - block verification against token-wise verification, end to end: the
// same drafters, prompts and seeds, only generate_options.verification differs.
//
// Targets: the real aidreams260K (cache-resident: verification's own cost shows) with layer-skip
// drafts of its first 2 and 3 layers; and aidreams260K reshaped to the 110M shape (memory-bound,
// bench/support/reshaped.hpp) with a separate draft model (its first 3 layers,
// first_layers(3)) and layer-skip of its first 3 of 12 layers. Chains of K = 2..8 (2, 4, 6, 8 on
// the 110M target), temperatures 0.7 and 1.0.
//
// Columns: tok/call (generated tokens per target call, token-wise then block) and gain (block
// over token-wise, in %); speedup (median over repetitions of tokens/s over plain decoding's in
// the same repetition, token-wise then block); block/token (median of the same-repetition ratio
// of the two tokens/s). tok/call comes from every repetition's generations (each repetition uses
// its own seeds), so it averages reps x prompts x tokens.
//
//   cmake --preset bench && cmake --build --preset bench --target block_bench
//   build/bench/bench/block_bench [repetitions = 3] [real|110M|both = both]
//
// Skips (exit 0) without the checkpoint and tokenizer.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <specdec/specdec.hpp>
#include <string>
#include <vector>

#include "bench/support/e2e.hpp"
#include "bench/support/models.hpp"
#include "bench/support/reshaped.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::verification_rule;
using specdec::token_id;

// Decodes every prompt once with chains of up to k drafts; seeds differ per repetition.
template <class Drafter>
sb::totals decode(l2::model& target, Drafter& drafter, std::size_t k, verification_rule how,
                  float temperature, const std::vector<std::vector<token_id>>& prompts,
                  std::size_t max_new, std::uint64_t seed_base) {
  return sb::decode_all(target, drafter, k, {}, specdec::candidate_draw::iid, temperature, prompts,
                        max_new, how, seed_base);
}

struct drafter_row {
  std::string name;
  std::vector<std::size_t> ks;
  // Decodes all prompts with this drafter (k = 0: plain decoding).
  std::function<sb::totals(std::size_t k, verification_rule, float, std::uint64_t)> run;
};

// One table per temperature: every (drafter, K) row token-wise and block, interleaved with plain
// decoding in each repetition.
void compare(const char* title, const std::vector<drafter_row>& drafters,
             const std::function<sb::totals(float, std::uint64_t)>& plain, int reps) {
  for (const float temp : {0.7f, 1.0f}) {
    std::printf("%s, temperature %.1f\n", title, temp);
    std::printf("%-12s %3s %8s %8s %7s %9s %9s %12s\n", "drafter", "K", "tok/call", "", "gain",
                "speedup", "", "block/token");
    std::printf("%-12s %3s %8s %8s %7s %9s %9s %12s\n", "", "", "token", "block", "", "token",
                "block", "");
    for (const auto& d : drafters)
      for (const std::size_t k : d.ks) {
        d.run(k, verification_rule::token, temp, 1);  // warm-up
        d.run(k, verification_rule::block, temp, 1);
        sb::totals sum[2];
        std::vector<double> speed[2], ratio;
        for (int r = 0; r < reps; ++r) {
          const std::uint64_t seeds = 1000 + 100 * static_cast<std::uint64_t>(r);
          const double base = plain(temp, seeds).tokens_per_second();
          double rate[2];
          for (int b = 0; b < 2; ++b) {
            const auto s =
                d.run(k, b ? verification_rule::block : verification_rule::token, temp, seeds);
            sum[b].add(s);
            rate[b] = s.tokens_per_second();
            speed[b].push_back(rate[b] / base);
          }
          ratio.push_back(rate[1] / rate[0]);
        }
        const double tc = sum[0].tokens_per_call(), bc = sum[1].tokens_per_call();
        std::printf("%-12s %3zu %8.3f %8.3f %+6.1f%% %8.2fx %8.2fx %11.3f\n", d.name.c_str(), k, tc,
                    bc, 100.0 * (bc / tc - 1.0), sb::median(speed[0]), sb::median(speed[1]),
                    sb::median(ratio));
      }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("block_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string which = argc > 2 ? argv[2] : "both";
  specdec::no_drafter none;

  if (which == "real" || which == "both") {
    auto weights = l2::load_checkpoint(sb::checkpoint_path);
    l2::model target(weights, {.threads = 1});
    const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
    const auto prompts = sb::encode_prompts(tok, false);
    l2::layer_skip_draft skip2(target, 2), skip3(target, 3);
    specdec::model_drafter<l2::layer_skip_draft> d2(skip2), d3(skip3);
    // Three seeds per prompt per repetition: 24 generations of up to 96 tokens.
    const auto run_all = [&](auto& drafter, std::size_t k, verification_rule how, float temp,
                             std::uint64_t seeds) {
      sb::totals t;
      for (std::uint64_t s = 0; s < 3; ++s)
        t.add(decode(target, drafter, k, how, temp, prompts, 96, seeds + 10 * s));
      return t;
    };
    const std::vector<drafter_row> rows{
        {"skip2of5",
         {2, 3, 4, 5, 6, 7, 8},
         [&](std::size_t k, verification_rule how, float temp, std::uint64_t s) {
           return run_all(d2, k, how, temp, s);
         }},
        {"skip3of5",
         {2, 3, 4, 5, 6, 7, 8},
         [&](std::size_t k, verification_rule how, float temp, std::uint64_t s) {
           return run_all(d3, k, how, temp, s);
         }},
    };
    compare(
        "aidreams260K (cache-resident), 1 thread", rows,
        [&](float temp, std::uint64_t s) {
          return run_all(none, 0, verification_rule::token, temp, s);
        },
        reps);
  }
  if (which == "110M" || which == "both") {
    auto pool = std::make_shared<l2::thread_pool>();
    auto weights = l2::load_checkpoint(sb::reshaped("110M"));
    l2::model target(weights, {.pool = pool});
    const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
    const auto encoded = sb::encode_prompts(tok, false);
    const std::vector<std::vector<token_id>> prompts(encoded.begin(), encoded.begin() + 4);
    l2::model first3(l2::load_checkpoint(sb::first_layers(3)),
                     {.max_context = target.max_size(), .pool = pool});
    l2::layer_skip_draft skip3(target, 3);
    specdec::model_drafter<l2::model> df(first3);
    specdec::model_drafter<l2::layer_skip_draft> ds(skip3);
    const std::vector<drafter_row> rows{
        {"first3",
         {2, 4, 6, 8},
         [&](std::size_t k, verification_rule how, float temp, std::uint64_t s) {
           return decode(target, df, k, how, temp, prompts, 64, s);
         }},
        {"skip3of12",
         {2, 4, 6, 8},
         [&](std::size_t k, verification_rule how, float temp, std::uint64_t s) {
           return decode(target, ds, k, how, temp, prompts, 64, s);
         }},
    };
    char title[160];
    std::snprintf(title, sizeof title, "aidreams260K reshaped to 110M (memory-bound), %zu threads",
                  pool->size());
    compare(
        title, rows,
        [&](float temp, std::uint64_t s) {
          return decode(target, none, 0, verification_rule::token, temp, prompts, 64, s);
        },
        reps);
  }
  return 0;
}
