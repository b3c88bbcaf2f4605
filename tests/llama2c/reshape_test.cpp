// Real-model tests of the checkpoint reshaper (llama2c/tools/reshape.hpp): aidreams260K reshaped at test
// time to modest shapes computes IN's logits and greedy output, --keep-layers equals a layer-skip
// draft, and every refused input names its problem and leaves OUT untouched.
#include "common.hpp"  // Catch's runner, main() (skips without the checkpoint), the model paths

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <llama2c/tools/checkpoint_writer.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/tools/reshape.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/math/sample.hpp>

namespace fs = std::filesystem;
using namespace specdec;
using namespace llama2c_test;
using Catch::Matchers::Contains;

namespace {

// The largest absolute logit difference allowed between IN and a reshape of it. IN's logits on
// these prompts reach |12.2|. A reshape computes the same sums in exact arithmetic; in float it
// rounds differently: alpha = sqrt(D / d), sqrt(r) and the gains / alpha are rounded to float, the
// attention scale is sqrt(r) / sqrt(hs') instead of 1 / sqrt(hs), and the kernels reduce longer
// (zero-padded) rows in a different order. Each is a few ulps per operation; measured over the 4
// layers, softmax and classifier: 4.8e-6 to 8.6e-6 on the shapes below (the test prints them;
// 3.6e-6 for the 110M shape on the reference text), the size of the engine's own batched vs
// token-by-token difference (5.2e-6, docs/llama2c.md). The bound leaves more than 10x above that
// and still catches every wrong construction tried: head dimensions placed contiguously (RoPE
// frequencies wrong) moves logits by 10.6, a missing sqrt(r) on wq by 1.8, and scaling only the
// norm gains instead of the residual stream (RMSNorm's eps then weighs D / d times more) by 3e-3
// (dim 128) to 3e-2 (110M).
constexpr float logit_tolerance = 1e-4f;

// A scratch folder for the test's checkpoints, removed at exit.
struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("specdec_reshape_test_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

temp_dir& scratch() {
  static temp_dir dir;
  return dir;
}

// The prompts the logits are compared on: run.c's reference text (BOS + 96 ids), a stretch of it
// from the middle (other positions, no BOS), and pseudo-random tokens over the whole vocabulary
// filling the context (every RoPE position of seq_len 128).
std::vector<std::vector<token_id>> prompts() {
  std::vector<token_id> reference{1};
  reference.insert(reference.end(), reference_ids.begin(), reference_ids.end());
  std::vector<token_id> middle(reference_ids.begin() + 40, reference_ids.begin() + 72);
  std::vector<token_id> noise;
  std::uint32_t state = 12345;
  for (int i = 0; i < 128; ++i) {
    state = state * 1664525u + 1013904223u;
    noise.push_back(static_cast<token_id>((state >> 8) % 512));
  }
  return {reference, middle, noise};
}

std::vector<float> logits_of(llama2c::model& m, std::span<const token_id> tokens) {
  m.truncate(0);
  std::vector<float> out(tokens.size() * m.vocab_size());
  m.append(tokens, out);
  return out;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Greedy decoding, one token per append: the prompt, then `steps` argmax choices.
std::vector<token_id> greedy(llama2c::model& m, std::span<const token_id> prompt,
                             std::size_t steps) {
  m.truncate(0);
  std::vector<float> logits(prompt.size() * m.vocab_size());
  m.append(prompt, logits);
  std::vector<token_id> out;
  std::span<const float> last = std::span(logits).last(m.vocab_size());
  for (std::size_t i = 0; i < steps; ++i) {
    out.push_back(specdec::argmax(last));
    m.append(std::span(out).last(1), std::span(logits).first(m.vocab_size()));
    last = std::span(logits).first(m.vocab_size());
  }
  return out;
}

std::vector<char> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// aidreams260K with a separate classifier (a copy of its embedding): the same function, so a
// reshape of it tests the unshared-classifier path against the same reference logits.
fs::path unshared_copy() {
  static const fs::path path = [] {
    const llama2c::weights in(checkpoint_path);
    llama2c::config c = in.cfg();
    c.shared_classifier = false;
    const fs::path p = scratch().path / "unshared.bin";
    const auto copy = [&](llama2c::tensor_kind kind, std::size_t l, std::span<float> o) {
      using enum llama2c::tensor_kind;
      const auto w = in.tensor(kind == classifier ? token_embedding : kind, l);
      std::copy(w.begin(), w.end(), o.begin());
    };
    llama2c::write_checkpoint(p, c, copy);
    return p;
  }();
  return path;
}

struct shape_case {
  const char* name;
  llama2c::reshape_options options;
  bool unshared = false;  // reshape unshared_copy() instead of the checkpoint
};

// Modest shapes (2-6 MB each): head size x2 with more layers and a longer context; grouped-query
// kv heads (8 query heads on 4 kv heads) at the same head size and depth; head size x3 (a ratio
// that is not a power of two); and the unshared-classifier path.
const shape_case shapes[] = {
    {"dim 128, hidden 384, 6 layers, 4 heads (head size 32), seq_len 256",
     {.dim = 128, .hidden_dim = 384, .n_layers = 6, .n_heads = 4, .n_kv_heads = 4, .seq_len = 256}},
    {"dim 128, hidden 172, 4 layers, 8 heads on 4 kv heads (head size 16)",
     {.dim = 128, .hidden_dim = 172, .n_layers = 4, .n_heads = 8, .n_kv_heads = 4}},
    {"dim 192, hidden 256, 5 layers, 4 heads (head size 48)",
     {.dim = 192, .hidden_dim = 256, .n_layers = 5, .n_heads = 4, .n_kv_heads = 4}},
    {"separate classifier: dim 128, hidden 256, 7 layers, 8 heads on 4 kv heads (head size 16)",
     {.dim = 128, .hidden_dim = 256, .n_layers = 7, .n_heads = 8, .n_kv_heads = 4},
     true},
};

// The reshape of `s`, written once per run.
fs::path reshaped(const shape_case& s) {
  static std::map<const shape_case*, fs::path> done;
  if (auto it = done.find(&s); it != done.end()) return it->second;
  const fs::path out = scratch().path / ("shape" + std::to_string(done.size()) + ".bin");
  llama2c::reshape_checkpoint(s.unshared ? unshared_copy() : checkpoint_path, out, s.options);
  return done[&s] = out;
}

}  // namespace

TEST_CASE("llama2c reshape: named shapes and the configuration") {
  const llama2c::weights in(checkpoint_path);
  const llama2c::config big = llama2c::reshaped_config(in.cfg(), llama2c::shape_named("110M"));
  CHECK(big.dim == 768);
  CHECK(big.hidden_dim == 2048);
  CHECK(big.n_layers == 12);
  CHECK(big.n_heads == 12);
  CHECK(big.n_kv_heads == 12);
  CHECK(big.vocab_size == 512);
  CHECK(big.seq_len == 128);  // kept
  CHECK(big.shared_classifier);
  CHECK(llama2c::reshaped_config(in.cfg(), llama2c::shape_named("15M")).head_size() == 48);
  CHECK(llama2c::reshaped_config(in.cfg(), llama2c::shape_named("42M")).dim == 512);
  CHECK(llama2c::reshaped_config(in.cfg(), {.seq_len = 512}).seq_len == 512);
  REQUIRE_THROWS_WITH(llama2c::shape_named("7B"),
                      Contains("unknown shape '7B' (known: 15M, 42M, 110M)"));
  // IN's 4 layers spread over 12: 0, 3, 6, 9 (a draft of OUT's first k layers holds about k / 3
  // of them); over 4, in place.
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < 4; ++i) at.push_back(llama2c::reshaped_layer(i, 4, 12));
  CHECK(at == std::vector<std::size_t>{0, 3, 6, 9});
  for (std::size_t i = 0; i < 4; ++i) CHECK(llama2c::reshaped_layer(i, 4, 4) == i);
}

TEST_CASE("llama2c reshape: the reshaped model's logits equal IN's") {
  llama2c::model small(checkpoint_path, {.threads = 1});
  const auto ps = prompts();
  for (const shape_case& s : shapes) {
    SECTION(s.name) {
      const auto result_path = reshaped(s);
      llama2c::model big(result_path, {.threads = 1});
      const llama2c::config want = llama2c::reshaped_config(small.cfg(), s.options);
      CHECK(big.cfg().dim == want.dim);
      CHECK(big.cfg().n_layers == want.n_layers);
      CHECK(big.cfg().n_kv_heads == want.n_kv_heads);
      CHECK(big.cfg().seq_len == want.seq_len);
      CHECK(big.cfg().shared_classifier == !s.unshared);
      float worst = 0, largest = 0;
      for (const auto& p : ps) {
        const auto a = logits_of(small, p);
        const auto b = logits_of(big, p);
        worst = std::max(worst, max_abs_diff(a, b));
        for (float v : a) largest = std::max(largest, std::fabs(v));
      }
      std::cout << "reshape to " << s.name << ": largest |logit difference| " << worst
                << " (largest |logit| " << largest << ", bound " << logit_tolerance << ")\n";
      CHECK(worst <= logit_tolerance);
    }
  }
}

TEST_CASE("llama2c reshape: a grouped-query IN into a smaller group copies its kv heads") {
  // IN = aidreams260K reshaped to 8 query heads on 4 kv heads (group 2, as stories260K); OUT =
  // 8 on 8 (group 1, as the 110M shape's 12 on 12) and 12 on 12: each kv head twice (12 on 12:
  // query heads 8..11 and kv heads 8..11 are zero, as in any widening).
  llama2c::model small(checkpoint_path, {.threads = 1});
  const fs::path gqa = reshaped(shapes[1]);
  const auto ps = prompts();
  for (const llama2c::reshape_options& o :
       {llama2c::reshape_options{.n_heads = 8, .n_kv_heads = 8},
        llama2c::reshape_options{.dim = 192, .n_heads = 12, .n_kv_heads = 12}}) {
    const fs::path mha = scratch().path / ("mha" + std::to_string(o.n_heads) + ".bin");
    llama2c::reshape_checkpoint(gqa, mha, o);
    llama2c::model big(mha, {.threads = 1});
    CHECK(big.cfg().n_kv_heads == o.n_kv_heads);
    float worst = 0;
    for (const auto& p : ps) worst = std::max(worst, max_abs_diff(logits_of(small, p), logits_of(big, p)));
    std::cout << "grouped-query reshape to " << o.n_heads << " on " << o.n_kv_heads
              << " heads: largest |logit difference| " << worst << "\n";
    CHECK(worst <= logit_tolerance);
  }
}

TEST_CASE("llama2c reshape: greedy output equals IN's token for token over 96 tokens") {
  llama2c::model small(checkpoint_path, {.threads = 1});
  const llama2c::tokenizer tok(tokenizer_path);
  std::vector<std::vector<token_id>> starts;
  for (const char* text : {"I dreamed", "The river", "Once"}) starts.push_back(tok.encode(text));
  for (const shape_case& s : shapes) {
    SECTION(s.name) {
      llama2c::model big(reshaped(s), {.threads = 1});
      for (const auto& p : starts) {
        const auto want = greedy(small, p, 96);
        CHECK(greedy(big, p, 96) == want);
      }
    }
  }
  // IN's own greedy run is run.c's reference (the comparison above is against the real model).
  const auto ref = greedy(small, starts[0], 90);
  CHECK(std::equal(ref.begin(), ref.end(), reference_ids.begin() + 6));
}

TEST_CASE("llama2c keep_layers: the first L layers equal a layer-skip draft of IN") {
  llama2c::model target(checkpoint_path, {.threads = 1});
  const auto ps = prompts();
  for (std::size_t L = 1; L <= 4; ++L) {
    const fs::path out = scratch().path / ("keep" + std::to_string(L) + ".bin");
    const auto r = llama2c::keep_layers(checkpoint_path, out, L);
    CHECK(r.shape.n_layers == L);
    CHECK(r.bytes == fs::file_size(out));
    llama2c::model kept(out, {.threads = 1});
    llama2c::layer_skip_draft skip(target, L);
    for (const auto& p : ps) {
      // The same floats through the same kernels: bit for bit.
      const auto a = logits_of(kept, p);
      const auto b = logits_of(skip, p);
      CHECK(max_abs_diff(a, b) == 0.0f);
    }
    fs::remove(out);
  }
}

TEST_CASE("llama2c reshape: refused inputs name the problem and never leave a file under OUT") {
  const fs::path dir = scratch().path / "refused";
  fs::create_directories(dir);
  const fs::path out = dir / "out.bin";
  const auto no_out = [&] {
    CHECK_FALSE(fs::exists(out));
    // No temporary file left behind either.
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 0);
  };
  const auto reshape = [&](llama2c::reshape_options o) {
    llama2c::reshape_checkpoint(checkpoint_path, out, o);
  };

