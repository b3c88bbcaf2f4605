// fuzz/make_seeds.cpp - writes the seed corpora of the fuzz targets into DIR/<target>/: small
// checkpoints and tokenizers generated here (never copies of real models), each prefixed with
// the mode byte its target reads first, and a few operation scripts for the others.
// Usage: fuzz_seeds DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <llama2c/tools/checkpoint_writer.hpp>
#include <llama2c/engine/heads_file.hpp>
#include <specdec/math/rng.hpp>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace l2 = specdec::llama2c;

namespace {

void write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string tiny_checkpoint(const fs::path& tmp, bool shared) {
  l2::config c;
  c.dim = 4;
  c.hidden_dim = 6;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 5;
  c.seq_len = 3;
  c.shared_classifier = shared;
  specdec::rng g(1);
  l2::write_checkpoint(tmp, c, [&](l2::tensor_kind, std::size_t, std::span<float> out) {
    for (float& x : out) x = static_cast<float>(g.uniform_open() - 0.5);
  });
  std::string bytes = read(tmp);
  fs::remove(tmp);
  return bytes;
}

std::string tokenizer_file(const std::vector<std::string>& pieces, std::int32_t max_len) {
  std::string f(reinterpret_cast<const char*>(&max_len), 4);
  float score = 0;
  for (const std::string& p : pieces) {
    const auto len = static_cast<std::int32_t>(p.size());
    f.append(reinterpret_cast<const char*>(&score), 4);
    f.append(reinterpret_cast<const char*>(&len), 4);
    f += p;
    score -= 1;
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds DIR\n";
    return 2;
  }
  const fs::path dir = argv[1];
  const fs::path tmp = dir / "tmp_checkpoint.bin";
  fs::create_directories(dir);

  const std::string shared = tiny_checkpoint(tmp, true), unshared = tiny_checkpoint(tmp, false);
  write(dir / "checkpoint_fuzz", "raw_shared", std::string(1, '\0') + shared);
  write(dir / "checkpoint_fuzz", "raw_unshared", std::string(1, '\0') + unshared);
  write(dir / "checkpoint_fuzz", "raw_truncated", std::string(1, '\0') + shared.substr(0, 60));
  write(dir / "checkpoint_fuzz", "structured_defaults",
        std::string("\x01\x09\x09\x09\x09\x09\x09\x09\x00", 9));
  write(dir / "checkpoint_fuzz", "structured_edges",
        std::string("\x01\x00\x05\x04\x02\x08\x07\x03\x01\x02", 10));

  const std::vector<std::string> vocab{"<unk>", "<s>", "</s>", " ", "a", "b", " a", "ab", "<0x41>"};
  const std::string tok = tokenizer_file(vocab, 8);
  write(dir / "tokenizer_fuzz", "raw", std::string(1, '\0') + tok);
  write(dir / "tokenizer_fuzz", "raw_vocab_9", std::string("\x02\x09", 2) + tok);
  write(dir / "tokenizer_fuzz", "raw_short", std::string(1, '\0') + tok.substr(0, 30));
  write(dir / "tokenizer_fuzz", "structured",
        std::string("\x01\x06" "ab\x02\x03\x04\x05\x40\x00hello, world", 22));

  // Options bytes, then operations (see ngram_drafter_fuzz.cpp): append, propose, accept, tree.
  write(dir / "ngram_drafter_fuzz", "script",
        std::string("\x02\x02\x08\x00\x00\x05\x03"
                    "\x00\x05\x01\x02\x03\x01\x02\x00\x05\x01\x02\x03\x01\x02\x03\x04\x04\x02"
                    "\x05\x03\x02\x02\x02\x07\x03\x04\x08\x03",
                    35));
  write(
      dir / "ngram_drafter_fuzz", "prompt_only",
      std::string(
          "\x01\x03\x04\x01\x01\x02\x02\x00\x05\x00\x01\x00\x01\x00\x03\x05\x08\x02\x03\x05", 20));

  // The unbounded lookup with a cross-request cache of two documents (mode byte 3).
  write(dir / "ngram_drafter_fuzz", "unbounded_cache",
        std::string("\x02\x00\x08\x00\x00\x05\x02\x03\x00\x00\x02\x06\x00\x01\x02\x00\x01\x02"
                    "\x04\x02\x01\x00\x02\x00\x03\x00\x01\x02\x03\x08"
                    "\x02\x02\x00\x01\x03\x05\x04\x05\x03",
                    39));

  write(dir / "token_tree_fuzz", "branching",
        std::string("\x01\x03\x01\x02\x01\x03\x04\x05\x06\x07", 10));
  write(dir / "token_tree_fuzz", "candidates",
        std::string("\x02\x03\x03\x01\x02\x03\x02\x01\x02\x04", 10));
  write(dir / "token_tree_fuzz", "arrays",
        std::string("\x00\x05\x01\x02\x03\x04\x05\x00\x00\x01\x01\x00", 12));
  // A valid heads file of each kind (mode byte 0), and structured headers (odd mode bytes).
  {
    l2::heads_record m;
    m.hidden = 3;
    m.vocab = 5;
    m.accuracy = specdec::row_matrix::Constant(2, 3, 0.2f);
    for (int k = 0; k < 2; ++k)
      m.medusa.heads.push_back({specdec::row_matrix::Constant(3, 3, 0.1f),
                                specdec::prob_row::Constant(3, 0.2f),
                                specdec::row_matrix::Constant(5, 3, 0.3f)});
    const auto mb = l2::heads_bytes(m);
    write(dir / "heads_fuzz", "medusa", std::string(1, '\0') + std::string(mb.begin(), mb.end()));
    l2::heads_record e;
    e.kind = l2::heads_kind::eagle;
    e.hidden = 2;
    e.vocab = 4;
    e.eagle = {specdec::row_matrix::Constant(3, 4, 0.1f), specdec::prob_row::Constant(3, 0.0f),
               specdec::row_matrix::Constant(2, 3, 0.2f), specdec::prob_row::Constant(2, 0.1f), 1.0f, {}};
    const auto eb = l2::heads_bytes(e);
    write(dir / "heads_fuzz", "eagle", std::string(1, '\0') + std::string(eb.begin(), eb.end()));
    e.eagle.attention.wq = e.eagle.attention.wk = e.eagle.attention.wv =
        specdec::row_matrix::Constant(4, 4, 0.1f);
    e.eagle.attention.wo = specdec::row_matrix::Constant(2, 4, 0.2f);
    e.eagle.attention.heads = 2;  // width 2, rotary
    const auto ab = l2::heads_bytes(e);
    write(dir / "heads_fuzz", "eagle_attention",
          std::string(1, '\0') + std::string(ab.begin(), ab.end()));
    write(dir / "heads_fuzz", "structured", std::string("\x01\x00\x02\x03\x01\x01\x02\x02\x03", 9));
  }
  std::cout << "seeds written to " << dir.string() << "\n";
  return 0;
}
