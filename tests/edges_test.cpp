// The engine API at its edges (docs/reliability.md, "The engine API at its edges"): drafts with
// nothing in them, plans the pipeline cannot run, phases called out of order, row processors
// that fail on rows nobody reads. Each is a plain step, a clear error at the entry, or a
// std::logic_error; never a generation that fails where plain decoding finishes.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <specdec/specdec.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/scripted_tree_drafter.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

namespace {

using specdec::candidate_draw;
using specdec::generate_options;
using specdec::sampling_params;
using specdec::sequence_state;
using specdec::step_phase;
using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;

const table_model_options target_table{.vocab_size = 12, .order = 3, .seed = 4};
const table_model_options draft_table{
    .vocab_size = 12, .order = 3, .seed = 4, .mix = 0.3f, .mix_seed = 8};

sampling_params greedy_sampling() {
  sampling_params sp;
  sp.temperature = 0.0f;
  return sp;
}

sampling_params sampled(std::uint64_t seed) {
  sampling_params sp;
  sp.temperature = 0.9f;
  sp.seed = seed;
  return sp;
}

// A TreeDrafter that drafts the root alone, with the draw it is asked for and no q rows, as a
// drafter with nothing to draft does (medusa_drafter with no start row, model_drafter past its
// model's max_size()).
struct root_only_drafter {
  std::size_t v;
  std::size_t tree_calls = 0;
  std::size_t vocab_size() const noexcept { return v; }
  void reset() noexcept {}
  void accept(std::span<const token_id>) noexcept {}
  void propose(std::span<const token_id>, std::size_t, const sampling_params&, specdec::rng&,
               specdec::draft& out) {
    out.clear();
  }
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t>,
                    const sampling_params&, specdec::rng&, candidate_draw draw,
                    specdec::tree_draft& out) {
    ++tree_calls;
    out.tree.reset(history.back());
    out.draw = draw;
    out.q.resize(0, static_cast<Eigen::Index>(v));
  }
};
static_assert(specdec::TreeDrafter<root_only_drafter>);

// A chain drafter proposing token v - 1 at every position.
struct wrong_drafter {
  std::size_t v;
  std::size_t vocab_size() const noexcept { return v; }
  void reset() noexcept {}
  void accept(std::span<const token_id>) noexcept {}
  void propose(std::span<const token_id>, std::size_t k, const sampling_params&, specdec::rng&,
               specdec::draft& out) {
    out.clear();
    for (std::size_t i = 0; i < k; ++i) out.tokens.push_back(static_cast<token_id>(v - 1));
  }
};
static_assert(!specdec::TreeDrafter<wrong_drafter>);

}  // namespace

TEST_CASE("edges: a sampled tree of the root alone is a plain step, for any draw") {
  table_model target(target_table);
  const std::vector<token_id> prompt{1, 2, 3};
  for (const candidate_draw draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
    root_only_drafter drafter{12};
    specdec::speculative_decoder decoder(target, drafter);
    generate_options o;
    o.tree = {2, 2};
    o.tree_draw = draw;
    o.sampling = sampled(3);
    o.max_new_tokens = 20;
    const auto r = decoder.generate(prompt, o);
    CHECK(drafter.tree_calls > 0);
    CHECK(r.tokens.size() == 20);
    CHECK(r.stats.drafted_tokens == 0);
    // Every step plain: the same draws as plain decoding with the same seed.
    table_model plain(target_table);
    CHECK(r.tokens == specdec::generate_autoregressive(plain, prompt, o).tokens);
  }
}

TEST_CASE(
    "edges: model_drafter past its draft model's max_size drafts nothing, sampled trees "
    "included") {
  table_model target(target_table);
  table_model_options small = draft_table;
  small.max_size = 6;  // the history passes it after a few tokens
  table_model draft_model(small);
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  generate_options o;
  o.tree = {2, 2};
  o.sampling = sampled(5);
  o.max_new_tokens = 24;
  const auto r = decoder.generate(std::vector<token_id>{1, 2, 3}, o);
  CHECK(r.tokens.size() == 24);
  CHECK(r.reason == specdec::stop_reason::max_new_tokens);
  CHECK(r.stats.target_calls > r.stats.draft_calls);  // plain steps once past max_size
}

