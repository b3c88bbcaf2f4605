// quickstart.cpp - the first specdec program to read.
//
// It shows the whole library on a model small enough to live in this file:
//   1. an adapter: a character-level n-gram language model that models specdec::LanguageModel,
//   2. speculative decoding with a smaller draft model, greedy and sampled, beside plain decoding,
//   3. prompt lookup (the n-gram drafter) on a prompt that the answer copies from.
// The toy model is given a cost per call, as a memory-bound transformer has (it reads all its
// weights once per call, whether the call carries one token or several), so the seconds printed
// show what speculation buys; the target calls and tokens do not depend on that cost.
// Build and run: cmake --workflow --preset quickstart && build/release/examples/quickstart
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

// A text to learn from. Tokens are bytes, so the vocabulary is the 128 ASCII characters.
static const char* const corpus =
    "The keeper of the lighthouse wrote down the weather every evening. The wind came from the "
    "west, the sea was grey, and the lamp turned slowly above the rocks. Ships passed in the dark "
    "and the keeper counted them, one light after another, until the morning came.\n"
    "The lamp needed oil, and the oil came by boat on the first day of every month. The boatman "
    "brought letters too, and the keeper read them twice: once in the kitchen, once in the tower. "
    "The letters spoke of the town, of the market, of the children who had grown tall.\n"
    "In winter the storms were long. The keeper trimmed the wick, cleaned the glass and climbed "
    "the stairs at every change of the watch. The light must not go out, the keeper said, not "
    "for one night, not for one hour, because somewhere a ship is looking for the shore.\n";

// Step 1: the adapter. A model needs vocab_size(), size(), append(tokens, logits) that writes
// one row of logits per token, and truncate(n) that rolls the context back. That is all.
// call_cost stands in for a transformer's weight read: a fixed wait per append() call, the same
// for one token or a block (the n-gram arithmetic itself is microseconds per token).
class char_ngram_model {
 public:
  char_ngram_model(const std::string& text, int order, std::chrono::microseconds call_cost)
      : order_(order), call_cost_(call_cost) {
    for (std::size_t i = 0; i < text.size(); ++i)      // count every (history, next char) pair
      for (int n = 0; n < order_ && n <= static_cast<int>(i); ++n)
        count(text.substr(i - n, n))[static_cast<unsigned char>(text[i]) & 127]++;
  }

  std::size_t vocab_size() const { return 128; }
  std::size_t size() const { return context_.size(); }

  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    // Validate before touching the context: errors leave it unchanged.
    if (logits.size() != tokens.size() * 128)
      throw std::invalid_argument("char_ngram_model: logits.size() must be tokens.size() * 128");
    for (auto t : tokens)
      if (t < 0 || t >= 128) throw std::out_of_range("char_ngram_model: token outside [0, 128)");
    wait(call_cost_);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      context_.push_back(static_cast<char>(tokens[i]));
      next_logits(logits.subspan(i * 128, 128));
    }
  }
  void truncate(std::size_t n) { context_.resize(n); }

 private:
  // A spin, not a sleep: sleep_for overshoots short waits by tens of microseconds.
  static void wait(std::chrono::microseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
  }

  // log P(c | the last order-1 characters), smoothed by recursive interpolation with shorter
  // histories: P_n(c) = (count(h c) + 2 P_{n-1}(c)) / (count(h) + 2), P_{-1} uniform.
  void next_logits(std::span<float> out) const {
    std::vector<double> p(128, 1.0 / 128);
    for (int n = 0; n < order_ && n <= static_cast<int>(context_.size()); ++n) {
      auto it = counts_.find(context_.substr(context_.size() - n, n));
      if (it == counts_.end()) break;
      double total = 0;
      for (double c : it->second) total += c;
      for (int c = 0; c < 128; ++c) p[c] = (it->second[c] + 2.0 * p[c]) / (total + 2.0);
    }
    for (int c = 0; c < 128; ++c) out[c] = static_cast<float>(std::log(p[c]));
  }
  std::vector<double>& count(const std::string& h) {
    auto& row = counts_[h];
    row.resize(128);
    return row;
  }

  int order_;
  std::chrono::microseconds call_cost_;
  std::unordered_map<std::string, std::vector<double>> counts_;
  std::string context_;  // the "KV cache": what the model has seen
};
static_assert(specdec::LanguageModel<char_ngram_model>);

