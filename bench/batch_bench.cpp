// bench/batch_bench.cpp - total throughput of batched speculative decoding on a memory-bound
// target: batch 1, 2, 4, 8, 16 x K = 0, 2, 4, 8 x drafter (n-gram prompt lookup, a separate draft
// model), greedy, plus the per-step K policy (K <= 8, planned from the measured cost curve).
//
// Target: aidreams260K reshaped to the 110M shape (bench/support/reshaped.hpp, written at bench
// time, never committed) served by llama2c::batch_model: one forward pass per step for every
// sequence, each weight read once for all rows. Draft model: the first 3 layers of aidreams260K
// (a separate checkpoint), one per sequence. The sequences of a batch decode the prompts of
// bench/support/e2e.hpp, quoting and free ones alternating (a batch of 1: the first quoting
// prompt), 48 new tokens, stopping at BOS/EOS.
//
// Columns: tok/s (median over repetitions of all sequences' tokens over the steps' wall time,
// prompts excluded); speedup (over plain batched decoding, K = 0, of the same requests in the
// same repetition); tok/step (tokens per sequence-step); rows/call; ovh us (library time per
// sequence-step beyond drafting, the score call and the verifiers: batch_stats); K/step (draft
// tokens scored per sequence-step: the K the policy chose, or fewer than K when a lookup found
// nothing); same (every
// sequence's tokens equal its batch-1 plain greedy tokens). Configurations of a batch size run
// interleaved, once per repetition.
//
//   cmake --preset bench && cmake --build --preset bench --target batch_bench
//   build/bench/bench/batch_bench [repetitions = 3] [json output file] [new tokens = 48]
//                                 [largest batch = 16]
//
// Skips (exit 0) without the checkpoint and tokenizer.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <specdec/specdec.hpp>
#include <string>
#include <vector>

#include "bench/support/e2e.hpp"
#include "bench/support/models.hpp"
#include "bench/support/reshaped.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/engine/batch_model.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/reference.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::token_id;

constexpr std::size_t batch_sizes[] = {1, 2, 4, 8, 16};
constexpr std::size_t ks[] = {2, 4, 8};
constexpr std::size_t max_rows = 16 * 9;  // batch 16 x (K = 8 + 1)
// Sequence i decodes prompt prompt_order[i mod 8]: quoting and free prompts alternate, so every
// batch size has both kinds (a batch of 1 a quoting one).
constexpr std::size_t prompt_order[] = {4, 0, 5, 1, 6, 2, 7, 3};

// One sequence's drafter: prompt lookup, a draft model, or none.
struct any_drafter {
  enum kind { none, ngram, model } k = none;
  specdec::ngram_drafter lookup{{.min_ngram = 2, .max_ngram = 4, .max_draft = 8}};
  std::unique_ptr<l2::model> draft_model;
  std::unique_ptr<specdec::model_drafter<l2::model>> drafter;

  void propose(std::span<const token_id> h, std::size_t k_, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    if (k == ngram) {
      lookup.propose(h, k_, sp, g, out);
    } else if (k == model) {
      drafter->propose(h, k_, sp, g, out);
    } else {
      out.clear();
    }
  }
  void accept(std::span<const token_id> c) {
    if (k == ngram) lookup.accept(c);
    if (k == model) drafter->accept(c);
  }
  void reset() {
    lookup.reset();
    if (drafter) drafter->reset();
  }
  std::size_t model_calls() const { return drafter ? drafter->model_calls() : 0; }
};

struct config {
  std::string name;
  any_drafter::kind drafter;
  std::size_t k;
  bool policy;
};

struct outcome {
  specdec::batch_stats stats;
  std::vector<std::vector<token_id>> tokens;
  std::size_t drafted = 0;  // draft tokens scored, over all sequences
};

