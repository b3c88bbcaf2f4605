// engine_loop.cpp - specdec's pieces without its loop, for engines with their own scheduler.
//
// Part 1 drives speculative_decoder one step at a time (start / step / done), as a scheduler
// that interleaves many sequences would. Part 2 runs the step's public phases on a
// sequence_state and makes the target's call itself (draft_phase -> the engine's append ->
// verify_phase -> commit_phase), as an engine that batches model calls its own way would. Part 3
// goes further and uses only a drafter and a verifier around the engine's own model calls:
// propose -> append -> verify -> truncate -> accept, which is all the decoder does.
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>

// A tiny stand-in for an engine's model: next-token logits depend on the last token only
// (a fixed 16 x 16 table that favours a -> 5a + 3 mod 16), and the "KV cache" is the token list.
class bigram_model {
 public:
  explicit bigram_model(float sharpness) {
    for (int a = 0; a < 16; ++a)
      for (int b = 0; b < 16; ++b)
        table_[a][b] = sharpness * std::cos(0.7f * static_cast<float>(a * b + a + 3 * b)) +
                       (b == (5 * a + 3) % 16 ? 4.0f : 0.0f);
  }
  std::size_t vocab_size() const { return 16; }
  std::size_t size() const { return tokens_.size(); }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    for (auto t : tokens)
      if (t < 0 || t >= 16) throw std::out_of_range("bigram_model: token outside [0, 16)");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens_.push_back(tokens[i]);
      for (int b = 0; b < 16; ++b) logits[i * 16 + static_cast<std::size_t>(b)] = table_[tokens[i]][b];
    }
  }
  void truncate(std::size_t n) { tokens_.resize(n); }

 private:
  float table_[16][16];
  std::vector<specdec::token_id> tokens_;
};

static int run() {
  const std::vector<specdec::token_id> prompt{1, 5, 9, 1, 5};

  // Part 1: step by step. Each step() drafts, verifies and commits, emitting 1..K+1 tokens.
  bigram_model target(3.0f), draft_model(2.0f);
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options options;
  options.max_new_tokens = 24;
  options.draft_length = 3;
  options.sampling = {.temperature = 0.8f, .seed = 7};
  decoder.start(prompt, options);
  std::printf("part 1: step by step\n");
  while (!decoder.done()) {
    const specdec::step_result s = decoder.step();  // a scheduler could run other work here
    std::printf("  step: drafted %zu, accepted %zu, emitted", s.drafted, s.accepted);
    for (auto t : s.tokens) std::printf(" %d", t);
    std::printf("\n");
  }
  std::printf("%s\n", decoder.stats().summary().c_str());

  // Part 2: the step's phases. The engine makes the target's call; specdec lays out the rows
  // (draft_phase), judges them (verify_phase) and keeps what was accepted (commit_phase).
  bigram_model target2(3.0f), draft_model2(2.0f);
  specdec::model_drafter drafter2(draft_model2);
  specdec::sequence_state state;
  specdec::start_sequence(state, target2, drafter2, prompt, options);
  std::printf("part 2: the step's phases\n");
  while (!state.done) {
    specdec::draft_phase(state, drafter2);  // a chain here: score_tokens() = [last, drafts...]
    try {
      target2.append(state.score_tokens(), state.score_logits());  // the engine's own call
      specdec::verify_phase(state);
    } catch (...) {
      specdec::abandon_step(state, target2);  // back to the start of the step
      throw;
    }
    const specdec::step_result s = specdec::commit_phase(state, target2, drafter2);
    std::printf("  step: drafted %zu, accepted %zu, emitted %zu\n", s.drafted, s.accepted,
                s.tokens.size());
  }

  // Part 3: only the pieces. The engine owns the model calls and the history; specdec proposes
  // (ngram_drafter) and judges (verify_rejection, lossless for deterministic drafts too).
  bigram_model model(3.0f);
  specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 3, .max_draft = 4,
                                 .match = specdec::ngram_match_policy::longest_continuation});
  // Greedy here, so the model runs round its 16-token cycle, which prompt lookup drafts from the
  // second lap on; with
  // temperature > 0 the same call is lossless rejection sampling with a one-hot q.
  specdec::sampling_params sp{.temperature = 0.0f};
  specdec::rng gen(7);
  std::vector<specdec::token_id> history = prompt;
  std::vector<float> logits(prompt.size() * 16);
  model.append(std::span(history).first(history.size() - 1), std::span(logits).first((history.size() - 1) * 16));
  std::printf("part 3: the engine's own loop\n ");
  std::size_t calls = 0;
  const std::size_t wanted = 48;
  while (history.size() < prompt.size() + wanted) {
    const std::size_t left = prompt.size() + wanted - history.size();
    const auto drafts = lookup.propose(history, std::min<std::size_t>(4, left - 1));  // may be empty
    std::vector<specdec::token_id> feed{history.back()};
    feed.insert(feed.end(), drafts.begin(), drafts.end());
    logits.resize(feed.size() * 16);
    const std::size_t before = model.size();
    model.append(feed, logits);  // one call scores [last token, drafts...]
    ++calls;
    const specdec::logits_view rows(logits.data(), static_cast<Eigen::Index>(feed.size()), 16);
    const specdec::logits_view one_hot(nullptr, 0, 16);  // deterministic drafts: q is one-hot
    const specdec::verify_result r = specdec::verify_rejection(rows, drafts, one_hot, sp, gen);
    std::vector<specdec::token_id> kept(drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(r.accepted));
    kept.push_back(r.next);
    model.truncate(before + 1 + r.accepted);  // keep [last token, accepted drafts]
    history.insert(history.end(), kept.begin(), kept.end());
    lookup.accept(kept);
    for (auto t : kept) std::printf(" %d", t);
    std::printf(" |");
  }
  std::printf("\n  (one | per model call: %zu tokens in %zu calls)\n", history.size() - prompt.size(),
              calls);
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {  // specdec reports bad input with exceptions
    std::fprintf(stderr, "%s: %s\n", "engine_loop", e.what());
    return 1;
  }
}
