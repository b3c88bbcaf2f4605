// Real-model tests of the llama2.c adapter: tokenizer, greedy reference output, checkpoint
// errors, capacity, tree attention, layer-skip drafts and the conformance kit.

// Let the test catch Eigen heap allocations in Release builds too: Eigen then checks
// set_is_malloc_allowed() in every allocation, and its assertions throw. Set before any header
// that includes Eigen (common.hpp does).
#include <stdexcept>
#define EIGEN_RUNTIME_NO_MALLOC
#define eigen_assert(x) \
  do {                  \
    if (!(x)) throw std::runtime_error("Eigen assertion failed: " #x); \
  } while (false)

#include "common.hpp"  // Catch's runner, main(), the model paths and run.c's reference

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/testing.hpp>

namespace fs = std::filesystem;
using namespace specdec;
using namespace llama2c_test;

namespace {

// A scratch folder for bad files, removed at exit.
struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("specdec_llama2c_test_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Writes a checkpoint: the header, then `floats` zeros.
fs::path write_checkpoint(const fs::path& dir, const std::string& name,
                          std::vector<std::int32_t> header, std::size_t floats) {
  const fs::path p = dir / name;
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()),
            static_cast<std::streamsize>(header.size() * sizeof(std::int32_t)));
  const std::vector<float> zeros(floats, 0.0f);
  out.write(reinterpret_cast<const char*>(zeros.data()),
            static_cast<std::streamsize>(zeros.size() * sizeof(float)));
  return p;
}

// Float count of a llama2.c checkpoint with these header values (shared classifier).
std::size_t weight_count(std::size_t dim, std::size_t hidden, std::size_t layers,
                         std::size_t heads, std::size_t kv_heads, std::size_t vocab,
                         std::size_t seq_len) {
  const std::size_t hs = dim / heads, kv = kv_heads * hs;
  return vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) +
         dim + seq_len * hs;
}

std::vector<float> greedy_logits_single(llama2c::model& m, std::span<const token_id> tokens) {
  std::vector<float> out(tokens.size() * m.vocab_size());
  for (std::size_t i = 0; i < tokens.size(); ++i)
    m.append(tokens.subspan(i, 1), std::span(out).subspan(i * m.vocab_size(), m.vocab_size()));
  return out;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("llama2c tokenizer: encodes the prompt as run.c does") {
  const llama2c::tokenizer tok(tokenizer_path);
  REQUIRE(tok.vocab_size() == 512);
  const auto ids = tok.encode("I dreamed");
  const std::vector<token_id> expected{1, 303, 281, 269, 435, 447, 328};
  CHECK(ids == expected);
  CHECK(tok.decode(reference_ids) == reference_text);
}

TEST_CASE("llama2c model: greedy generation reproduces run.c's reference output") {
  llama2c::model m(checkpoint_path);
  const llama2c::tokenizer tok(tokenizer_path);
  const auto prompt = tok.encode("I dreamed");
  std::vector<token_id> fed{prompt.front()};
  std::vector<float> logits(m.vocab_size());
  for (std::size_t pos = 0; pos < 96; ++pos) {
    m.append(std::span(fed).subspan(pos, 1), logits);
    const auto next = pos + 1 < prompt.size() ? prompt[pos + 1] : specdec::argmax(logits);
    fed.push_back(next);
  }
  const std::vector<token_id> generated(fed.begin() + 1, fed.end());
  CHECK(generated == reference_ids);
  CHECK(tok.decode(generated) == reference_text);

  // One batched pass over the same 96 positions makes the same greedy choices.
  m.truncate(0);
  std::vector<float> all(96 * m.vocab_size());
  m.append(std::span(fed).first(96), all);
  for (std::size_t pos = prompt.size() - 1; pos < 96; ++pos)
    CHECK(specdec::argmax(std::span(all).subspan(pos * 512, 512)) == fed[pos + 1]);
}

TEST_CASE("llama2c tokenizer: the Llama 2 vocabulary loads and round-trips text") {
  const llama2c::tokenizer tok(models_dir / "llama2.tokenizer.bin");
  REQUIRE(tok.vocab_size() == 32000);
  CHECK(tok.find(" ") == 29871);
  CHECK(tok.piece(1) == "\n<s>\n");
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.", "Hello world!\nTabs\tand 42 numbers",
        "na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82", "a"}) {
    const auto ids = tok.encode(text);
    INFO(text);
    REQUIRE(ids.size() >= 2);
    CHECK(ids.front() == 1);
    CHECK(tok.decode(ids) == text);
  }
  CHECK(tok.encode("", {.bos = false}).empty());
  CHECK(tok.encode("", {.bos = true, .eos = true}) == std::vector<token_id>{1, 2});
}