static std::vector<specdec::token_id> encode(const std::string& s) { return {s.begin(), s.end()}; }
static std::string decode(const std::vector<specdec::token_id>& t) { return {t.begin(), t.end()}; }

static void show(const char* title, const specdec::generate_result& r) {
  std::printf("--- %s\n%s\n%s\n", title, decode(r.tokens).c_str(), r.stats.summary().c_str());
}

static int run() {
  // The target is a 10-gram model costing 1 ms per call; the draft, a 3-gram model of the same
  // text costing a tenth of that (a draft model is typically 10-50x smaller than its target).
  using std::chrono::microseconds;
  char_ngram_model target(corpus, 10, microseconds(1000)), draft_model(corpus, 3, microseconds(100));

  // Before trusting an adapter, the conformance kit checks it against the LanguageModel contract
  // (here on a copy without the wait: each check empties the model and appends to it).
  char_ngram_model probe(corpus, 10, microseconds(0));
  const auto report = specdec::testing::run_all(probe);
  std::printf("conformance kit: %s\n\n", report.ok ? "the adapter passes every check" : report.message.c_str());
  if (!report.ok) return 1;

  // Step 2: a decoder = a target + a drafter. model_drafter drafts with another LanguageModel.
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);

  specdec::generate_options options;
  options.max_new_tokens = 200;
  options.draft_length = 4;           // K draft tokens per target call
  options.sampling.temperature = 0;   // greedy
  const auto prompt = encode("In winter");

  const auto plain = specdec::generate_autoregressive(target, prompt, options);
  const auto fast = decoder.generate(prompt, options);
  show("plain greedy decoding", plain);
  show("speculative greedy decoding (3-gram draft, K = 4)", fast);
  std::printf("identical output: %s\n\n", plain.tokens == fast.tokens ? "yes" : "NO");

  // Sampling: not the same tokens as plain sampling, but the same distribution, and the same
  // tokens again for the same seed.
  options.sampling = {.temperature = 0.8f, .top_p = 0.95f, .seed = 42};
  show("speculative sampling (temperature 0.8, top-p 0.95, seed 42)",
       decoder.generate(prompt, options));

  // Step 3: prompt lookup. When the answer copies from the prompt, an n-gram index over the
  // context drafts long spans for free: no draft model at all.
  specdec::ngram_drafter lookup({.min_ngram = 2, .max_ngram = 5, .max_draft = 16});
  specdec::speculative_decoder lookup_decoder(target, lookup);
  options.sampling.temperature = 0;
  options.draft_length = 16;
  options.max_new_tokens = 120;
  const auto quoted = encode(
      "Quote: The keeper trimmed the wick, cleaned the glass and climbed the stairs at every "
      "change of the watch. The light must not go out.\nAnswer: In winter the storms were long.");
  show("plain decoding of an input-grounded prompt",
       specdec::generate_autoregressive(target, quoted, options));
  show("prompt lookup (n-gram drafter, K = 16)", lookup_decoder.generate(quoted, options));

  // The seconds above follow from the costs given to the two models (1 ms and 0.1 ms per call):
  // speculation pays when a call of K + 1 tokens costs about what a call of one does. On real
  // models, docs/results.md measures it (examples/llama2c, examples/llamacpp).
  std::printf("Note: the models cost 1 ms (target) and 0.1 ms (draft) per call, whatever its length:\n"
              "the seconds follow from that; the target calls do not.\n");
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {  // specdec reports bad input with exceptions
    std::fprintf(stderr, "%s: %s\n", "quickstart", e.what());
    return 1;
  }
}