  SECTION("a shape that cannot hold IN") {
    REQUIRE_THROWS_WITH(reshape({.dim = 32}), Contains("dim = 32 is smaller than IN's dim = 64"));
    REQUIRE_THROWS_WITH(reshape({.hidden_dim = 100}),
                        Contains("hidden_dim = 100 is smaller than IN's hidden_dim = 172"));
    REQUIRE_THROWS_WITH(reshape({.n_layers = 3}),
                        Contains("n_layers = 3 is fewer than IN's n_layers = 4"));
    REQUIRE_THROWS_WITH(reshape({.dim = 128, .n_heads = 2}),
                        Contains("n_heads = 2 is fewer than IN's n_heads = 4"));
    REQUIRE_THROWS_WITH(reshape({.dim = 128, .n_heads = 8, .n_kv_heads = 2}),
                        Contains("n_kv_heads = 2 is fewer than IN's n_kv_heads = 4"));
    REQUIRE_THROWS_WITH(reshape({.seq_len = 64}),
                        Contains("seq_len = 64 is shorter than IN's seq_len = 128"));
    REQUIRE_THROWS_WITH(reshape({.dim = 100, .n_heads = 8}),
                        Contains("dim = 100 is not divisible by n_heads = 8"));
    REQUIRE_THROWS_WITH(reshape({.dim = 72, .n_heads = 8}),
                        Contains("head size dim / n_heads = 9 is odd"));
    REQUIRE_THROWS_WITH(reshape({.dim = 96, .n_heads = 4}),
                        Contains("head size dim / n_heads = 24 is not a multiple of IN's head "
                                 "size = 16"));
    REQUIRE_THROWS_WITH(reshape({.dim = 96, .n_heads = 6, .n_kv_heads = 4}),
                        Contains("n_heads = 6 is not a multiple of n_kv_heads = 4"));
    REQUIRE_THROWS_AS(reshape({.dim = 32}), std::invalid_argument);
    no_out();
  }

