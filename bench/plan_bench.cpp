// bench/plan_bench.cpp - planned shapes (tree/tree_plan.hpp) against hand-picked ones, measured.
//
// Per target and temperature (0 and 0.8): calibrate the cost curve t(n) of the target and the
// draft's cost per level and per node in this process; decode the prompts once with a wide
// exploration tree (4x2x2x1x1x1) to measure acceptance by depth and sibling rank; plan the best
// tree (<= 32 nodes) and the best chain (K <= 8); then time, interleaved with plain decoding in
// every repetition, the planned tree, the planned chain, the decoder re-planning online (one
// decoder for all prompts and repetitions, starting from the exploration tree, re-planning every
// 8 target calls from 8 samples per cell) and the hand-picked shapes of
// docs/benchmarks.md and docs/trees.md.
//
// Targets: aidreams260K itself with its first 3 layers as a layer-skip draft (cache-resident:
// speculation does not pay there, docs/trees.md), and aidreams260K reshaped to the 110M shape
// with a separate draft model of its first 3 layers (memory-bound,
// bench/support/reshaped.hpp). Four free prompts, 64 new tokens each.
//
// Columns: tok/call, speedup (median of same-repetition tokens/s over plain decoding's),
// predicted (the planner's tokens/s for that shape over plain decoding's 1 / t(1), from the
// calibration and the exploration's acceptance).
//
//   cmake --preset bench && cmake --build --preset bench --target plan_bench
//   build/bench/bench/plan_bench [repetitions = 3] [real|110M|both = both]
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
using specdec::token_id;

constexpr std::size_t new_tokens = 64;
const std::vector<std::size_t> exploration{4, 2, 2, 1, 1, 1};

struct config {
  std::string name;
  std::function<sb::totals(float)> run;
  double predicted = 0.0;  // speed-up the planner predicts, 0 = not predicted
};

std::string shape_text(const std::vector<std::size_t>& b) {
  if (b.empty()) return "plain";
  if (std::all_of(b.begin(), b.end(), [](std::size_t k) { return k == 1; }))
    return "chain K=" + std::to_string(b.size());
  std::string s;
  for (std::size_t k : b) s += (s.empty() ? "" : "x") + std::to_string(k);
  return s;
}