namespace {

// batch_table_model without commit(): a batch model that scores chains only.
class chains_only_batch {
 public:
  explicit chains_only_batch(const table_model_options& o) : m_({.model = o}) {}
  std::size_t vocab_size() const { return m_.vocab_size(); }
  std::size_t max_size() const { return m_.max_size(); }
  specdec::sequence_id create_sequence() { return m_.create_sequence(); }
  void release_sequence(specdec::sequence_id id) { m_.release_sequence(id); }
  std::size_t size(specdec::sequence_id id) const { return m_.size(id); }
  void score(std::span<const specdec::batch_entry> b) {
    for (const auto& e : b)
      if (!e.parents.empty()) throw std::logic_error("chains_only_batch: a tree was scored");
    m_.score(b);
  }
  void truncate(specdec::sequence_id id, std::size_t n) { m_.truncate(id, n); }

 private:
  specdec::test::batch_table_model m_;
};
static_assert(specdec::BatchLanguageModel<chains_only_batch>);
static_assert(!specdec::BatchTreeLanguageModel<chains_only_batch>);

specdec::step_cost_model cheap_rows(std::size_t n_max) {
  specdec::step_cost_model c;  // a call of n rows costs about one of 1: trees pay
  c.target.assign(n_max + 1, 0.0);
  for (std::size_t n = 1; n <= n_max; ++n) c.target[n] = 1.0 + 0.01 * static_cast<double>(n);
  c.draft_per_level = 0.01;
  c.draft_per_node = 0.001;
  return c;
}

}  // namespace

TEST_CASE("edges: the speed policy never plans a tree the batch model cannot score") {
  for (const bool greedy : {true, false}) {
    chains_only_batch model(target_table);
    using drafter_t = specdec::model_drafter<table_model>;
    std::vector<std::unique_ptr<table_model>> drafts;
    std::vector<std::unique_ptr<drafter_t>> drafters;
    specdec::batch_decoder<chains_only_batch, drafter_t> decoder(model);
    generate_options o;
    o.policy = specdec::speed_policy(cheap_rows(40));
    o.sampling = greedy ? greedy_sampling() : sampled(7);
    o.max_new_tokens = 40;
    std::vector<specdec::sequence_id> ids;
    for (token_id s = 0; s < 3; ++s) {
      drafts.push_back(std::make_unique<table_model>(draft_table));
      drafters.push_back(std::make_unique<drafter_t>(*drafts.back()));
      ids.push_back(decoder.add(std::vector<token_id>{s, 2, 3}, o, *drafters.back()));
    }
    decoder.run();
    for (const auto id : ids) {
      INFO("sequence " << id << ": " << decoder.error(id));
      CHECK(decoder.status(id) == specdec::sequence_status::finished);
      CHECK(decoder.result(id).tokens.size() == 40);
    }
  }
  // The same drafter and options on the single-sequence decoder over a model that scores a tree
  // in one call (append_tree) do plan trees: the predicate is the pipeline's and the model's, not
  // the drafter's. Over a table_model without append_tree (a tree would be scored path by path,
  // one call per leaf) the policy plans chains only.
  specdec::test::tree_table_model target(target_table);
  table_model draft_model(draft_table);
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  generate_options o;
  o.policy = specdec::speed_policy(cheap_rows(40));
  o.max_new_tokens = 40;
  decoder.generate(std::vector<token_id>{1, 2, 3}, o);
  CHECK(decoder.stats().drafted_nodes > decoder.stats().drafted_tokens);
  table_model plain_target(target_table), plain_draft(draft_table);
  specdec::model_drafter plain_drafter(plain_draft);
  specdec::speculative_decoder plain(plain_target, plain_drafter);
  plain.generate(std::vector<token_id>{1, 2, 3}, o);
  CHECK(plain.stats().drafted_nodes == plain.stats().drafted_tokens);
  CHECK(plain.stats().drafted_tokens > 0);
}

