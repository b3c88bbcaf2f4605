// Hostile input to the llama2.c engine (issue 10), on small generated files, so it runs without
// ../shared/models: the tokenizer never allocates from a size the file claims, refuses a
// vocabulary without BOS/EOS and one of another size, prints bad bytes in hex; the model bounds
// the trees it accepts and scores a tree at a cost of nodes x depth, matching each path alone.
//
// The program replaces the global operator new to record the largest single allocation, so an
// allocation bomb is a failed check rather than an out-of-memory kill. Under ASan and TSan,
// whose runtimes define operator new themselves, it does not (the bound checks then pass
// trivially; the fuzz targets' 1 GB malloc limit covers those builds).

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <llama2c/tools/checkpoint_writer.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <new>
#include <specdec/math/rng.hpp>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPECDEC_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPECDEC_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef SPECDEC_COUNT_ALLOCATIONS
#define SPECDEC_COUNT_ALLOCATIONS 1
#endif

namespace {
std::atomic<std::size_t> largest_allocation{0};
#if SPECDEC_COUNT_ALLOCATIONS
void* counted_alloc(std::size_t n) {
  std::size_t seen = largest_allocation.load();
  while (n > seen && !largest_allocation.compare_exchange_weak(seen, n)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#else
}  // namespace
#endif

namespace fs = std::filesystem;
using namespace specdec;
namespace l2 = specdec::llama2c;

namespace {

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("specdec_hostile_test_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A tokenizer.bin: max_token_length, then (score, length, bytes) per entry; `claimed` overrides
// an entry's length field when >= 0.
struct tok_entry {
  std::string piece;
  float score = 0;
  std::int64_t claimed = -1;
};
fs::path write_tokenizer(const fs::path& p, std::int32_t max_len, const std::vector<tok_entry>& e) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&max_len), 4);
  for (const tok_entry& t : e) {
    const auto len = static_cast<std::int32_t>(
        t.claimed >= 0 ? t.claimed : static_cast<std::int64_t>(t.piece.size()));
    out.write(reinterpret_cast<const char*>(&t.score), 4);
    out.write(reinterpret_cast<const char*>(&len), 4);
    out.write(t.piece.data(), static_cast<std::streamsize>(t.piece.size()));
  }
  return p;
}

std::string err(const fs::path& p, const std::string& what) {
  return "llama2c tokenizer '" + p.string() + "': " + what;
}

// A small random checkpoint (dim 16, 4 heads over 2 kv heads, 2 layers, vocab 32).
std::shared_ptr<const l2::weights> tiny_weights(const fs::path& dir) {
  l2::config c;
  c.dim = 16;
  c.hidden_dim = 24;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 32;
  c.seq_len = 64;
  const fs::path p = dir / "tiny.bin";
  specdec::rng g(7);
  l2::write_checkpoint(p, c, [&](l2::tensor_kind, std::size_t, std::span<float> out) {
    for (float& x : out) x = static_cast<float>(g.uniform_open() - 0.5);
  });
  return l2::load_checkpoint(p);
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("llama2c tokenizer: sizes the file claims are checked before anything is allocated") {
  temp_dir tmp;
  SECTION("max_token_length = 2^31 - 1 loads, and encode allocates for the text only") {
    // Issue 10: every encode() reserved 2 * max_token_length + 3 bytes (4 GiB).
    const fs::path p = write_tokenizer(tmp.path / "huge_max.bin", 2147483647,
                                       {{"<unk>"}, {"<s>"}, {"</s>"}, {" "}, {"a"}, {" a", 1.0f}});
    const l2::tokenizer tok(p);
    largest_allocation = 0;
    CHECK(tok.encode("aaa") == std::vector<token_id>{1, 5, 4, 4});
    CHECK(largest_allocation.load() < 65536);  // the stream buffer, not 2 GiB
  }
  SECTION("a token length near 2^31 in a 79-byte file is refused without allocating it") {
    // Issue 10: a 2 GiB string was allocated before the loader found the file too short.
    std::vector<tok_entry> e{{"<unk>"}, {"<s>"}, {"</s>"}, {std::string(31, 'x'), 0, 2147483000}};
    const fs::path p = write_tokenizer(tmp.path / "bomb.bin", 2147483647, e);
    REQUIRE(fs::file_size(p) == 79);
    largest_allocation = 0;
    CHECK_THROWS_WITH(l2::tokenizer(p),
                      err(p,
                          "truncated inside token 3: its length is 2147483000 but the file "
                          "has 31 byte(s) left"));
    CHECK(largest_allocation.load() < 65536);  // the stream buffer, not 2 GiB
  }
  SECTION("a length beyond max_token_length, a torn entry and a missing header") {
    const fs::path a = write_tokenizer(tmp.path / "long.bin", 2, {{"abc"}});
    CHECK_THROWS_WITH(l2::tokenizer(a),
                      err(a, "token 0 has length 3 outside [0, max_token_length = 2]"));
    const fs::path b = tmp.path / "torn.bin";
    {
      std::ofstream out(b, std::ios::binary);
      const std::int32_t max_len = 4;
      out.write(reinterpret_cast<const char*>(&max_len), 4);
      out.write("\0\0\0\0\1", 5);
    }
    CHECK_THROWS_WITH(l2::tokenizer(b),
                      err(b,
                          "truncated at token 0: 5 byte(s) left, an entry needs at least 8 "
                          "(score, length)"));
    const fs::path c = tmp.path / "empty.bin";
    std::ofstream(c, std::ios::binary).put('\1');
    CHECK_THROWS_WITH(l2::tokenizer(c),
                      err(c, "truncated: no max_token_length header (file has 1 bytes)"));
  }
}

TEST_CASE("llama2c tokenizer: a vocabulary must hold BOS and EOS and match the model's") {
  temp_dir tmp;
  SECTION("1 and 2 tokens are refused (BOS = 1 and EOS = 2 would be outside)") {
    const fs::path one = write_tokenizer(tmp.path / "one.bin", 4, {{"a"}});
    CHECK_THROWS_WITH(l2::tokenizer(one),
                      err(one,
                          "has 1 token(s); a vocabulary needs at least 3 (ids 0 = <unk>, 1 "
                          "= BOS, 2 = EOS)"));
    const fs::path two = write_tokenizer(tmp.path / "two.bin", 4, {{"a"}, {"b"}});
    CHECK_THROWS_WITH(l2::tokenizer(two), err(two,
                                              "has 2 token(s); a vocabulary needs at least "
                                              "3 (ids 0 = <unk>, 1 = BOS, 2 = EOS)"));
    const fs::path three = write_tokenizer(tmp.path / "three.bin", 4, {{"a"}, {"b"}, {"c"}});
    const l2::tokenizer tok(three);
    for (const token_id t : tok.encode("", {.bos = true, .eos = true}))
      CHECK(static_cast<std::size_t>(t) < tok.vocab_size());
  }
  SECTION("a tokenizer for another vocabulary is refused, naming both sizes") {
    // Issue 10: a 512-token model read the first 512 entries of the 32000-token Llama 2 file.
    const fs::path p =
        write_tokenizer(tmp.path / "five.bin", 4, {{"a"}, {"b"}, {"c"}, {"d"}, {"e"}});
    CHECK_THROWS_WITH(l2::tokenizer(p, 3),
                      err(p,
                          "the tokenizer has 5 tokens but the model's vocabulary has 3 (a "
                          "tokenizer for another model)"));
    CHECK_THROWS_WITH(l2::tokenizer(p, 6),
                      err(p,
                          "the tokenizer has 5 tokens but the model's vocabulary has 6 (a "
                          "tokenizer for another model)"));
    const l2::tokenizer tok(p, 5);
    CHECK_NOTHROW(l2::check_vocab(tok, 5));
    CHECK_THROWS_WITH(l2::check_vocab(tok, 512),
                      "llama2c: the tokenizer has 5 tokens but the model's vocabulary has 512; "
                      "use the model's own tokenizer");
  }
}

TEST_CASE("llama2c tokenizer: a byte without a byte token is named in hex") {
  temp_dir tmp;
  const fs::path p =
      write_tokenizer(tmp.path / "small.bin", 8, {{"<unk>"}, {"<s>"}, {"</s>"}, {" "}});
  const l2::tokenizer tok(p);
  CHECK_THROWS_WITH(tok.encode("2"),
                    "llama2c::tokenizer::encode: byte 0x32 has no byte token in "
                    "a vocabulary of 4");
  CHECK_THROWS_WITH(tok.encode("\xfe"),
                    "llama2c::tokenizer::encode: byte 0xFE has no byte token "
                    "in a vocabulary of 4");
}

TEST_CASE("llama2c model: trees are bounded and cost nodes x depth, not nodes squared") {
  temp_dir tmp;
  const auto w = tiny_weights(tmp.path);
  l2::model m(w, {.threads = 1});
  const std::size_t v = m.vocab_size();
  const std::vector<token_id> context{1, 5, 9};
  std::vector<float> ctx_logits(context.size() * v);
  m.append(context, ctx_logits);

  SECTION("more than max_tree_nodes nodes are refused before anything changes") {
    // Issue 10: --tree 512x512 asked for a 69 GB mask and died with a bare std::bad_alloc.
    const std::size_t n = l2::model::max_tree_nodes + 1;
    std::vector<token_id> tokens(n, 3);
    std::vector<std::int32_t> parents(n, -1);
    std::vector<float> logits(n * v);
    CHECK_THROWS_WITH(m.append_tree(tokens, parents, logits),
                      "llama2c::model::append_tree: a tree of 4097 nodes exceeds the engine's "
                      "bound of max_tree_nodes = 4096");
    CHECK(m.size() == 3);
    CHECK_FALSE(m.tree_pending());
  }
  SECTION("a tree at the bound runs, and its memory is far below nodes squared") {
    const std::size_t n = l2::model::max_tree_nodes;  // 64 roots with 63 children each
    std::vector<token_id> tokens(n);
    std::vector<std::int32_t> parents(n);
    for (std::size_t i = 0; i < n; ++i) {
      tokens[i] = static_cast<token_id>(i % v);
      parents[i] = i < 64 ? -1 : static_cast<std::int32_t>((i - 64) / 63);
    }
    std::vector<float> logits(n * v);
    largest_allocation = 0;
    m.append_tree(tokens, parents, logits);
    CHECK(largest_allocation.load() < n * n / 4);  // the old mask alone was n * n bytes
    for (const float x : logits) REQUIRE(std::isfinite(x));
    const std::vector<std::int32_t> path{5, static_cast<std::int32_t>(64 + 5 * 63 + 2)};
    m.commit(path);
    CHECK(m.size() == 5);
  }
  SECTION("every node's logits equal evaluating its path alone") {
    // A chain, a fan and a deep branch mixed: parents[i] < i in any order of depths.
    const std::vector<std::int32_t> parents{-1, 0, 0, 1, -1, 3, 2, 5, 4, 7, 7, 1};
    const std::vector<token_id> tokens{4, 8, 15, 16, 23, 2, 6, 11, 30, 1, 0, 31};
    const std::size_t n = tokens.size();
    std::vector<float> tree_logits(n * v);
    m.append_tree(tokens, parents, tree_logits);
    float worst = 0;
    for (std::size_t node = 0; node < n; ++node) {
      std::vector<token_id> path;
      for (auto i = static_cast<std::int32_t>(node); i >= 0;
           i = parents[static_cast<std::size_t>(i)])
        path.insert(path.begin(), tokens[static_cast<std::size_t>(i)]);
      l2::model alone(w, {.threads = 1});
      std::vector<token_id> all = context;
      all.insert(all.end(), path.begin(), path.end());
      std::vector<float> logits(all.size() * v);
      alone.append(all, logits);
      worst =
          std::max(worst, max_abs_diff(std::span<const float>(logits).last(v),
                                       std::span<const float>(tree_logits).subspan(node * v, v)));
    }
    CHECK(worst < 1e-4f);
  }
}