TEST_CASE("llama2c tokenizer: byte fallback and decode rules") {
  const llama2c::tokenizer tok(tokenizer_path);
  // A character outside the 512-token vocabulary falls back to its UTF-8 bytes (id byte + 3).
  const auto ids = tok.encode("\xe6\x97\xa5", {.bos = false});
  CHECK(ids == std::vector<token_id>{tok.find(" "), 0xe6 + 3, 0x97 + 3, 0xa5 + 3});
  CHECK(tok.decode(ids) == "\xe6\x97\xa5");
  CHECK(tok.decode(1, 303) == "I");   // the leading space goes after BOS
  CHECK(tok.decode(303, 303) == " I");
  CHECK(tok.decode(1, 13) == "\n");   // <0x0A>
  CHECK_THROWS_WITH(tok.decode(1, 512),
                    "llama2c::tokenizer::decode: token 512 outside the vocabulary of 512");
}

TEST_CASE("llama2c tokenizer: bad files are named in the error") {
  temp_dir tmp;
  CHECK_THROWS_WITH(llama2c::tokenizer(tmp.path / "none.bin"),
                    "llama2c tokenizer '" + (tmp.path / "none.bin").string() + "': file not found");
  {
    std::ofstream out(tmp.path / "short.bin", std::ios::binary);
    const std::int32_t max_len = 8, len = 5;
    const float score = 0;
    out.write(reinterpret_cast<const char*>(&max_len), 4);
    out.write(reinterpret_cast<const char*>(&score), 4);
    out.write(reinterpret_cast<const char*>(&len), 4);
    out.write("ab", 2);
  }
  CHECK_THROWS_WITH(llama2c::tokenizer(tmp.path / "short.bin"),
                    "llama2c tokenizer '" + (tmp.path / "short.bin").string() +
                        "': truncated inside token 0: its length is 5 but the file has 2 "
                        "byte(s) left");
  CHECK_THROWS_WITH(llama2c::tokenizer(tokenizer_path, 600),
                    "llama2c tokenizer '" + tokenizer_path.string() +
                        "': the tokenizer has 512 tokens but the model's vocabulary has 600 (a "
                        "tokenizer for another model)");
  // Issue 10: aidreams260K (512 tokens) with the Llama 2 tokenizer printed garbage and exited 0.
  const fs::path llama2 = models_dir / "llama2.tokenizer.bin";
  CHECK_THROWS_WITH(llama2c::tokenizer(llama2, 512),
                    "llama2c tokenizer '" + llama2.string() +
                        "': the tokenizer has 32000 tokens but the model's vocabulary has 512 (a "
                        "tokenizer for another model)");
}

