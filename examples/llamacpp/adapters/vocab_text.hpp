// llamacpp/adapters/vocab_text.hpp - text to token ids and back with a GGUF model's own vocabulary
// (llama_tokenize, llama_token_to_piece), and its end-of-generation tokens as specdec stop tokens.
#pragma once

#include <llama.h>

#include <cstddef>
#include <string>
#include <vector>

#include <specdec/types.hpp>

#include "llamacpp/adapters/gguf_model.hpp"

namespace specdec::llamacpp {

/// `text` as token ids, with BOS first when the vocabulary adds one (as llama.cpp's programs
/// tokenize a prompt). Throws llama_error when llama_tokenize fails.
inline std::vector<token_id> tokenize(const gguf_model& model, const std::string& text) {
  const bool add_special = true, parse_special = false;
  std::vector<llama_token> ids(text.size() + 2);
  int n = llama_tokenize(model.vocab(), text.data(), static_cast<std::int32_t>(text.size()),
                         ids.data(), static_cast<std::int32_t>(ids.size()), add_special,
                         parse_special);
  if (n < 0) {  // -n: the room it needs
    ids.resize(static_cast<std::size_t>(-n));
    n = llama_tokenize(model.vocab(), text.data(), static_cast<std::int32_t>(text.size()),
                       ids.data(), static_cast<std::int32_t>(ids.size()), add_special,
                       parse_special);
  }
  if (n < 0) throw llama_error("llama_tokenize failed (" + std::to_string(n) + ")");
  ids.resize(static_cast<std::size_t>(n));
  return {ids.begin(), ids.end()};
}

/// The text of token `t` (special tokens give no text). Throws llama_error on failure.
inline std::string piece(const gguf_model& model, token_id t) {
  char buf[256];
  const int n = llama_token_to_piece(model.vocab(), t, buf, sizeof buf, 0, false);
  if (n < 0) throw llama_error("llama_token_to_piece(" + std::to_string(t) + ") failed");
  return std::string(buf, static_cast<std::size_t>(n));
}

/// Every token the vocabulary marks as ending a generation (llama_vocab_is_eog): EOS, EOT, ...
inline std::vector<token_id> end_of_generation_tokens(const gguf_model& model) {
  std::vector<token_id> out;
  for (std::size_t t = 0; t < model.vocab_size(); ++t)
    if (llama_vocab_is_eog(model.vocab(), static_cast<llama_token>(t)))
      out.push_back(static_cast<token_id>(t));
  return out;
}

}  // namespace specdec::llamacpp