TEST_CASE("edges: validation checks the tree_draw a re-planned tree may use") {
  table_model target(target_table), draft_model(draft_table);
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  generate_options o;
  o.policy = specdec::speed_policy(cheap_rows(40));
  o.sampling = sampled(1);
  o.tree_draw = candidate_draw::deterministic;  // a chain request: no tree asked
  o.max_new_tokens = 30;
  const std::vector<token_id> prompt{1, 2, 3};
  CHECK_THROWS_WITH(decoder.start(prompt, o), Catch::Contains("generate_options.tree_draw") &&
                                                  Catch::Contains("re-planning may plan a tree"));
  // Chains only: the same draw is never used, and the generation runs.
  o.policy.chains_only = true;
  CHECK(decoder.generate(prompt, o).tokens.size() == 30);
  // On a pipeline that cannot run trees (a chain drafter), nothing to check either.
  wrong_drafter chain_drafter{12};
  specdec::speculative_decoder chains(target, chain_drafter);
  o.policy.chains_only = false;
  CHECK(chains.generate(prompt, o).tokens.size() == 30);
}

TEST_CASE("edges: policy.min_samples = 0 is refused") {
  table_model target(target_table);
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(target, none);
  generate_options o;
  o.policy.every = 4;
  o.policy.cost = cheap_rows(8);
  o.policy.min_samples = 0;
  CHECK_THROWS_WITH(decoder.start(std::vector<token_id>{1, 2}, o),
                    Catch::Contains("generate_options.policy.min_samples"));
}

namespace {

// The phases of one sequence, driven by hand.
struct phased {
  table_model target{target_table}, draft_model{draft_table};
  specdec::model_drafter<table_model> drafter{draft_model};
  sequence_state s;
  void start(const generate_options& o) {
    specdec::start_sequence(s, target, drafter, std::vector<token_id>{1, 2, 3}, o);
  }
  // One step, the four phases in order.
  void step() {
    specdec::draft_phase(s, drafter);
    specdec::score_phase(s, target);
    specdec::verify_phase(s);
    specdec::commit_phase(s, target, drafter);
  }
  void run_to_end() {
    while (!s.done) step();
  }
};

}  // namespace

TEST_CASE("edges: the public phases refuse to run out of order") {
  phased p;
  generate_options o;
  o.draft_length = 3;
  o.sampling = sampled(2);
  o.max_new_tokens = 12;
  p.start(o);
  // The message of the std::logic_error f throws ("" when it throws none).
  const auto refusal = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "";
  };
  const auto out_of_order = [](const char* phase, const char* expected) {
    return std::string(phase) + ": called out of order; the sequence expects " + expected + " next";
  };
  CHECK(refusal([&] { specdec::verify_phase(p.s); }) ==
        out_of_order("verify_phase", "draft_phase"));
  CHECK(refusal([&] { specdec::commit_phase(p.s, p.target, p.drafter); }) ==
        out_of_order("commit_phase", "draft_phase"));
  CHECK(refusal([&] { specdec::score_phase(p.s, p.target); }) ==
        out_of_order("score_phase", "draft_phase"));
  specdec::draft_phase(p.s, p.drafter);
  CHECK(p.s.expects == step_phase::verify);
  CHECK(refusal([&] { specdec::draft_phase(p.s, p.drafter); }) ==
        out_of_order("draft_phase", "score_phase or verify_phase"));
  specdec::score_phase(p.s, p.target);
  specdec::verify_phase(p.s);
  // verify_phase twice would process the rows twice: refused, the verdict stands.
  const auto accepted = p.s.accepted;
  const token_id next = p.s.next;
  CHECK(refusal([&] { specdec::verify_phase(p.s); }) ==
        out_of_order("verify_phase", "commit_phase"));
  CHECK(p.s.accepted == accepted);
  CHECK(p.s.next == next);
  const std::size_t before = p.s.history.size();
  const auto r = specdec::commit_phase(p.s, p.target, p.drafter);
  CHECK(p.s.history.size() == before + r.tokens.size());
  CHECK(refusal([&] { specdec::commit_phase(p.s, p.target, p.drafter); }) ==
        out_of_order("commit_phase", "draft_phase"));
  CHECK(p.s.history.size() == before + r.tokens.size());  // nothing emitted twice

  // On a finished sequence: refused, no rows wasted.
  p.run_to_end();
  const std::size_t held = p.target.size();
  CHECK_THROWS_WITH(specdec::draft_phase(p.s, p.drafter), Catch::Contains("the sequence is done"));
  CHECK(p.target.size() == held);
}