TEST_CASE("llama2c checkpoint: missing, truncated and malformed files are refused") {
  temp_dir tmp;
  const auto err = [&](const fs::path& p, const std::string& what) {
    return "llama2c checkpoint '" + p.string() + "': " + what;
  };
  const fs::path missing = tmp.path / "missing.bin";
  CHECK_THROWS_WITH(llama2c::load_checkpoint(missing), err(missing, "file not found"));
  CHECK_THROWS_AS(llama2c::load_checkpoint(missing), std::runtime_error);

  auto p = write_checkpoint(tmp.path, "short_header.bin", {64, 172, 4}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "truncated header: file has 12 bytes, the header needs 28"));
  p = write_checkpoint(tmp.path, "zero_dim.bin", {0, 172, 4, 4, 4, 512, 128}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "bad header: dim = 0 (must be positive)"));
  p = write_checkpoint(tmp.path, "neg_layers.bin", {64, 172, -4, 4, 4, 512, 128}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "bad header: n_layers = -4 (must be positive)"));
  p = write_checkpoint(tmp.path, "zero_vocab.bin", {64, 172, 4, 4, 4, 0, 128}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "bad header: vocab_size = 0 (must be positive; negative marks an "
                           "unshared classifier)"));
  p = write_checkpoint(tmp.path, "heads.bin", {64, 172, 4, 5, 5, 512, 128}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "bad header: dim = 64 is not divisible by n_heads = 5"));
  p = write_checkpoint(tmp.path, "kv_heads.bin", {64, 172, 4, 4, 3, 512, 128}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "bad header: n_heads = 4 is not a multiple of n_kv_heads = 3"));
  p = write_checkpoint(tmp.path, "huge.bin", {1 << 30, 2147483647, 2147483647, 1, 1, 2147483647, 2147483647}, 0);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "header values are too large (weight count overflows)"));

  const std::size_t good = weight_count(8, 16, 2, 2, 1, 10, 4);
  const std::vector<std::int32_t> header{8, 16, 2, 2, 1, 10, 4};
  p = write_checkpoint(tmp.path, "truncated.bin", header, good - 1);
  const std::string sizes = " but its header (dim 8, hidden_dim 16, n_layers 2, n_heads 2, "
                            "n_kv_heads 1, vocab_size 10, seq_len 4) needs " +
                            std::to_string(28 + 4 * good);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "truncated: file has " + std::to_string(28 + 4 * (good - 1)) +
                               " bytes" + sizes));
  p = write_checkpoint(tmp.path, "long.bin", header, good + 3);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p),
                    err(p, "malformed: file has " + std::to_string(28 + 4 * (good + 3)) +
                               " bytes" + sizes));
  // An unshared classifier (negative vocab_size) needs vocab * dim more floats.
  p = write_checkpoint(tmp.path, "unshared.bin", {8, 16, 2, 2, 1, -10, 4}, good);
  CHECK_THROWS_WITH(llama2c::load_checkpoint(p), Catch::Contains("truncated: file has"));
  p = write_checkpoint(tmp.path, "unshared_ok.bin", {8, 16, 2, 2, 1, -10, 4}, good + 80);
  const auto w = llama2c::load_checkpoint(p);
  CHECK_FALSE(w->cfg().shared_classifier);
  CHECK(w->cfg().vocab_size == 10);
  CHECK(w->cfg().kv_dim() == 4);
  CHECK(w->classifier().data() != w->token_embedding().data());
  // A grouped-query toy model runs.
  llama2c::model m(w);
  std::vector<float> logits(2 * 10);
  const std::vector<token_id> toks{1, 2};
  m.append(toks, logits);
  CHECK(m.size() == 2);
}

TEST_CASE("llama2c model: the context is refused past seq_len unless max_context raises it") {
  const auto w = llama2c::load_checkpoint(checkpoint_path);
  llama2c::model m(w);
  REQUIRE(m.max_size() == 128);
  std::vector<token_id> toks(128);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<token_id>(3 + i);
  std::vector<float> logits(toks.size() * m.vocab_size());
  m.append(std::span(toks).first(120), std::span(logits).first(120 * 512));
  CHECK_THROWS_WITH(m.append(std::span(toks).first(9), std::span(logits).first(9 * 512)),
                    "llama2c::model::append: 120 + 9 tokens exceed max_size() = 128 (the "
                    "checkpoint's seq_len unless model_options::max_context raises it)");
  CHECK_THROWS_AS(m.append(std::span(toks).first(9), std::span(logits).first(9 * 512)),
                  std::length_error);
  CHECK(m.size() == 120);
  m.append(std::span(toks).first(8), std::span(logits).first(8 * 512));
  CHECK(m.size() == 128);

  llama2c::model longer(w, {.max_context = 200});
  CHECK(longer.max_size() == 200);
  longer.append(toks, logits);
  longer.append(std::span(toks).first(72), std::span(logits).first(72 * 512));
  CHECK(longer.size() == 200);
  CHECK(std::all_of(logits.begin(), logits.begin() + 72 * 512, [](float x) { return std::isfinite(x); }));
}