template <class Drafter>
void run_target(const char* title, l2::model& target, Drafter& drafter,
                const std::vector<std::vector<token_id>>& prompts,
                const std::vector<std::vector<std::size_t>>& hand_picked, int reps) {
  // The library's calibration, up to trees of 39 nodes, 7 rounds of every measured n.
  const specdec::step_cost_model cost =
      specdec::calibrate(target, drafter, {.max_n = 40, .min_rounds = 7, .max_rounds = 7});
  std::printf("%s\nt(1) = %.3f ms; t(n)/t(1):", title, 1e3 * cost.target[1]);
  for (std::size_t n : {2, 4, 8, 16, 32})
    std::printf(" %zu:%.2f", n, cost.target[n] / cost.target[1]);
  std::printf("; draft per level %.3f ms, per node %.4f ms\n", 1e3 * cost.draft_per_level,
              1e3 * cost.draft_per_node);

  specdec::no_drafter none;
  // Decodes every prompt once; `shape` empty = plain, all ones = chain, else a tree.
  const auto decode_with = [&](auto& decoder, const std::vector<std::size_t>& shape, float temp,
                               std::size_t replan_every, specdec::decode_stats* sum) {
    sb::totals t;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      specdec::generate_options o;
      o.max_new_tokens = std::min(new_tokens, target.max_size() - prompts[p].size());
      const bool chain =
          std::all_of(shape.begin(), shape.end(), [](std::size_t k) { return k == 1; });
      o.draft_length = chain ? shape.size() : 0;
      if (!chain) o.tree = shape;
      o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
      o.sampling = {.temperature = temp, .seed = 1000 + p};
      o.policy.every = replan_every;
      o.policy.cost = cost;
      o.policy.min_samples = 8;
      const auto r = decoder.generate(prompts[p], o);
      t.add(r.stats);
      if (sum != nullptr) {  // add the rank counts
        const auto add = [](auto& into, const auto& from) {
          if (into.size() < from.size()) into.resize(from.size());
          for (std::size_t d = 0; d < from.size(); ++d) {
            if (into[d].size() < from[d].size()) into[d].resize(from[d].size());
            for (std::size_t r = 0; r < from[d].size(); ++r) into[d][r] += from[d][r];
          }
        };
        add(sum->offered_at_rank, r.stats.offered_at_rank);
        add(sum->accepted_at_rank, r.stats.accepted_at_rank);
      }
    }
    return t;
  };
  const auto decode = [&](auto& d, const std::vector<std::size_t>& shape, float temp,
                          std::size_t replan_every, specdec::decode_stats* sum) {
    specdec::speculative_decoder decoder(target, d);
    return decode_with(decoder, shape, temp, replan_every, sum);
  };
  // The online planner keeps one decoder, so what it measured on earlier prompts (and earlier
  // repetitions) plans the later ones; it starts from the exploration tree.
  specdec::speculative_decoder online(target, drafter);

  for (const float temp : {0.0f, 0.8f}) {
    specdec::decode_stats explored;
    decode(drafter, exploration, temp, 0, &explored);
    const auto profile = specdec::acceptance_profile::from_stats(explored);
    std::printf("temperature %.1f; acceptance by depth (rank 0, 1, ...):", temp);
    for (const auto& row : profile.rate) {
      std::printf(" [");
      for (double a : row) std::printf("%s%.2f", &a == row.data() ? "" : " ", a);
      std::printf("]");
    }
    const auto tree = specdec::plan_tree(profile, cost, 32, 8);
    const auto chain = specdec::plan_chain(profile, cost, 8);
    std::printf("\nplanned tree: %s, planned chain: %s\n", shape_text(tree.branching).c_str(),
                shape_text(chain.branching).c_str());
    const double plain_rate = 1.0 / cost.target[1];
    std::vector<config> configs;
    const auto add_shape = [&](const std::string& label, std::vector<std::size_t> shape) {
      configs.push_back(
          {label + shape_text(shape),
           [&, shape](float t) { return decode(drafter, shape, t, 0, nullptr); },
           specdec::predict_plan(shape, profile, cost).tokens_per_second() / plain_rate});
    };
    configs.push_back({"plain", [&](float t) { return decode(none, {}, t, 0, nullptr); }, 1.0});
    add_shape("planned tree: ", tree.branching);
    add_shape("planned chain: ", chain.branching);
    online.forget_measurements();
    configs.push_back({"re-planned online",
                       [&](float t) { return decode_with(online, exploration, t, 8, nullptr); },
                       0.0});
    for (const auto& s : hand_picked) add_shape("", s);
    const auto runs = sb::run_interleaved(configs, temp, reps, [](std::size_t) { return false; });
    std::printf("%-28s %8s %8s %9s\n", "shape", "tok/call", "speedup", "predicted");
    for (std::size_t i = 0; i < configs.size(); ++i) {
      std::printf("%-28s %8.2f %7.2fx", configs[i].name.c_str(), runs.last[i].tokens_per_call(),
                  sb::median(runs.speedup[i]));
      if (configs[i].predicted > 0) std::printf(" %8.2fx", configs[i].predicted);
      std::printf("\n");
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("plan_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string which = argc > 2 ? argv[2] : "both";
  const std::vector<std::vector<std::size_t>> chains{
      {1, 1}, {1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}};
  if (which == "real" || which == "both") {
    auto weights = l2::load_checkpoint(sb::checkpoint_path);
    l2::model target(weights, {.threads = 1});
    const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
    const auto encoded = sb::encode_prompts(tok, false);
    const std::vector<std::vector<token_id>> prompts(encoded.begin(), encoded.begin() + 4);
    l2::layer_skip_draft skip3(target, 3);
    specdec::model_drafter<l2::layer_skip_draft> drafter(skip3);
    auto hand = chains;
    for (const auto& t : {std::vector<std::size_t>{2, 2}, {4, 2}, {8, 2}, {4, 2, 2}})
      hand.push_back(t);
    run_target("aidreams260K (cache-resident), layer-skip draft of 3 layers, 1 thread", target,
               drafter, prompts, hand, reps);
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
    specdec::model_drafter<l2::model> drafter(first3);
    auto hand = chains;
    for (const auto& t : {std::vector<std::size_t>{2, 2, 1}, {2, 2, 2}, {3, 1, 1, 1}})
      hand.push_back(t);
    char title[160];
    std::snprintf(title, sizeof title,
                  "aidreams260K reshaped to 110M (memory-bound), first-3-layer draft, %zu threads",
                  pool->size());
    run_target(title, target, drafter, prompts, hand, reps);
  }
  return 0;
}