TEST_CASE("edges: commit after a verify_phase that threw is refused, abandon_step goes on") {
  phased p;
  generate_options o;
  o.draft_length = 3;
  o.sampling = sampled(4);
  o.max_new_tokens = 16;
  bool poison = false;
  o.sampling.processor = [&poison](std::span<const token_id>, std::span<float>) {
    if (poison) throw std::runtime_error("processor: refused");
  };
  p.start(o);
  // One good step, so that the previous step's tokens are there to be re-emitted by mistake.
  p.step();
  const auto history = p.s.history;
  const std::size_t held = p.target.size();

  specdec::draft_phase(p.s, p.drafter);
  specdec::score_phase(p.s, p.target);
  poison = true;
  CHECK_THROWS_AS(specdec::verify_phase(p.s), std::runtime_error);
  CHECK(p.s.expects == step_phase::abandon);
  CHECK_THROWS_WITH(specdec::commit_phase(p.s, p.target, p.drafter),
                    Catch::Contains("commit_phase") && Catch::Contains("abandon_step"));
  CHECK_THROWS_AS(specdec::verify_phase(p.s), std::logic_error);  // half-processed rows
  CHECK(p.s.history == history);
  specdec::abandon_step(p.s, p.target);
  CHECK(p.target.size() == held);
  CHECK(p.s.expects == step_phase::draft);
  poison = false;
  p.run_to_end();
  CHECK(p.s.generated() == 16);
}

namespace {

// Counts its calls; throws (a grammar's dead end) for any prefix whose last token is `dead`.
struct dead_end_processor {
  token_id dead;
  std::size_t* calls;
  void operator()(std::span<const token_id> prefix, std::span<float> logits) const {
    ++*calls;
    if (!prefix.empty() && prefix.back() == dead)
      throw std::invalid_argument("grammar: no token may follow " + std::to_string(dead));
    logits[static_cast<std::size_t>(dead)] -= 100.0f;  // the target never emits it
  }
};

}  // namespace

TEST_CASE("edges: rows are processed when a verifier reads them, and never otherwise") {
  const token_id dead = 11;
  for (const bool block : {false, true}) {
    for (const bool greedy : {true, false}) {
      INFO((block ? "block" : "token") << (greedy ? ", greedy" : ", sampled"));
      std::size_t calls = 0;
      generate_options o;
      o.draft_length = 4;
      o.max_new_tokens = 40;
      o.sampling = greedy ? greedy_sampling() : sampled(6);
      o.verification =
          block ? specdec::verification_rule::block : specdec::verification_rule::token;
      o.sampling.processor = dead_end_processor{dead, &calls};
      table_model target(target_table);
      wrong_drafter drafter{12};
      specdec::speculative_decoder decoder(target, drafter);
      // Every draft is `dead`: row 1's prefix ends with it, and the processor throws there.
      // Plain decoding never reaches such a prefix; neither may speculative decoding.
      const auto r = decoder.generate(std::vector<token_id>{1, 2, 3}, o);
      CHECK(r.tokens.size() == 40);
      CHECK(r.stats.accepted_tokens == 0);
      const std::size_t rows_scored = r.stats.target_calls * (o.draft_length + 1);
      // Each step reads its row 0 alone: one processor call per step, where processing every
      // row scored cost draft_length + 1.
      CHECK(calls == r.stats.target_calls);
      CHECK(calls < rows_scored);
      if (greedy) {  // the same tokens as plain decoding (sampled: the same law, other draws)
        std::size_t plain_calls = 0;
        o.sampling.processor = dead_end_processor{dead, &plain_calls};
        table_model plain(target_table);
        CHECK(r.tokens ==
              specdec::generate_autoregressive(plain, std::vector<token_id>{1, 2, 3}, o).tokens);
        CHECK(plain_calls == r.tokens.size());
      }
    }
  }
}

namespace {

// table_model whose rows move token `t`'s logit by `bias`.
class biased_model : public table_model {
 public:
  biased_model(const table_model_options& o, token_id t, float bias)
      : table_model(o), t_(t), bias_(bias) {}
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    table_model::append(tokens, logits);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      logits[i * vocab_size() + static_cast<std::size_t>(t_)] += bias_;
  }

 private:
  token_id t_;
  float bias_;
};

}  // namespace