TEST_CASE("llama2c model: bad input is refused before any state changes") {
  llama2c::model m(checkpoint_path);
  std::vector<float> logits(2 * 512);
  const std::vector<token_id> good{1, 303};
  m.append(good, logits);
  const std::vector<token_id> bad{303, 512};
  CHECK_THROWS_WITH(m.append(bad, logits),
                    "llama2c::model::append: token 512 at index 1 outside the vocabulary [0, 512)");
  CHECK_THROWS_AS(m.append(bad, logits), std::out_of_range);
  CHECK_THROWS_WITH(m.append(good, std::span(logits).first(511)),
                    "llama2c::model::append: logits.size() = 511, expected 2 * vocab_size 512 = 1024");
  CHECK_THROWS_AS(m.append({}, logits), std::invalid_argument);
  CHECK_THROWS_WITH(m.truncate(3), "llama2c::model::truncate: n = 3 exceeds size() = 2");
  CHECK(m.size() == 2);

  const std::vector<std::int32_t> parents{-1, 1};
  CHECK_THROWS_WITH(m.append_tree(good, parents, logits),
                    "llama2c::model::append_tree: parents[1] = 1 must be -1 or in [0, 1)");
  CHECK_THROWS_AS(m.commit(std::vector<std::int32_t>{0}), std::logic_error);
  const std::vector<std::int32_t> ok_parents{-1, -1};
  m.append_tree(good, ok_parents, logits);
  CHECK_THROWS_WITH(m.commit(std::vector<std::int32_t>{0, 1}),
                    "llama2c::model::commit: path[1] = 1 has parent -1, expected 0 (a chain from "
                    "a root)");
  CHECK_THROWS_WITH(m.commit(std::vector<std::int32_t>{2}),
                    "llama2c::model::commit: path[0] = 2 is not a node of the pending tree of 2");
  CHECK(m.tree_pending());
  m.commit(std::vector<std::int32_t>{1});
  CHECK(m.size() == 3);

  CHECK_THROWS_WITH(llama2c::model(m.shared_weights(), {.layers = 5}),
                    "llama2c::model: model_options::layers = 5 exceeds n_layers = 4 (0 means all)");
  CHECK_THROWS_WITH(llama2c::layer_skip_draft(m, 0),
                    "llama2c::layer_skip_draft: layers = 0 outside [1, n_layers = 4]");
  CHECK_THROWS_AS(llama2c::layer_skip_draft(m, 5), std::invalid_argument);
}

TEST_CASE("llama2c model: batched append matches token-by-token append") {
  const auto w = llama2c::load_checkpoint(checkpoint_path);
  llama2c::model a(w), b(w);
  std::vector<token_id> toks(reference_ids.begin(), reference_ids.begin() + 64);
  toks.insert(toks.begin(), 1);
  std::vector<float> batched(toks.size() * 512);
  a.append(toks, batched);
  const auto single = greedy_logits_single(b, toks);
  const float d = max_abs_diff(batched, single);
  std::cout << "llama2c: max |batched - token-by-token| logit difference over " << toks.size()
            << " positions: " << d << "\n";
  CHECK(d < 1e-4f);
  // Greedy choices agree.
  for (std::size_t i = 0; i < toks.size(); ++i)
    CHECK(specdec::argmax(std::span(batched).subspan(i * 512, 512)) ==
          specdec::argmax(std::span(single).subspan(i * 512, 512)));
}

TEST_CASE("llama2c model: the conformance kit passes on the model and its layer-skip drafts") {
  const auto w = llama2c::load_checkpoint(checkpoint_path);
  testing::conformance_options o;
  o.tokens.assign(reference_ids.begin(), reference_ids.begin() + 24);
  o.tokens.insert(o.tokens.begin(), 1);
  o.tolerance = 1e-4f;
  SECTION("full model, from a factory") {
    const auto rep = testing::run_all([&] { return llama2c::model(w); }, o);
    std::cout << "llama2c conformance (full model):\n" << rep.message;
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 10);  // a-e, f1-f3 (trees), h (hidden rows) and i (prefill)
    CHECK(rep.checks.back().name == "prefill");
  }
  SECTION("full model, one instance") {
    llama2c::model m(w);
    const auto rep = testing::run_all(m, o);
    INFO(rep.message);
    CHECK(rep.ok);
  }
  for (std::size_t layers = 1; layers <= 3; ++layers) {
    DYNAMIC_SECTION("layer-skip draft with " << layers << " layers") {
      const llama2c::model target(w);
      const auto rep = testing::run_all([&] { return llama2c::layer_skip_draft(target, layers); }, o);
      INFO(rep.message);
      CHECK(rep.ok);
    }
  }
}