  SECTION("a group size smaller than IN's that does not divide it") {
    // IN with 16 query heads on 4 kv heads (group 4): 24 on 8 (group 3) would split a group.
    const fs::path gqa = scratch().path / "group4.bin";
    llama2c::reshape_checkpoint(checkpoint_path, gqa,
                                {.dim = 256, .n_heads = 16, .n_kv_heads = 4});
    REQUIRE_THROWS_WITH(
        llama2c::reshape_checkpoint(gqa, out, {.dim = 384, .n_heads = 24, .n_kv_heads = 8}),
        Contains("group size n_heads / n_kv_heads = 3 is smaller than IN's group size = 4 and "
                 "does not divide it"));
    no_out();
  }

  SECTION("--keep-layers outside [1, n_layers]") {
    REQUIRE_THROWS_WITH(llama2c::keep_layers(checkpoint_path, out, 0),
                        Contains("layers = 0 outside [1, IN's n_layers = 4]"));
    REQUIRE_THROWS_WITH(llama2c::keep_layers(checkpoint_path, out, 5),
                        Contains("layers = 5 outside [1, IN's n_layers = 4]"));
    REQUIRE_THROWS_AS(llama2c::keep_layers(checkpoint_path, out, 5), std::invalid_argument);
    no_out();
  }