TEST_CASE("edges: a drafter that reaches the processor's dead end drafts up to it") {
  // The draft model keeps proposing `dead`, which the target all but never emits (its logit
  // 40 lower); the processor throws for a prefix that ends with it, as a grammar with nothing
  // to follow it would. Plain decoding never reaches that prefix; speculative decoding reaches
  // it only in the drafter, after a draft the target rejects.
  const token_id dead = 11;
  const std::vector<token_id> prompt{1, 2, 3};
  const auto processor = [](std::span<const token_id> prefix, std::span<float>) {
    if (prefix.back() == dead) throw std::invalid_argument("grammar: dead end");
  };
  for (const bool tree : {false, true}) {
    for (const bool greedy : {true, false}) {
      INFO((tree ? "tree" : "chain") << (greedy ? ", greedy" : ", sampled"));
      biased_model target(target_table, dead, -40.0f);
      biased_model draft_model(draft_table, dead, 20.0f);
      specdec::model_drafter drafter(draft_model);
      specdec::speculative_decoder decoder(target, drafter);
      generate_options o;
      o.max_new_tokens = 40;
      o.draft_length = 3;
      if (tree) o.tree = {2, 2};
      o.sampling = greedy ? greedy_sampling() : sampled(9);
      o.sampling.processor = processor;
      const auto r = decoder.generate(prompt, o);
      CHECK(r.tokens.size() == 40);
      CHECK(r.stats.drafted_tokens > 0);
      if (greedy) {
        biased_model plain(target_table, dead, -40.0f);
        CHECK(r.tokens == specdec::generate_autoregressive(plain, prompt, o).tokens);
      }
    }
  }
}

namespace {

// tree_table_model with an engine's per-call limits: at most `nodes` nodes (root included) and
// `leaves` leaves per append_tree, refused beyond them as llama.cpp's n_batch and n_seq_max are.
class limited_tree_model : public specdec::test::tree_table_model {
 public:
  limited_tree_model(const table_model_options& o, std::size_t nodes, std::size_t leaves)
      : tree_table_model(o), nodes_(nodes), leaves_(leaves) {}
  std::size_t max_tree_size() const noexcept { return nodes_; }
  std::size_t max_tree_leaves() const noexcept { return leaves_; }
  std::size_t largest = 0;  // the most nodes one call scored
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    std::vector<bool> has_child(tokens.size(), false);
    for (const std::int32_t p : parents)
      if (p >= 0) has_child[static_cast<std::size_t>(p)] = true;
    const auto leaves =
        static_cast<std::size_t>(std::count(has_child.begin(), has_child.end(), false));
    if (tokens.size() > nodes_ || leaves > leaves_)
      throw std::length_error("limited_tree_model: " + std::to_string(tokens.size()) + " nodes, " +
                              std::to_string(leaves) + " leaves");
    largest = std::max(largest, tokens.size());
    tree_table_model::append_tree(tokens, parents, logits);
  }

 private:
  std::size_t nodes_, leaves_;
};
static_assert(specdec::TreeLanguageModel<limited_tree_model>);

}  // namespace

TEST_CASE("edges: trees are drafted within the model's max_tree_size() and max_tree_leaves()") {
  const std::vector<token_id> prompt{1, 2, 3};
  generate_options plain_o;
  plain_o.max_new_tokens = 30;
  plain_o.sampling = greedy_sampling();
  table_model plain(target_table);
  const auto reference = specdec::generate_autoregressive(plain, prompt, plain_o).tokens;
  struct limits {
    std::size_t nodes, leaves;
  };
  for (const limits l : {limits{5, 64}, limits{64, 2}, limits{4, 2}}) {
    INFO("max_tree_size " << l.nodes << ", max_tree_leaves " << l.leaves);
    limited_tree_model target(target_table, l.nodes, l.leaves);
    table_model draft_model(draft_table);
    specdec::model_drafter drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    generate_options o = plain_o;
    o.tree = {2, 2, 2};  // 15 nodes, 8 leaves: past every limit above
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == reference);
    CHECK(target.largest > 1);  // it drafted trees, smaller ones
    CHECK(target.largest <= l.nodes);
    // Re-planned trees keep to the limits too.
    o.tree.clear();
    o.policy = specdec::speed_policy(cheap_rows(40));
    limited_tree_model target2(target_table, l.nodes, l.leaves);
    specdec::speculative_decoder replanned(target2, drafter);
    CHECK(replanned.generate(prompt, o).tokens == reference);
  }
}

// verification_rule's former name still compiles, as a deprecated alias, for one release.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<specdec::chain_verification, specdec::verification_rule>);
#pragma GCC diagnostic pop