TEST_CASE("llama2c model: tree append and commit match evaluating each path alone") {
  const auto w = llama2c::load_checkpoint(checkpoint_path);
  const std::vector<token_id> context{1, 303, 281, 269, 435};
  // 12 nodes, three roots, depths up to 4.
  const std::vector<std::int32_t> parents{-1, 0, 1, 1, -1, 4, 2, 6, 3, -1, 9, 9};
  const std::vector<token_id> tokens{447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260};
  const std::size_t n = tokens.size(), v = 512;
  llama2c::model m(w);
  std::vector<float> ctx_logits(context.size() * v), tree_logits(n * v);
  m.append(context, ctx_logits);
  m.append_tree(tokens, parents, tree_logits);
  CHECK(m.size() == context.size());
  float worst = 0;
  for (std::size_t node = 0; node < n; ++node) {
    std::vector<token_id> path;
    for (auto i = static_cast<std::int32_t>(node); i >= 0; i = parents[static_cast<std::size_t>(i)])
      path.insert(path.begin(), tokens[static_cast<std::size_t>(i)]);
    llama2c::model ref(w);
    std::vector<token_id> all = context;
    all.insert(all.end(), path.begin(), path.end());
    std::vector<float> logits(all.size() * v);
    ref.append(all, logits);
    const float d = max_abs_diff(std::span(logits).last(v), std::span(tree_logits).subspan(node * v, v));
    worst = std::max(worst, d);
    CHECK(d < 1e-4f);
  }
  std::cout << "llama2c: max |tree - path| logit difference: " << worst << "\n";

  // Commit the deepest path 0-1-2-6-7 and continue: equals appending that path.
  const std::vector<std::int32_t> path{0, 1, 2, 6, 7};
  m.commit(path);
  CHECK(m.size() == context.size() + path.size());
  const std::vector<token_id> next{441, 260};
  std::vector<float> after(2 * v);
  m.append(next, after);
  llama2c::model ref(w);
  std::vector<token_id> all = context;
  for (const auto i : path) all.push_back(tokens[static_cast<std::size_t>(i)]);
  all.insert(all.end(), next.begin(), next.end());
  std::vector<float> expected(all.size() * v);
  ref.append(all, expected);
  CHECK(max_abs_diff(std::span(expected).last(2 * v), after) < 1e-4f);

  // A tree wider than the remaining positions still fits: rows grow, positions are checked.
  llama2c::model near_end(w);
  std::vector<token_id> fill(120, 300);
  std::vector<float> fill_logits(fill.size() * v);
  near_end.append(fill, fill_logits);
  std::vector<token_id> wide(16, 301);
  std::vector<std::int32_t> roots(16, -1);
  std::vector<float> wide_logits(16 * v);
  near_end.append_tree(wide, roots, wide_logits);
  near_end.commit(std::vector<std::int32_t>{3});
  CHECK(near_end.size() == 121);
  std::vector<std::int32_t> chain(8);
  for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = static_cast<std::int32_t>(i) - 1;
  std::vector<float> chain_logits(8 * v);
  CHECK_THROWS_AS(near_end.append_tree(std::span(wide).first(8), chain, chain_logits),
                  std::length_error);
  CHECK(near_end.size() == 121);
}

