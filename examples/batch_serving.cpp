// batch_serving.cpp - serving several sequences with one model call per step: a tiny engine that
// models specdec::BatchLanguageModel, and a batch_decoder in which each sequence has its own
// drafter, options and callback; one sequence joins between steps, each prints whether its
// tokens equal decoding it alone, and a finished one leaves (its engine sequence released).
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

// The engine: next-token logits depend on the last token only (a fixed 16 x 16 table), and each
// sequence's "KV cache" is its token list. One score() call serves every entry.
class bigram_engine {
 public:
  bigram_engine() {
    for (int a = 0; a < 16; ++a)
      for (int b = 0; b < 16; ++b)
        table_[a][b] = 3.0f * std::cos(0.7f * static_cast<float>(a * b + a + 3 * b)) +
                       (b == (5 * a + 3) % 16 ? 4.0f : 0.0f);
  }
  std::size_t vocab_size() const { return 16; }
  specdec::sequence_id create_sequence() {
    seqs_[next_];
    return next_++;
  }
  void release_sequence(specdec::sequence_id id) { seqs_.erase(known(id)); }
  std::size_t size(specdec::sequence_id id) const { return seqs_.at(id).size(); }
  void truncate(specdec::sequence_id id, std::size_t n) { known(id)->second.resize(n); }
  void score(std::span<const specdec::batch_entry> batch) {
    for (const auto& e : batch) {  // refuse bad input before changing anything
      known(e.sequence);
      if (!e.parents.empty()) throw std::invalid_argument("bigram_engine: no trees");
      for (auto t : e.tokens)
        if (t < 0 || t >= 16) throw std::out_of_range("bigram_engine: token outside [0, 16)");
    }
    ++calls_;
    for (const auto& e : batch)
      for (std::size_t i = 0; i < e.tokens.size(); ++i) {
        seqs_[e.sequence].push_back(e.tokens[i]);
        for (int b = 0; b < 16; ++b) e.logits[i * 16 + static_cast<std::size_t>(b)] = table_[e.tokens[i]][b];
      }
  }
  std::size_t calls() const { return calls_; }

 private:
  std::map<specdec::sequence_id, std::vector<specdec::token_id>>::iterator known(specdec::sequence_id id) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) throw std::invalid_argument("bigram_engine: unknown sequence");
    return it;
  }
  float table_[16][16];
  std::map<specdec::sequence_id, std::vector<specdec::token_id>> seqs_;
  specdec::sequence_id next_ = 1;
  std::size_t calls_ = 0;
};
static_assert(specdec::BatchLanguageModel<bigram_engine>);

static int run() {
  bigram_engine engine;
  specdec::batch_decoder<bigram_engine, specdec::ngram_drafter> batch(engine);
  std::vector<specdec::ngram_drafter> drafters(3, specdec::ngram_drafter({.min_ngram = 1, .max_ngram = 3}));
  std::vector<std::vector<specdec::token_id>> prompts{{1, 5, 9, 1, 5}, {2, 13, 4}, {7}};
  std::vector<specdec::generate_options> options(3);
  options[0].sampling.temperature = 0.0f;  // greedy
  options[1].sampling = {.temperature = 0.8f, .seed = 7};
  options[2].sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = 8};
  for (auto& o : options) {
    o.max_new_tokens = 32;
    o.draft_length = 4;
  }
  options[1].on_token = [](specdec::token_id t) {  // stream one sequence as it decodes
    std::printf("[%d]", t);
    return true;
  };

  const auto a = batch.add(prompts[0], options[0], drafters[0]);
  const auto b = batch.add(prompts[1], options[1], drafters[1]);
  batch.step();
  batch.step();
  const auto c = batch.add(prompts[2], options[2], drafters[2]);  // joins between steps
  while (batch.running_count() > 0) batch.step();
  std::printf("\n");

  // Each sequence against decoding it alone with the single-sequence decoder.
  const specdec::sequence_id ids[] = {a, b, c};
  for (std::size_t i = 0; i < 3; ++i) {
    bigram_engine alone_engine;
    specdec::sequence_view view(alone_engine, alone_engine.create_sequence());
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 3});
    specdec::speculative_decoder decoder(view, lookup);
    auto o = options[i];
    o.on_token = nullptr;
    const bool same = decoder.generate(prompts[i], o).tokens == batch.result(ids[i]).tokens;
    std::printf("sequence %zu: %zu tokens, %.2f per step, same as alone: %s\n", i,
                batch.result(ids[i]).tokens.size(), batch.stats(ids[i]).tokens_per_target_call(),
                same ? "yes" : "no");
  }
  batch.remove(b);  // leaves: its engine sequence is released
  const auto& s = batch.stats();
  std::printf("%zu steps, %zu engine calls after the prompts, %zu tokens\n", s.steps, s.target_calls,
              s.generated_tokens);
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batch_serving: %s\n", e.what());
    return 1;
  }
}