// The batched call's cost curve t_B(n) for n = 1..max_rows: n rows spread over min(n, 16)
// sequences after a 32-token context each. Measured at a few n, every n once per round over 5
// rounds (so a phase change of the host hits every n alike, as bench/support/calibrate.hpp does),
// the median per n after a warm-up round, made non-decreasing and interpolated between the n.
std::vector<double> batched_cost_curve(l2::batch_model& m) {
  const std::size_t at[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, max_rows};
  const std::size_t v = m.vocab_size();
  std::vector<float> logits(max_rows * v);
  const std::span<const token_id> ids(l2::reference_ids);
  std::vector<specdec::sequence_id> s;
  for (std::size_t i = 0; i < 16; ++i) {
    s.push_back(m.create_sequence());
    specdec::sequence_view<l2::batch_model> view(m, s.back());
    view.append(ids.first(32), std::span(logits).first(32 * v));
  }
  std::vector<std::vector<double>> seconds(std::size(at));
  for (int round = 0; round < 6; ++round)
    for (std::size_t p = 0; p < std::size(at); ++p) {
      const std::size_t n = at[p], seqs = std::min<std::size_t>(n, 16);
      std::vector<specdec::batch_entry> batch;
      std::size_t row = 0;
      for (std::size_t i = 0; i < seqs; ++i) {
        const std::size_t rows = n / seqs + (i < n % seqs ? 1 : 0);
        batch.push_back({s[i], ids.subspan(32, rows), {},
                         std::span(logits).subspan(row * v, rows * v)});
        row += rows;
      }
      const double sec = sb::time_call<sb::wall_clock>([&] { m.score(batch); });
      if (round > 0) seconds[p].push_back(sec);  // round 0 warms the scratch
      for (std::size_t i = 0; i < seqs; ++i) m.truncate(s[i], 32);
    }
  for (const auto id : s) m.release_sequence(id);
  std::vector<double> t(std::size(at));
  for (std::size_t p = 0; p < std::size(at); ++p)
    t[p] = std::max(p > 0 ? t[p - 1] : 0.0, sb::median(seconds[p]));
  std::vector<double> curve(max_rows + 1, 0.0);
  for (std::size_t p = 0; p + 1 < std::size(at); ++p)
    for (std::size_t n = at[p]; n <= at[p + 1]; ++n) {
      const double f = static_cast<double>(n - at[p]) / static_cast<double>(at[p + 1] - at[p]);
      curve[n] = t[p] * (1 - f) + t[p + 1] * f;
    }
  return curve;
}

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("batch_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const char* json_path = argc > 2 ? argv[2] : nullptr;
  const std::size_t new_tokens = argc > 3 ? static_cast<std::size_t>(std::atoi(argv[3])) : 48;
  const std::size_t max_batch = argc > 4 ? static_cast<std::size_t>(std::atoi(argv[4])) : 16;

  auto pool = std::make_shared<l2::thread_pool>();
  const auto weights = l2::load_checkpoint(sb::reshaped("110M"));
  const auto draft_weights = l2::load_checkpoint(sb::first_layers(3));
  l2::batch_model target(weights, {.max_context = 256, .max_sequences = 32,
                                   .max_batch_tokens = max_rows, .pool = pool});
  const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
  const auto prompts = sb::encode_prompts(tok, false);
  const std::vector<double> curve = batched_cost_curve(target);
  std::printf("target: aidreams260K reshaped to 110M (%.0f MB), %zu threads, %zu new tokens per "
              "sequence, %d repetitions\nt_B(n)/t_B(1), t_B(1) = %.2f ms:",
              static_cast<double>(weights->bytes()) / 1e6, pool->size(), new_tokens, reps,
              1e3 * curve[1]);
  for (const std::size_t n : {2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144})
    std::printf(" %zu:%.2f", n, curve[n] / curve[1]);
  std::printf("\n");
  // Drafting one token with the draft model, for the policy (one sequence, after 32 tokens).
  l2::model probe(draft_weights, {.max_context = 256, .threads = 1});
  std::vector<float> probe_logits(33 * probe.vocab_size());
  const std::span<const token_id> ids(l2::reference_ids);
  probe.append(ids.first(32), std::span(probe_logits).first(32 * probe.vocab_size()));
  std::vector<double> dt;
  for (int r = 0; r < 9; ++r) {
    dt.push_back(sb::time_call<sb::wall_clock>(
        [&] { probe.append(ids.subspan(32, 1), std::span(probe_logits).first(probe.vocab_size())); }));
    probe.truncate(32);
  }
  const double draft_token = sb::median(dt);
  std::printf("draft model (first 3 layers), one token: %.3f ms\n\n", 1e3 * draft_token);

  std::vector<config> configs{{"plain", any_drafter::none, 0, false}};
  for (const auto kind : {any_drafter::ngram, any_drafter::model})
    for (const std::size_t k : ks)
      configs.push_back({std::string(kind == any_drafter::ngram ? "ngram" : "model") +
                             " K=" + std::to_string(k), kind, k, false});
  configs.push_back({"ngram policy", any_drafter::ngram, 8, true});
  configs.push_back({"model policy", any_drafter::model, 8, true});

  // Decodes `b` requests with one configuration; returns the batch statistics and tokens.
  const auto run = [&](std::size_t b, const config& c) {
    specdec::batch_options bo;
    if (c.policy) {
      bo.k_policy.target = curve;
      bo.k_policy.max_k = c.k;
      bo.k_policy.draft_per_token = c.drafter == any_drafter::model ? draft_token : 0.0;
    }
    std::deque<any_drafter> drafters;
    specdec::batch_decoder<l2::batch_model, any_drafter> batch(target, bo);
    std::vector<specdec::sequence_id> ids_of;
    for (std::size_t i = 0; i < b; ++i) {
      any_drafter& d = drafters.emplace_back();
      d.k = c.drafter;
      if (d.k == any_drafter::model) {
        d.draft_model = std::make_unique<l2::model>(
            draft_weights, l2::model_options{.max_context = 256, .threads = 1});
        d.drafter = std::make_unique<specdec::model_drafter<l2::model>>(*d.draft_model);
      }
      const auto& prompt = prompts[prompt_order[i % 8]];
      specdec::generate_options o;
      o.max_new_tokens = new_tokens;
      o.draft_length = c.k;
      o.sampling.temperature = 0.0f;
      o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
      ids_of.push_back(batch.add(prompt, o, d));
    }
    batch.run();
    outcome out{batch.stats(), {}};
    for (const auto id : ids_of) {
      out.tokens.push_back(batch.result(id).tokens);
      out.drafted += batch.stats(id).drafted_tokens;
    }
    return out;
  };

  // Every prompt's plain greedy tokens at batch 1: what every configuration must reproduce.
  std::vector<std::vector<token_id>> want;
  for (const std::size_t p : prompt_order) {
    specdec::batch_decoder<l2::batch_model> one(target);
    specdec::no_drafter none;
    specdec::generate_options o;
    o.max_new_tokens = new_tokens;
    o.sampling.temperature = 0.0f;
    o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
    const auto id = one.add(prompts[p], o, none);
    one.run();
    want.push_back(one.result(id).tokens);
  }

  std::FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;
  if (json) std::fprintf(json, "[\n");
  bool first_json = true;
  std::printf("%5s %-14s %9s %8s %8s %9s %7s %7s %5s\n", "batch", "drafter", "tok/s", "speedup",
              "tok/step", "rows/call", "ovh us", "K/step", "same");
  for (const std::size_t b : batch_sizes) {
    if (b > max_batch) break;
    run(b, configs[0]);  // warm-up: scratch and caches at this batch size
    std::vector<std::vector<double>> rate(configs.size()), speedup(configs.size());
    std::vector<outcome> last(configs.size());
    for (int r = 0; r < reps; ++r)
      for (std::size_t i = 0; i < configs.size(); ++i) {
        last[i] = run(b, configs[i]);
        rate[i].push_back(last[i].stats.tokens_per_second());
        speedup[i].push_back(rate[i].back() / rate[0].back());
      }
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const auto& s = last[i].stats;
      bool same = true;
      for (std::size_t q = 0; q < b; ++q) same = same && last[i].tokens[q] == want[q % want.size()];
      const double tok_step = static_cast<double>(s.generated_tokens) / static_cast<double>(s.sequence_steps);
      const double rows_call = static_cast<double>(s.rows_scored) / static_cast<double>(s.target_calls);
      const double ovh = 1e6 * s.overhead_per_sequence_step();
      const double k_step = static_cast<double>(last[i].drafted) / static_cast<double>(s.sequence_steps);
      std::printf("%5zu %-14s %9.1f %7.2fx %8.2f %9.1f %7.2f %7.2f %5s\n", b, configs[i].name.c_str(),
                  sb::median(rate[i]), sb::median(speedup[i]), tok_step, rows_call, ovh, k_step,
                  same ? "yes" : "NO");
      if (json) {
        std::fprintf(json,
                     "%s  {\"batch\": %zu, \"drafter\": \"%s\", \"k\": %zu, \"policy\": %s, "
                     "\"tokens_per_second\": %.3f, \"speedup\": %.4f, \"tokens_per_step\": %.4f, "
                     "\"rows_per_call\": %.3f, \"overhead_us\": %.4f, \"drafted_per_step\": %.3f, "
                     "\"same\": %s}",
                     first_json ? "" : ",\n", b, configs[i].name.c_str(), configs[i].k,
                     configs[i].policy ? "true" : "false", sb::median(rate[i]),
                     sb::median(speedup[i]), tok_step, rows_call, ovh, k_step, same ? "true" : "false");
        first_json = false;
      }
    }
    std::fflush(stdout);
  }
  if (json) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  return 0;
}
