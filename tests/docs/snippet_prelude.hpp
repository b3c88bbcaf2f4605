// tests/docs/snippet_prelude.hpp - what the docs' code fragments use without defining it: a
// hypothetical engine (declared, never defined: the snippets are compiled, not linked) and the
// variables the fragments name. See extract_snippets.sh.
#pragma once
#include <cstddef>
#include <cstdio>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

namespace my_engine {
struct session {  // an engine's sequence and its KV cache
  std::size_t vocab() const;
  std::size_t tokens_in_cache() const;
  std::size_t capacity() const;
  void forward(const specdec::token_id* tokens, std::size_t n, float* logits);
  void rollback_to(std::size_t n);
};
}  // namespace my_engine

namespace snippet {
struct model {  // a LanguageModel, for fragments that need one
  std::size_t vocab_size() const;
  std::size_t size() const;
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits);
  void truncate(std::size_t n);
};
struct engine_t {};
}  // namespace snippet

extern snippet::model target;
extern snippet::engine_t engine;
snippet::model my_adapter(snippet::engine_t&);
extern std::vector<specdec::token_id> history, committed, prompt;