  SECTION("a missing, truncated or corrupted IN") {
    const fs::path bad_dir = scratch().path / "bad_in";
    fs::create_directories(bad_dir);
    auto bytes = file_bytes(checkpoint_path);
    const auto write = [&](const char* name, std::span<const char> b) {
      const fs::path p = bad_dir / name;
      std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
      return p;
    };
    const fs::path truncated = write("truncated.bin", std::span(bytes).first(bytes.size() - 4));
    std::vector<char> corrupt = bytes;
    const std::int32_t odd_heads = 3;  // dim 64 on 3 heads
    std::copy_n(reinterpret_cast<const char*>(&odd_heads), 4, corrupt.begin() + 12);
    const fs::path corrupted = write("corrupted.bin", corrupt);
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(bad_dir / "none.bin", out, {.dim = 128}),
                        Contains("file not found"));
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(truncated, out, {.dim = 128}),
                        Contains("truncated: file has"));
    REQUIRE_THROWS_WITH(llama2c::keep_layers(truncated, out, 2), Contains("truncated: file has"));
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(corrupted, out, {.dim = 128}),
                        Contains("bad header: dim = 64 is not divisible by n_heads = 3"));
    REQUIRE_THROWS_AS(llama2c::reshape_checkpoint(truncated, out, {.dim = 128}),
                      std::runtime_error);
    no_out();
  }

  SECTION("an unwritable OUT") {
    REQUIRE_THROWS_WITH(
        llama2c::reshape_checkpoint(checkpoint_path, dir / "no" / "such" / "out.bin", {.dim = 128}),
        Contains("does not exist"));
    const fs::path folder = dir / "a_folder";
    fs::create_directories(folder);
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(checkpoint_path, folder, {.dim = 128}),
                        Contains("is a folder"));
    fs::remove(folder);
    no_out();
  }

  SECTION("OUT is IN") {
    const fs::path in_dir = scratch().path / "same";
    fs::create_directories(in_dir);
    const fs::path in = in_dir / "in.bin";
    fs::copy_file(checkpoint_path, in, fs::copy_options::overwrite_existing);
    const auto before = file_bytes(in);
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(in, in, {.dim = 128}),
                        Contains("is the same file as IN"));
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(in, in_dir / "." / "in.bin", {.dim = 128}),
                        Contains("is the same file as IN"));
    fs::create_hard_link(in, in_dir / "link.bin");
    REQUIRE_THROWS_WITH(llama2c::keep_layers(in, in_dir / "link.bin", 2),
                        Contains("is the same file as IN"));
    fs::create_symlink(in, in_dir / "symlink.bin");
    REQUIRE_THROWS_WITH(llama2c::reshape_checkpoint(in_dir / "symlink.bin", in, {.dim = 128}),
                        Contains("is the same file as IN"));
    CHECK(file_bytes(in) == before);
    CHECK(std::distance(fs::directory_iterator(in_dir), fs::directory_iterator()) == 3);
  }

  SECTION("a failed write leaves an existing OUT as it was") {
    std::ofstream(out) << "previous contents";
    REQUIRE_THROWS(reshape({.dim = 32}));
    const auto fail_midway = [](llama2c::tensor_kind kind, std::size_t l, std::span<float>) {
      if (kind == llama2c::tensor_kind::w1 && l == 2) throw std::runtime_error("source failed");
    };
    const llama2c::weights in(checkpoint_path);
    REQUIRE_THROWS_WITH(llama2c::write_checkpoint(out, in.cfg(), fail_midway),
                        Contains("source failed"));
    const auto after = file_bytes(out);
    CHECK(std::string(after.begin(), after.end()) == "previous contents");
    fs::remove(out);
    REQUIRE_THROWS(llama2c::write_checkpoint(out, in.cfg(), fail_midway));
    no_out();
  }
}
