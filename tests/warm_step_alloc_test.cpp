// After a warm-up of a few steps, a decoding step allocates nothing: the single-sequence and
// batch decoders with chain, tree and n-gram drafting, greedy and sampled (T = 1, and top-k with
// top-p), token-wise and block verification. Buffers grow to the largest step seen and stay.
//
// How it counts. This program replaces every global operator new and delete (plain, array,
// aligned, nothrow, sized) with counting ones, and turns on Eigen's runtime malloc guard:
// EIGEN_RUNTIME_NO_MALLOC with Eigen::internal::set_is_malloc_allowed(false) while counting, and
// eigen_assert defined below (before any Eigen header) so that the guard's check counts in a
// Release build too, where NDEBUG turns Eigen's own assert off. Eigen allocates through
// std::malloc, which operator new does not see. Eigen's guard does not cover its realloc path
// (conservativeResize), so the program also interposes realloc and counts it (glibc's
// __libc_realloc does the work; not under the sanitizers, whose runtimes interpose it).
//
// What is counted is the library's: the test models (table models, the batch model) allocate
// in their own calls, so each is wrapped in a forwarding model that pauses the counters while
// the call runs (quiet_model, quiet_batch). The library's adapters around them (hidden_capture,
// sequence_view) are counted. Stores that grow with the context (model_drafter's copy of the
// draft model's tokens, hidden_capture's rows) grow geometrically and have no reserve yet: the
// 80-token prompts leave them room for the 60 tokens generated here.
#define EIGEN_RUNTIME_NO_MALLOC
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // the replacements pair malloc with free
#endif
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace alloc_count {
inline bool armed = false;
inline std::size_t news = 0, deletes = 0, eigen = 0, reallocs = 0;
// Eigen's assertion: the malloc guard's failure is counted, any other one throws.
inline void eigen_failed(const char* expr) {
  if (std::strstr(expr, "is_malloc_allowed")) {
    ++eigen;
    return;
  }
  throw std::logic_error(std::string("eigen_assert failed: ") + expr);
}
}  // namespace alloc_count
#define eigen_assert(x)                                       \
  do {                                                        \
    if (!(x)) ::alloc_count::eigen_failed(#x);                \
  } while (false)

#include <catch2/catch.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/math/warp.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/hidden_table_model.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPECDEC_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPECDEC_TEST_SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(SPECDEC_TEST_SANITIZED)
#define SPECDEC_TEST_COUNTS_REALLOC 1
extern "C" void* __libc_realloc(void* p, std::size_t n);
extern "C" void* realloc(void* p, std::size_t n) noexcept {
  if (alloc_count::armed) ++alloc_count::reallocs;
  return __libc_realloc(p, n);
}
#endif

namespace {
void* counted_new(std::size_t n) noexcept {
  if (alloc_count::armed) ++alloc_count::news;
  return std::malloc(n ? n : 1);
}
void* counted_new(std::size_t n, std::align_val_t al) noexcept {
  if (alloc_count::armed) ++alloc_count::news;
  const auto a = static_cast<std::size_t>(al);
  return std::aligned_alloc(a, (n + a - 1) / a * a);
}
void counted_delete(void* p) noexcept {
  if (p && alloc_count::armed) ++alloc_count::deletes;
  std::free(p);
}
void* or_throw(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return or_throw(counted_new(n)); }
void* operator new[](std::size_t n) { return or_throw(counted_new(n)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_new(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_new(n); }
void* operator new(std::size_t n, std::align_val_t a) { return or_throw(counted_new(n, a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return or_throw(counted_new(n, a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_new(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_new(n, a);
}
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_delete(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_delete(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_delete(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_delete(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_delete(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_delete(p);
}

namespace {

using specdec::candidate_draw;
using specdec::verification_rule;
using specdec::generate_options;
using specdec::row_matrix;
using specdec::sampling_params;
using specdec::token_id;
using specdec::test::batch_table_model;
using specdec::test::hidden_table_model;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::tree_table_model;

// What was counted between arm() and disarm().
struct counts {
  std::size_t news = 0, deletes = 0, eigen = 0, reallocs = 0, steps = 0;
  bool none() const { return news == 0 && deletes == 0 && eigen == 0 && reallocs == 0; }
  std::string describe() const {
    return std::to_string(steps) + " steps: " + std::to_string(news) + " new, " +
           std::to_string(deletes) + " delete, " + std::to_string(eigen) + " Eigen malloc, " +
           std::to_string(reallocs) + " realloc";
  }
};
void arm() {
  alloc_count::news = alloc_count::deletes = alloc_count::eigen = alloc_count::reallocs = 0;
  alloc_count::armed = true;
  Eigen::internal::set_is_malloc_allowed(false);
}
counts disarm(std::size_t steps) {
  alloc_count::armed = false;
  Eigen::internal::set_is_malloc_allowed(true);
  return {alloc_count::news, alloc_count::deletes, alloc_count::eigen, alloc_count::reallocs,
          steps};
}

// Pauses the counters for the scope of a test model's own call.
struct counting_paused {
  bool was = alloc_count::armed;
  counting_paused() {
    alloc_count::armed = false;
    Eigen::internal::set_is_malloc_allowed(true);
  }
  ~counting_paused() {
    alloc_count::armed = was;
    Eigen::internal::set_is_malloc_allowed(!was);
  }
  counting_paused(const counting_paused&) = delete;
  counting_paused& operator=(const counting_paused&) = delete;
};

// A test model whose own calls are not counted (they allocate: token vectors, brute-force tree
// contexts). Forwards LanguageModel, TreeLanguageModel and HiddenStateModel members.
template <class M>
struct quiet_model {
  M m;
  explicit quiet_model(const table_model_options& o) : m(o) {}
  std::size_t vocab_size() const { return m.vocab_size(); }
  std::size_t size() const { return m.size(); }
  std::size_t max_size() const { return m.max_size(); }
  std::span<const token_id> tokens() const { return m.tokens(); }
  void append(std::span<const token_id> t, std::span<float> l) {
    counting_paused p;
    m.append(t, l);
  }
  void truncate(std::size_t n) {
    counting_paused p;
    m.truncate(n);
  }
  void append_tree(std::span<const token_id> t, std::span<const std::int32_t> parents,
                   std::span<float> l)
    requires requires(M& x) { x.append_tree(t, parents, l); }
  {
    counting_paused p;
    m.append_tree(t, parents, l);
  }
  void commit(std::span<const std::int32_t> path)
    requires requires(M& x) { x.commit(path); }
  {
    counting_paused p;
    m.commit(path);
  }
  std::size_t hidden_size() const
    requires requires(const M& x) { x.hidden_size(); }
  {
    return m.hidden_size();
  }
  void append(std::span<const token_id> t, std::span<float> l, std::span<float> h)
    requires requires(M& x) { x.append(t, l, h); }
  {
    counting_paused p;
    m.append(t, l, h);
  }
};

// The batch test model, its own calls not counted.
struct quiet_batch {
  batch_table_model m;
  explicit quiet_batch(const table_model_options& o) : m({.model = o}) {}
  std::size_t vocab_size() const { return m.vocab_size(); }
  std::size_t max_size() const { return m.max_size(); }
  std::size_t max_sequences() const { return m.max_sequences(); }
  std::size_t max_batch_tokens() const { return m.max_batch_tokens(); }
  specdec::sequence_id create_sequence() {
    counting_paused p;
    return m.create_sequence();
  }
  void release_sequence(specdec::sequence_id id) {
    counting_paused p;
    m.release_sequence(id);
  }
  std::size_t size(specdec::sequence_id id) const { return m.size(id); }
  void score(std::span<const specdec::batch_entry> b) {
    counting_paused p;
    m.score(b);
  }
  void truncate(specdec::sequence_id id, std::size_t n) {
    counting_paused p;
    m.truncate(id, n);
  }
  void commit(specdec::sequence_id id, std::span<const std::int32_t> path) {
    counting_paused p;
    m.commit(id, path);
  }
  std::span<const token_id> tokens(specdec::sequence_id id) const { return m.tokens(id); }
};
static_assert(specdec::BatchTreeLanguageModel<quiet_batch>);

constexpr std::size_t vocab = 300;
const table_model_options target_table{.vocab_size = vocab, .order = 3, .seed = 7};
const table_model_options draft_table{
    .vocab_size = vocab, .order = 3, .seed = 7, .mix = 0.3f, .mix_seed = 9};
constexpr std::size_t warm_steps = 4;

// 80 tokens: periodic (n-gram drafts find matches) or spread over the vocabulary.
std::vector<token_id> prompt(bool periodic, std::size_t v = vocab) {
  std::vector<token_id> p;
  for (std::size_t i = 0; i < 80; ++i)
    p.push_back(static_cast<token_id>(periodic ? i % 7 : (i * 13 + 5) % v));
  return p;
}

// The samplings: greedy, T = 1, and T = 0.8 with top-k 20 and top-p 0.9.
struct sampling_case {
  const char* name;
  sampling_params sp;
};
std::vector<sampling_case> samplings() {
  sampling_params greedy, t1, warped;
  greedy.temperature = 0.0f;
  t1.temperature = 1.0f;
  warped.temperature = 0.8f;
  warped.top_k = 20;
  warped.top_p = 0.9f;
  // A row processor (a penalty on the last three tokens) on greedy and warped rows: its
  // prefixes and processed rows come from buffers that stay.
  sampling_params greedy_processed = greedy, warped_processed = warped;
  greedy_processed.processor = warped_processed.processor = [](std::span<const token_id> prefix,
                                                               std::span<float> logits) {
    for (std::size_t i = prefix.size() - std::min<std::size_t>(3, prefix.size()); i < prefix.size();
         ++i)
      logits[static_cast<std::size_t>(prefix[i])] -= 1.0f;
  };
  return {{"greedy", greedy},
          {"T = 1", t1},
          {"top-k + top-p", warped},
          {"greedy + row processor", greedy_processed},
          {"top-k + top-p + row processor", warped_processed}};
}

// Starts `o` on `decoder`, runs warm_steps steps, then counts every step until it is done.
// With `growing` (drafts whose size varies: n-gram tries), a step that drafts more nodes than
// any before may allocate (buffers grow to the largest step seen); it is not counted, and the
// steps after it must allocate nothing again.
template <class Decoder>
counts warm_run(Decoder& decoder, std::span<const token_id> p, generate_options o,
                bool growing = false) {
  o.max_new_tokens = 60;
  o.sampling.seed = 5;
  decoder.start(p, o);
  std::size_t largest = 0;
  const auto nodes_before = [&] { return decoder.stats().drafted_nodes; };
  for (std::size_t i = 0; i < warm_steps && !decoder.done(); ++i) {
    const std::size_t before = nodes_before();
    decoder.step();
    largest = std::max(largest, nodes_before() - before);
  }
  counts total;
  while (!decoder.done()) {
    const std::size_t before = nodes_before();
    arm();
    decoder.step();
    const counts c = disarm(1);
    const std::size_t nodes = nodes_before() - before;
    if (growing && nodes > largest) {
      largest = nodes;
      continue;
    }
    total.news += c.news;
    total.deletes += c.deletes;
    total.eigen += c.eigen;
    total.reallocs += c.reallocs;
    total.steps += 1;
  }
  return total;
}

}  // namespace

TEST_CASE("warm_step_alloc: the counters see operator new, Eigen's malloc and realloc") {
  arm();
  auto v = std::make_unique<std::vector<int>>(10);
  v.reset();
  row_matrix m(3, 3);
  const counts c = disarm(0);
  CHECK(c.news == 2);
  CHECK(c.deletes == 2);
  CHECK(c.eigen == 1);
  SECTION("and not what a paused call does") {
    arm();
    {
      counting_paused p;
      std::vector<int> w(10);
      row_matrix n(4, 4);
    }
    CHECK(disarm(0).none());
  }
#ifdef SPECDEC_TEST_COUNTS_REALLOC
  SECTION("and Eigen's conservativeResize, which reallocates") {
    row_matrix r(2, 3);
    arm();
    r.conservativeResize(40, 3);
    const counts grown = disarm(0);
    INFO(grown.describe());
    CHECK(grown.reallocs == 1);
  }
#endif
}

TEST_CASE("warm_step_alloc: speculative_decoder with model_drafter chains") {
  for (const auto& [name, sp] : samplings()) {
    for (const auto verification : {verification_rule::token, verification_rule::block}) {
      if (sp.greedy() && verification == verification_rule::block) continue;
      quiet_model<table_model> target(target_table), draft_model(draft_table);
      specdec::model_drafter drafter(draft_model);
      specdec::speculative_decoder decoder(target, drafter);
      generate_options o;
      o.draft_length = 4;
      o.sampling = sp;
      o.verification = verification;
      const counts c = warm_run(decoder, prompt(false), o);
      INFO(name << (verification == verification_rule::block ? ", block" : ", token-wise") << ": "
                << c.describe());
      CHECK(c.steps > 5);
      CHECK(c.none());
    }
  }
}

TEST_CASE("warm_step_alloc: speculative_decoder with model_drafter trees") {
  const std::vector<std::vector<std::size_t>> shapes{{3, 2, 1}, {2, 2}};
  for (const auto& [name, sp] : samplings()) {
    for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
      for (const auto& shape : shapes) {
        if (sp.greedy() && draw != candidate_draw::iid) continue;
        generate_options o;
        o.tree = shape;
        o.sampling = sp;
        o.tree_draw = draw;
        const std::string how =
            std::string(draw == candidate_draw::iid ? "iid" : "without replacement") +
            (shape.size() == 2 ? ", 2x2" : ", 3x2x1");
        quiet_model<table_model> draft_model(draft_table);
        specdec::model_drafter drafter(draft_model);
        {
          quiet_model<tree_table_model> target(target_table);  // append_tree
          specdec::speculative_decoder decoder(target, drafter);
          const counts c = warm_run(decoder, prompt(false), o);
          INFO(name << ", " << how << ", tree target: " << c.describe());
          CHECK(c.steps > 5);
          CHECK(c.none());
        }
        {
          quiet_model<table_model> target(target_table);  // the path-by-path fallback
          specdec::speculative_decoder decoder(target, drafter);
          const counts c = warm_run(decoder, prompt(false), o);
          INFO(name << ", " << how << ", fallback: " << c.describe());
          CHECK(c.steps > 5);
          CHECK(c.none());
        }
      }
    }
  }
}

TEST_CASE("warm_step_alloc: speculative_decoder with ngram_drafter chains and tries") {
  for (const auto& [name, sp] : samplings()) {
    for (const std::size_t max_ngram : {0u, 4u}) {
      for (const bool trie : {false, true}) {
        quiet_model<tree_table_model> target(target_table);
        specdec::ngram_drafter drafter({.min_ngram = 1, .max_ngram = max_ngram});
        specdec::speculative_decoder decoder(target, drafter);
        generate_options o;
        o.draft_length = 4;
        o.sampling = sp;
        if (trie) o.tree = {2, 2, 1};
        const counts c = warm_run(decoder, prompt(true), o, trie);
        INFO(name << ", max_ngram " << max_ngram << (trie ? ", trie: " : ", chain: ")
                  << c.describe());
        CHECK(c.steps > 5);
        CHECK(c.none());
      }
    }
  }
}

TEST_CASE("warm_step_alloc: speculative_decoder with Medusa and EAGLE heads") {
  constexpr std::size_t v = 64;
  const auto V = static_cast<Eigen::Index>(v);
  const auto random = [](Eigen::Index rows, Eigen::Index cols, float scale, std::uint64_t seed) {
    specdec::rng g(seed);
    row_matrix m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i)
      m.data()[i] = scale * static_cast<float>(2.0 * g.uniform_open() - 1.0);
    return m;
  };
  const row_matrix embedding = random(V, V, 1.0f, 50);
  const table_model_options table{.vocab_size = v, .order = 3, .seed = 7};
  for (const auto& [name, sp] : samplings()) {
    for (const bool trees : {false, true}) {
      generate_options o;
      o.draft_length = 3;
      o.sampling = sp;
      if (trees) o.tree = {2, 2, 1};
      quiet_model<hidden_table_model> target(table);
      specdec::hidden_capture capture(target);
      const specdec::weight_view classifier{target.m.classifier().data(), V, V};
      {
        specdec::medusa_weights w;
        for (std::uint64_t k = 0; k < 3; ++k)
          w.heads.push_back({random(V, V, 0.8f, 10 + k), random(1, V, 0.5f, 20 + k), row_matrix()});
        specdec::medusa_drafter drafter(capture, w, classifier);
        specdec::speculative_decoder decoder(capture, drafter);
        const counts c = warm_run(decoder, prompt(false, v), o);
        INFO("Medusa, " << name << (trees ? ", tree: " : ", chain: ") << c.describe());
        CHECK(c.steps > 5);
        CHECK(c.none());
      }
      for (const bool attention : {false, true}) {
        specdec::eagle_weights w{random(16, 2 * V, 0.8f, 41), random(1, 16, 0.3f, 42),
                                 random(V, 16, 0.8f, 43), random(1, V, 0.3f, 44), 1.0f, {}, {}};
        if (attention) {  // two heads of width 4
          w.attention.wq = random(8, 2 * V, 1.5f, 45);
          w.attention.wk = random(8, 2 * V, 1.5f, 46);
          w.attention.wv = random(8, 2 * V, 1.0f, 47);
          w.attention.wo = random(V, 8, 1.0f, 48);
          w.attention.heads = 2;
        }
        specdec::eagle_drafter drafter(capture, w, classifier,
                                       specdec::weight_view{embedding.data(), V, V});
        specdec::speculative_decoder decoder(capture, drafter);
        const counts c = warm_run(decoder, prompt(false, v), o);
        INFO("EAGLE" << (attention ? " with attention, " : ", ") << name
                     << (trees ? ", tree: " : ", chain: ") << c.describe());
        CHECK(c.steps > 5);
        CHECK(c.none());
      }
    }
  }
}

TEST_CASE("warm_step_alloc: batch_decoder with model_drafter chains and trees") {
  using drafter_t = specdec::model_drafter<quiet_model<table_model>>;
  for (const auto& [name, sp] : samplings()) {
    for (const bool trees : {false, true}) {
      quiet_batch model(target_table);
      std::vector<std::unique_ptr<quiet_model<table_model>>> draft_models;
      std::vector<std::unique_ptr<drafter_t>> drafters;
      specdec::batch_decoder<quiet_batch, drafter_t> decoder(model);
      generate_options o;
      o.draft_length = 3;
      o.sampling = sp;
      o.max_new_tokens = 50;
      if (trees) o.tree = {2, 2};
      for (token_id s = 0; s < 3; ++s) {
        draft_models.push_back(std::make_unique<quiet_model<table_model>>(draft_table));
        drafters.push_back(std::make_unique<drafter_t>(*draft_models.back()));
        auto p = prompt(false);
        p[0] = s;
        o.sampling.seed = 5 + static_cast<std::uint64_t>(s);
        decoder.add(p, o, *drafters.back());
      }
      for (std::size_t i = 0; i < warm_steps; ++i) decoder.step();
      std::size_t steps = 0;
      arm();
      while (decoder.running_count() > 0) {
        decoder.step();
        ++steps;
      }
      const counts c = disarm(steps);
      INFO(name << (trees ? ", trees: " : ", chains: ") << c.describe());
      CHECK(c.steps > 5);
      CHECK(c.none());
    }
  }
}

TEST_CASE("warm_step_alloc: sample() and warp() allocate nothing, past 256 Ki tokens too") {
  const std::size_t v = 300'000;  // more blocks of 1024 than sample() keeps on its stack
  std::vector<float> logits(v), probs(v);
  specdec::rng g(3);
  for (float& x : logits) x = static_cast<float>(4.0 * g.uniform_open());
  sampling_params sp;
  sp.temperature = 0.8f;
  sp.top_k = 50;
  sp.top_p = 0.9f;
  specdec::warp_workspace ws;
  specdec::warp(logits, sp, probs, ws);  // sizes the workspace
  arm();
  specdec::warp(logits, sp, probs, ws);
  const token_id t = specdec::sample(probs, g);
  const token_id u = specdec::sample(logits, g);  // all positive: the whole row counts
  const counts c = disarm(1);
  INFO(c.describe());
  CHECK(c.none());
  CHECK(probs[static_cast<std::size_t>(t)] > 0.0f);
  CHECK(u >= 0);
}

TEST_CASE("warm_step_alloc: sampled 2x2 trees from a short prompt, 12 warm-up steps, 40 counted") {
  // A review found two allocations in such a run: a store sized by the first steps and grown
  // later. Every tree drafter, both decoders, a prompt far shorter than the generation, with
  // rejection sampling and with coupled sampling.
  const std::vector<token_id> short_prompt{3, 1, 4};
  generate_options o;
  o.tree = {2, 2};
  o.max_new_tokens = 400;
  const auto count = [&](auto& decoder) {
    decoder.start(short_prompt, o);
    for (std::size_t i = 0; i < 12; ++i) decoder.step();
    arm();
    for (std::size_t i = 0; i < 40 && !decoder.done(); ++i) decoder.step();
    return disarm(40);
  };
  for (const auto rule : {verification_rule::token, verification_rule::coupled}) {
    for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
      o.tree_draw = draw;
      o.verification = rule;
      o.sampling.temperature = 0.9f;
      o.sampling.seed = 11;
      const std::string how =
          std::string(draw == candidate_draw::iid ? "iid" : "without replacement") +
          (rule == verification_rule::coupled ? ", coupled" : "");
      {
        quiet_model<table_model> draft_model(draft_table);
        specdec::model_drafter drafter(draft_model);
        quiet_model<tree_table_model> target(target_table);
        specdec::speculative_decoder decoder(target, drafter);
        const counts c = count(decoder);
        INFO("model_drafter, " << how << ": " << c.describe());
        CHECK(c.none());
      }
      {
        constexpr std::size_t v = 64;
        const auto V = static_cast<Eigen::Index>(v);
        const table_model_options table{.vocab_size = v, .order = 3, .seed = 7};
        quiet_model<hidden_table_model> target(table);
        specdec::hidden_capture capture(target);
        const specdec::weight_view classifier{target.m.classifier().data(), V, V};
        specdec::medusa_weights w;
        specdec::rng g(3);
        for (std::uint64_t k = 0; k < 2; ++k) {
          row_matrix a(V, V), b(1, V);
          for (Eigen::Index i = 0; i < a.size(); ++i)
            a.data()[i] = static_cast<float>(g.uniform_open() - 0.5);
          for (Eigen::Index i = 0; i < b.size(); ++i)
            b.data()[i] = static_cast<float>(g.uniform_open() - 0.5);
          w.heads.push_back({a, b, row_matrix()});
        }
        specdec::medusa_drafter drafter(capture, w, classifier);
        specdec::speculative_decoder decoder(capture, drafter);
        const counts c = count(decoder);
        INFO("medusa_drafter, " << how << ": " << c.describe());
        CHECK(c.none());
      }
      {
        using drafter_t = specdec::model_drafter<quiet_model<table_model>>;
        quiet_batch model(target_table);
        std::vector<std::unique_ptr<quiet_model<table_model>>> draft_models;
        std::vector<std::unique_ptr<drafter_t>> drafters;
        specdec::batch_decoder<quiet_batch, drafter_t> decoder(model);
        for (token_id s = 0; s < 3; ++s) {
          draft_models.push_back(std::make_unique<quiet_model<table_model>>(draft_table));
          drafters.push_back(std::make_unique<drafter_t>(*draft_models.back()));
          auto p = short_prompt;
          p[0] = s;
          decoder.add(p, o, *drafters.back());
        }
        for (std::size_t i = 0; i < 12; ++i) decoder.step();
        arm();
        for (std::size_t i = 0; i < 40; ++i) decoder.step();
        const counts c = disarm(40);
        INFO("batch_decoder, " << how << ": " << c.describe());
        CHECK(c.none());
      }
    }
  }
}

TEST_CASE("warm_step_alloc: a plain model, a long prompt and a large vocabulary, sampled 2x2 trees") {
  // The case a review counted 2 allocations in: a 2x2 sampled tree with a draft model at T = 1 on
  // a LanguageModel without append_tree (scored path by path), a 64-token prompt, V = 32000, 12
  // warm-up steps, then 40 counted; chains on the same models too.
  constexpr std::size_t v = 32000;
  const table_model_options big{.vocab_size = v, .order = 3, .seed = 7};
  const table_model_options big_draft{.vocab_size = v, .order = 3, .seed = 7, .mix = 0.3f, .mix_seed = 9};
  std::vector<token_id> long_prompt;
  for (std::size_t i = 0; i < 64; ++i) long_prompt.push_back(static_cast<token_id>((i * 977 + 5) % v));
  for (const bool tree : {true, false}) {
    generate_options o;
    if (tree)
      o.tree = {2, 2};
    else
      o.draft_length = 4;
    o.max_new_tokens = 400;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 11;
    quiet_model<table_model> target(big), draft_model(big_draft);
    specdec::model_drafter drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    decoder.start(long_prompt, o);
    for (std::size_t i = 0; i < 12; ++i) decoder.step();
    arm();
    std::size_t steps = 0;
    for (; steps < 40 && !decoder.done(); ++steps) decoder.step();
    const counts c = disarm(steps);
    INFO((tree ? "2x2 tree, " : "chain K = 4, ") << c.describe());
    CHECK(steps == 40);
    CHECK(c.none());
  }
}
