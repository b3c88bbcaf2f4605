// llamacpp/adapters/grammar_processor.hpp - a GBNF grammar (llama.cpp's grammar sampler) as a specdec row
// processor: every row of logits the decoders and drafters sample from gets -infinity on the
// tokens the grammar rejects after that row's prefix, so speculative decoding with a grammar
// emits exactly what plain decoding with the same grammar emits (docs/row_processors.md).
//
//   grammar_processor g(target_file, "digits.gbnf");   // throws naming the file if it fails
//   g.start(prompt);                                    // the grammar constrains what follows
//   o.sampling.processor = g;                           // copies share one cache
#pragma once

#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <specdec/types.hpp>

#include "llamacpp/adapters/gguf_model.hpp"

namespace specdec::llamacpp {

/**
 * A specdec::row_processor over llama.cpp's grammar sampler (llama_sampler_init_grammar on the
 * target's vocabulary). For a row whose prefix is prompt + t1..tn it advances the grammar over
 * t1..tn (the prompt is not constrained, as in llama.cpp) and writes -infinity on every token the
 * grammar rejects next; it changes nothing else. A prefix holding a token the grammar rejects
 * (an n-gram draft, say) is unreachable under the grammar: its row is left as it is.
 *
 * Cost of a row: one O(V) grammar apply (llama_sampler_apply over the whole vocabulary, the
 * largest part); a token-by-token comparison of its prefix with the previous row's, O(prefix)
 * integer compares (the processor is handed the whole prefix and must read it to be a function
 * of it); and one grammar accept per token past their common prefix. The grammar states along
 * the last prefix are kept (up to `window` of them), so the accepts of a decoding step's rows
 * are O(drafts), not O(history). A prefix diverging further back than the window is replayed
 * from the start (correct, slower).
 *
 * A prefix after which the grammar admits no token at all (a dead end of the grammar, which
 * only a draft the target rejects can reach when plain decoding never does) throws
 * std::runtime_error: the drafters end their draft there, and the verifiers never process the
 * row past a rejected draft.
 *
 * A copy shares the grammar and its cache with the original (a shared_ptr), so it can be put in
 * sampling_params::processor by value. Deterministic in the prefix. Not thread-safe (neither
 * the original nor its copies). It reads the model's vocabulary: it must not outlive the
 * gguf_model it was made on.
 */
class grammar_processor {
 public:
  /// Grammar states kept along the last prefix: more than a step's deepest draft.
  static constexpr std::size_t window = 256;

  /// Reads GBNF from `path` (root symbol `root`). Throws std::invalid_argument naming the file
  /// when it cannot be read, is empty, or llama.cpp cannot parse it (its log says where).
  grammar_processor(const gguf_model& model, const std::string& path,
                    const std::string& root = "root")
      : s_(std::make_shared<state>(model.vocab(), read_file(path), root, path)) {}

  /// The same from GBNF text; `name` stands for the file in messages.
  static grammar_processor from_text(const gguf_model& model, const std::string& gbnf,
                                     const std::string& name, const std::string& root = "root") {
    return grammar_processor(std::make_shared<state>(model.vocab(), gbnf, root, name));
  }

  /// Every prefix given from now on starts with `prompt`; the grammar constrains the tokens
  /// after it. Call before each generation (the cache restarts).
  void start(std::span<const token_id> prompt) {
    s_->prompt_len = prompt.size();
    s_->path.assign(prompt.begin(), prompt.end());
    s_->states.clear();
    s_->states.push_back(clone(s_->root.get()));
    s_->first = 0;
  }