TEST_CASE("llama2c layer_skip_draft: shares the target's weights and agrees with it partly") {
  const llama2c::model target(checkpoint_path);
  const auto before = target.shared_weights().use_count();
  llama2c::layer_skip_draft draft(target, 2);
  CHECK(draft.shared_weights() == target.shared_weights());
  CHECK(target.shared_weights().use_count() == before + 1);
  CHECK(draft.layers() == 2);
  CHECK(draft.max_size() == target.max_size());

  // Greedy agreement with the full model over the reference continuation.
  const auto w = target.shared_weights();
  std::vector<token_id> toks{1};
  toks.insert(toks.end(), reference_ids.begin(), reference_ids.end() - 1);
  llama2c::model full(w);
  std::vector<float> ref(toks.size() * 512);
  full.append(toks, ref);
  for (std::size_t layers = 1; layers <= 4; ++layers) {
    llama2c::layer_skip_draft d(w, layers);
    std::vector<float> got(toks.size() * 512);
    d.append(toks, got);
    std::size_t agree = 0;
    for (std::size_t i = 0; i < toks.size(); ++i)
      agree += specdec::argmax(std::span(got).subspan(i * 512, 512)) ==
               specdec::argmax(std::span(ref).subspan(i * 512, 512));
    std::cout << "llama2c: layer-skip draft with " << layers << " of 4 layers agrees with the "
              << "full model's greedy choice at " << agree << " / " << toks.size()
              << " positions\n";
    if (layers == 4) CHECK(agree == toks.size());
  }
}

TEST_CASE("llama2c model: append, tree and commit allocate nothing once warmed up") {
  llama2c::model m(checkpoint_path);
  const std::vector<token_id> ctx{1, 303, 281, 269, 435, 447, 328, 446};
  const std::vector<std::int32_t> parents{-1, 0, 0, 1, 1, 2, 2, -1};
  const std::vector<std::int32_t> path{0, 1, 3};
  std::vector<float> logits(ctx.size() * 512);
  const auto round = [&] {
    m.truncate(0);
    m.append(ctx, logits);
    m.append(std::span(ctx).first(1), std::span(logits).first(512));
    m.append_tree(ctx, parents, logits);
    m.commit(path);
    m.prefill(ctx);
  };
  // Warm-up: whatever is sized on first use is sized here. (The constructor already sized the
  // caches for max_size() and the scratch for 8 rows, the most one call of `round` feeds.)
  round();
  // An Eigen heap allocation now throws (eigen_assert above); std::vector growth is not caught.
  Eigen::internal::set_is_malloc_allowed(false);
  bool threw = false;
  std::string error;
  try {
    round();
  } catch (const std::exception& e) {
    threw = true;
    error = e.what();
  }
  Eigen::internal::set_is_malloc_allowed(true);
  INFO("the warmed-up round threw: " << error);
  CHECK_FALSE(threw);
  CHECK(m.size() == ctx.size() + 1 + path.size() + ctx.size());
}

TEST_CASE("llama2c model: prefill leaves the context append leaves, without logits") {
  const auto w = llama2c::load_checkpoint(checkpoint_path);
  llama2c::model fed(w), appended(w);
  const std::span<const token_id> ids(reference_ids);
  const std::size_t v = fed.vocab_size(), h = 20, n = 32;
  std::vector<float> rows(h * v), a(v * (n - h)), b(v * (n - h));
  fed.prefill(ids.first(h));
  appended.append(ids.first(h), rows);
  CHECK(fed.size() == h);
  fed.append(ids.subspan(h, n - h), a);
  appended.append(ids.subspan(h, n - h), b);
  CHECK(a == b);  // the same K/V in the cache: the same bits afterwards
  SECTION("with hidden rows: the rows append writes") {
    fed.truncate(0);
    appended.truncate(0);
    std::vector<float> hp(h * fed.hidden_size()), ha(h * fed.hidden_size());
    fed.prefill(ids.first(h), hp);
    appended.append(ids.first(h), rows, ha);
    CHECK(hp == ha);
    CHECK_THROWS_WITH(fed.prefill(ids.first(2), std::span(hp).first(3)),
                      Catch::StartsWith("llama2c::model::prefill: hidden.size() = 3"));
  }
  SECTION("bad input is refused naming prefill, nothing changes") {
    const std::vector<token_id> bad{1, 100000};
    CHECK_THROWS_AS(fed.prefill(bad), std::out_of_range);
    CHECK_THROWS_WITH(fed.prefill(std::span<const token_id>()),
                      "llama2c::model::prefill: tokens is empty");
    CHECK(fed.size() == n);
  }
}
