// tests/docs/snippet_prelude.hpp - what the docs' code fragments use without defining it: the
// engine the adapters wrap (my_engine.hpp, small but real, so that adapter_doc_test.cpp can run
// the kit on docs/adapter.md's adapter) and the names the fragments use (declared, never defined:
// the fragments are compiled, not linked). See extract_snippets.sh.
#pragma once
#include <cstddef>
#include <cstdio>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

#include "my_engine.hpp"

namespace snippet {
struct model {  // a LanguageModel, for fragments that need one
  std::size_t vocab_size() const;
  std::size_t size() const;
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits);
  void truncate(std::size_t n);
};
struct engine_t {};
struct batch_engine {  // a BatchLanguageModel, for fragments that serve several sequences
  std::size_t vocab_size() const;
  specdec::sequence_id create_sequence();
  void release_sequence(specdec::sequence_id id);
  std::size_t size(specdec::sequence_id id) const;
  void truncate(specdec::sequence_id id, std::size_t n);
  void score(std::span<const specdec::batch_entry> entries);
};
}  // namespace snippet

extern my_engine::session session;  // a session of the engine
extern snippet::model target;
extern snippet::engine_t engine;
snippet::model my_adapter(snippet::engine_t&);
extern std::vector<specdec::token_id> history, committed, prompt;