  /// The row processor: masks `logits` (V floats) for the token after `prefix`. Throws
  /// std::invalid_argument when `prefix` does not start with the prompt given to start(), and
  /// std::runtime_error when the grammar admits no token of the vocabulary after it.
  void operator()(std::span<const token_id> prefix, std::span<float> logits) const {
    state& s = *s_;
    if (logits.size() != s.vocab_size)
      throw std::invalid_argument("grammar_processor: a row of " + std::to_string(logits.size()) +
                                  " logits, the vocabulary has " + std::to_string(s.vocab_size));
    llama_sampler* g = advance_to(prefix);
    if (g == nullptr) return;  // a prefix the grammar rejects: no sampled text reaches it
    s.cells.resize(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i)
      s.cells[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
    llama_token_data_array a{s.cells.data(), s.cells.size(), -1, false};
    llama_sampler_apply(g, &a);
    bool any = false;
    for (std::size_t i = 0; i < a.size; ++i) {
      if (std::isinf(a.data[i].logit) && a.data[i].logit < 0)
        logits[static_cast<std::size_t>(a.data[i].id)] = -std::numeric_limits<float>::infinity();
      else
        any = true;
    }
    if (!any)
      throw std::runtime_error("grammar '" + s.name + "': no token of the vocabulary continues "
                               "the text after " + std::to_string(prefix.size() - s.prompt_len) +
                               " generated tokens");
  }

  /// Whether the grammar accepts `tokens` (generated text, without the prompt) token by token
  /// (a prefix of a sentence of the grammar; an end-of-generation token only where it may end).
  /// Uses its own grammar state, not the cache.
  bool accepts(std::span<const token_id> tokens) const {
    sampler_ptr g = clone(s_->root.get());
    for (const token_id t : tokens) {
      g = next(g.get(), t);
      if (!g) return false;
    }
    return true;
  }

  const std::string& name() const noexcept { return s_->name; }

 private:
  struct sampler_free {
    void operator()(llama_sampler* p) const noexcept { llama_sampler_free(p); }
  };
  using sampler_ptr = std::unique_ptr<llama_sampler, sampler_free>;

  struct state {
    state(const llama_vocab* vocab, const std::string& gbnf, const std::string& root_symbol,
          std::string file)
        : name(std::move(file)), vocab_size(static_cast<std::size_t>(llama_vocab_n_tokens(vocab))) {
      if (gbnf.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::invalid_argument("grammar '" + name + "': empty");
      root.reset(llama_sampler_init_grammar(vocab, gbnf.c_str(), root_symbol.c_str()));
      if (!root)
        throw std::invalid_argument("grammar '" + name + "': llama.cpp cannot parse it as GBNF "
                                    "with root symbol '" + root_symbol + "' (its log says why)");
      states.push_back(clone(root.get()));
    }
    std::string name;
    std::size_t vocab_size;
    sampler_ptr root;                  // the grammar before any token; never advanced
    std::size_t prompt_len = 0;
    std::vector<token_id> path;        // the last prefix seen (prompt included)
    std::deque<sampler_ptr> states;    // states[k]: after path[0, prompt_len + first + k); null = rejected
    std::size_t first = 0;             // generated tokens before states.front()
    std::vector<llama_token_data> cells;
  };

  explicit grammar_processor(std::shared_ptr<state> s) : s_(std::move(s)) {}

  static std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::invalid_argument("grammar '" + path + "': cannot read it");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  static sampler_ptr clone(const llama_sampler* g) {
    if (g == nullptr) return nullptr;
    sampler_ptr c(llama_sampler_clone(g));
    if (!c) throw llama_error("llama_sampler_clone failed (grammar sampler)");
    return c;
  }

  /// The state after `g` and then `t`, or null when the grammar rejects `t` there (llama.cpp
  /// throws, or aborts for an end-of-generation token, when made to accept such a token).
  static sampler_ptr next(const llama_sampler* g, token_id t) {
    if (g == nullptr) return nullptr;
    llama_token_data one{static_cast<llama_token>(t), 0.0f, 0.0f};
    llama_token_data_array a{&one, 1, -1, false};
    llama_sampler_apply(const_cast<llama_sampler*>(g), &a);  // reads the grammar only
    if (std::isinf(one.logit)) return nullptr;
    sampler_ptr c = clone(g);
    try {
      llama_sampler_accept(c.get(), static_cast<llama_token>(t));
    } catch (const std::runtime_error&) {
      return nullptr;
    }
    return c;
  }

  /// The grammar state after `prefix`, kept in the cache; null when the grammar rejects it.
  llama_sampler* advance_to(std::span<const token_id> prefix) const {
    state& s = *s_;
    if (prefix.size() < s.prompt_len ||
        !std::equal(s.path.begin(), s.path.begin() + static_cast<std::ptrdiff_t>(s.prompt_len),
                    prefix.begin()))
      throw std::invalid_argument("grammar_processor: the prefix does not start with the prompt "
                                  "given to start()");
    std::size_t common = s.prompt_len;
    const std::size_t most = std::min(prefix.size(), s.path.size());
    while (common < most && s.path[common] == prefix[common]) ++common;
    std::size_t k = common - s.prompt_len;  // generated tokens shared with the last prefix
    if (k < s.first) {                       // diverges before the window: replay from the start
      s.states.clear();
      s.states.push_back(clone(s.root.get()));
      s.first = 0;
      k = 0;
    }
    s.states.resize(k - s.first + 1);
    s.path.resize(s.prompt_len + k);
    for (std::size_t i = s.path.size(); i < prefix.size(); ++i) {
      s.states.push_back(next(s.states.back().get(), prefix[i]));
      s.path.push_back(prefix[i]);
    }
    while (s.states.size() > window) {
      s.states.pop_front();
      ++s.first;
    }
    return s.states.back().get();
  }

  std::shared_ptr<state> s_;
};

}  // namespace specdec::llamacpp
