// tests/llamacpp/llamacpp_heads_test.cpp - draft heads trained by specdec-train-heads on the
// llama2.c checkpoint (train_heads.sh, at test time) drafting for its GGUF conversion, with the
// hidden rows from llama.cpp (hidden_model + hidden_capture): greedy speculative output equals
// plain greedy output token for token (EAGLE-style and Medusa, chains and trees, F32 and Q8_0),
// and specdec-llama --draft heads:FILE does the same end to end and refuses heads of another
// vocabulary or a wider hidden state (exit status 1, a message naming the file).
#include "common.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include <llama2c/engine/heads_file.hpp>
#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/hidden_model.hpp>
#include <specdec/specdec.hpp>

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;
namespace l2 = specdec::llama2c;

namespace {

std::vector<token_id> plain_greedy(const gguf_model& model, std::span<const token_id> prompt,
                                   std::size_t n) {
  context_model m(model, {.n_ctx = 256, .n_threads = 1});
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(m, none);
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  o.draft_length = 0;
  return decoder.generate(prompt, o).tokens;
}

specdec::weight_view view(const specdec::row_matrix& m) { return {m.data(), m.rows(), m.cols()}; }

std::filesystem::path heads_path(const char* name) { return t::gguf_dir / name; }

bool have_heads() {
  for (const char* f : {"eagle.heads", "medusa.heads"})
    if (!std::filesystem::exists(heads_path(f))) {
      WARN("skipped: " << heads_path(f).string() << " not made (the llamacpp.train_heads fixture)");
      return false;
    }
  return true;
}

/// Greedy runs of `drafter` on `capture` for every prompt and shape, each against plain greedy.
template <class Drafter>
void check_greedy(const gguf_model& file, specdec::hidden_capture<hidden_model>& capture,
                  Drafter& drafter) {
  specdec::speculative_decoder decoder(capture, drafter);
  std::size_t accepted = 0;
  for (const auto& prompt : t::prompts) {
    const std::size_t n = 80;
    const auto plain = plain_greedy(file, prompt, n);
    specdec::generate_options o;
    o.max_new_tokens = n;
    o.sampling.temperature = 0.0f;
    for (const std::size_t k : {1u, 4u}) {
      o.draft_length = k;
      o.tree.clear();
      INFO("chain K = " << k);
      const auto r = decoder.generate(prompt, o);
      CHECK(r.tokens == plain);
      accepted += r.stats.accepted_tokens;
    }
    for (const char* shape : {"2x2x1", "3x2x1x1"}) {
      o.tree = specdec::parse_branching(shape);
      INFO("tree " << shape << " in one llama_decode");
      const auto r = decoder.generate(prompt, o);
      CHECK(r.tokens == plain);
      accepted += r.stats.accepted_tokens;
    }
  }
  CHECK(accepted > 0);  // trained heads get drafts accepted: commits are exercised
  WARN("draft tokens accepted over every run: " << accepted);
}

/// Runs a shell command, returns {exit status, stdout and stderr}.
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// A Medusa heads file of one head for hidden width d and vocabulary v (zero weights).
std::string write_medusa(const char* name, std::size_t d, std::size_t v) {
  l2::heads_record r;
  r.kind = l2::heads_kind::medusa;
  r.hidden = d;
  r.vocab = v;
  const auto D = static_cast<Eigen::Index>(d);
  r.medusa.heads.push_back(
      {specdec::row_matrix::Zero(D, D), specdec::row_matrix::Zero(1, D), specdec::row_matrix()});
  const auto path = heads_path(name).string();
  l2::save_heads(path, r);
  return path;
}

}  // namespace

TEST_CASE("heads on hidden_model: greedy output equals plain greedy, EAGLE-style and Medusa") {
  if (!have_heads()) return;
  for (const auto* file : {&t::target(), &t::target_q8()}) {
    const bool f32 = file == &t::target();
    hidden_model target(*file, hidden_options(tree_options(16, {.n_ctx = 256, .n_threads = 1})));
    specdec::hidden_capture<hidden_model> capture(target);
    const gguf_classifier w = load_gguf_classifier(*file);
    SECTION(std::string("EAGLE-style, ") + (f32 ? "F32" : "Q8_0")) {
      auto heads = l2::read_heads(heads_path("eagle.heads"));
      specdec::eagle_drafter drafter(capture, std::move(heads.eagle), view(w.classifier),
                                     view(w.embedding));
      check_greedy(*file, capture, drafter);
    }
    SECTION(std::string("Medusa, ") + (f32 ? "F32" : "Q8_0")) {
      auto heads = l2::read_heads(heads_path("medusa.heads"));
      specdec::medusa_drafter drafter(capture, std::move(heads.medusa), view(w.classifier));
      check_greedy(*file, capture, drafter);
    }
  }
}

TEST_CASE("specdec-llama --draft heads:FILE: identical greedy output, mismatched heads refused") {
  if (!have_heads()) return;
  const std::string bin = SPECDEC_LLAMA_BIN, model = t::path_of("target.gguf");
  for (const char* heads : {"eagle.heads", "medusa.heads"}) {
    INFO(heads);
    const auto [status, out] =
        run(bin + " -m " + model + " --draft heads:" + heads_path(heads).string() +
            " -p 'I dreamed' -n 60 --temp 0 -t 1 -fa off --spec-draft-n-max 4 --compare-plain");
    INFO(out);
    CHECK(status == 0);
    CHECK(out.find("identical output: yes") != std::string::npos);
  }
  {
    const auto [status, out] =
        run(bin + " -m " + model + " --draft heads:" + heads_path("eagle.heads").string() +
            " -p 'I dreamed' -n 30 --temp 0.8 -s 3 -fa off --tree 2x2x1 --json");
    INFO(out);
    CHECK(status == 0);
    CHECK(out.find("\"draft\": \"heads\"") != std::string::npos);
  }
  const auto other_vocab = write_medusa("vocab100.heads", 64, 100);
  auto [status, out] = run(bin + " -m " + model + " --draft heads:" + other_vocab + " -p x");
  CHECK(status == 1);
  CHECK(out.find("heads file '" + other_vocab +
                 "': trained for a vocabulary of 100 tokens, the model has 512") !=
        std::string::npos);
  const auto wider = write_medusa("wide128.heads", 128, 512);
  std::tie(status, out) = run(bin + " -m " + model + " --draft heads:" + wider + " -p x");
  CHECK(status == 1);
  CHECK(out.find("heads file '" + wider + "': trained for hidden width 128, the model's is 64") !=
        std::string::npos);
  std::filesystem::remove(other_vocab);
  std::filesystem::remove(wider);
}
