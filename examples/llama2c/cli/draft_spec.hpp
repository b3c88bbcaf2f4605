// llama2c/cli/draft_spec.hpp - what specdec-generate's --draft accepts: none, layers:L,
// model:PATH, ngram, ngram+layers:L / ngram+model:PATH, heads:FILE. Parsing only; nothing is
// loaded (a layer count above the model's is refused when the model is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cli/parse_number.hpp"

namespace specdec::llama2c {

/// Who drafts: nothing (plain decoding), the target's first L layers, a second checkpoint, n-gram
/// prompt lookup, or draft heads.
enum class draft_kind { none, layers, model, ngram, heads };

/// A --draft value, read.
struct draft_spec {
  draft_kind kind = draft_kind::none;
  std::size_t layers = 0;    ///< L of layers:L
  std::string model;         ///< PATH of model:PATH
  std::string heads;         ///< FILE of heads:FILE
  bool ngram_first = false;  ///< ngram+...: prompt lookup first, the model when it has nothing
};

/// Reads `text`. Throws std::invalid_argument saying what is wrong with it (the caller names the
/// flag and the value).
inline draft_spec parse_draft_spec(const std::string& text) {
  draft_spec s;
  s.ngram_first = text.starts_with("ngram+");
  const std::string d = text.substr(s.ngram_first ? 6 : 0);
  if (s.ngram_first && !d.starts_with("layers:") && !d.starts_with("model:"))
    throw std::invalid_argument("ngram+ takes layers:L or model:PATH after it");
  if (d == "none") {
    s.kind = draft_kind::none;
  } else if (d == "ngram") {
    s.kind = draft_kind::ngram;
  } else if (d.starts_with("layers:")) {
    s.kind = draft_kind::layers;
    const std::string l = d.substr(7);
    std::uint64_t v = 0;
    if (specdec::cli::parse_number(l, v) != specdec::cli::number_read::ok)
      throw std::invalid_argument("L in layers:L is not a whole number");
    if (v == 0) throw std::invalid_argument("L in layers:L must be >= 1");
    s.layers = static_cast<std::size_t>(v);
  } else if (d.starts_with("heads:")) {
    s.kind = draft_kind::heads;
    s.heads = d.substr(6);
    if (s.heads.empty()) throw std::invalid_argument("the path in heads:FILE is empty");
  } else if (d.starts_with("model:")) {
    s.kind = draft_kind::model;
    s.model = d.substr(6);
    if (s.model.empty()) throw std::invalid_argument("the path in model:PATH is empty");
  } else {
    throw std::invalid_argument("is not none, layers:L, model:PATH, ngram or heads:FILE");
  }
  return s;
}

}  // namespace specdec::llama2c
