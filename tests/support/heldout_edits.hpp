// tests/support/heldout_edits.hpp - the held-out prompt-lookup set: input-grounded edits made by
// a program from documents kept outside the project (../shared/seeds: articles and a paper on
// speculative decoding, English prose with tables and formulas, unlike the code and design
// documents of bench/data/ngram*), so that the lookup's defaults are checked on text nobody
// tuned them on. Nothing of the documents enters the repository: the edits are made when the
// test or benchmark runs.
//
// Three edits per document, each an (original, instruction, edited) triple:
// - rename: the most frequent word of 7 or more letters, reversed, everywhere;
// - delete: every line that contains a digit;
// - number: every line that is not blank prefixed with "[i] ".
// (Lines, not paragraphs: two of the five documents have no blank line at all.)
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace specdec::test {

/// One edit: the prompt is `original + "\n\n" + instruction`, the output `edited`.
struct text_edit {
  std::string name;  ///< <document stem>.<rename|delete|number>
  std::string original, instruction, edited;
};

namespace detail {

inline bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// The most frequent maximal run of 7+ ASCII letters (ties: the smallest), or "" if none.
inline std::string most_frequent_word(const std::string& text) {
  std::map<std::string, std::size_t> count;
  for (std::size_t i = 0; i < text.size();) {
    if (!is_letter(text[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && is_letter(text[j])) ++j;
    if (j - i >= 7) ++count[text.substr(i, j - i)];
    i = j;
  }
  std::string best;
  std::size_t most = 0;
  for (const auto& [word, n] : count)
    if (n > most) best = word, most = n;
  return best;
}

// The lines of `text` without their '\n' (a last line without one included).
inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

inline bool blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

inline std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p + "\n";
  return out;
}

// `text` encoded line by line by `encode`, lines joined by the token `encode` gives "\n" last: a
// tokenizer whose merge loop is quadratic in the text's length (llama2.c's) encodes a 42 kB
// document this way in milliseconds instead of minutes. Each line gets what `encode` adds to
// any text (the Llama tokenizer's dummy prefix), so a line's first word is encoded as after a
// space.
template <class Encode>
auto encode_by_line(const Encode& encode, const std::string& text) {
  const auto newline = encode("\n").back();
  decltype(encode(text)) out;
  for (std::size_t b = 0; b <= text.size();) {
    const std::size_t e = std::min(text.find('\n', b), text.size());
    const auto line = encode(text.substr(b, e - b));
    out.insert(out.end(), line.begin(), line.end());
    if (e < text.size()) out.push_back(newline);
    b = e + 1;
  }
  return out;
}

}  // namespace detail

/// The three edits of one document (fewer if it has no word of 7+ letters or no line with a
/// digit). The original is the document with every line ended by '\n'.
inline std::vector<text_edit> heldout_edits(const std::string& stem, const std::string& document) {
  const auto all_lines = detail::lines(document);
  const std::string original = detail::join(all_lines);
  std::vector<text_edit> edits;

  if (const std::string word = detail::most_frequent_word(original); !word.empty()) {
    const std::string renamed(word.rbegin(), word.rend());
    std::string edited;
    for (std::size_t i = 0; i < original.size();) {
      const bool starts = (i == 0 || !detail::is_letter(original[i - 1])) &&
                          original.compare(i, word.size(), word) == 0 &&
                          (i + word.size() == original.size() ||
                           !detail::is_letter(original[i + word.size()]));
      if (starts) {
        edited += renamed;
        i += word.size();
      } else {
        edited += original[i++];
      }
    }
    edits.push_back({stem + ".rename", original,
                     "Rename '" + word + "' to '" + renamed + "' everywhere.", edited});
  }

  std::vector<std::string> kept;
  for (const auto& l : all_lines)
    if (std::none_of(l.begin(), l.end(), [](char c) { return c >= '0' && c <= '9'; }))
      kept.push_back(l);
  if (kept.size() < all_lines.size())
    edits.push_back({stem + ".delete", original, "Delete every line that contains a digit.",
                     detail::join(kept)});

  std::vector<std::string> numbered;
  std::size_t n = 0;
  for (const auto& l : all_lines)
    numbered.push_back(detail::blank(l) ? l : "[" + std::to_string(++n) + "] " + l);
  edits.push_back({stem + ".number", original,
                   "Number the lines that are not blank: [1], [2], ...", detail::join(numbered)});
  return edits;
}

/// The edits of every *.txt document in `dir` (README.md and other files ignored), sorted by
/// name; empty if `dir` does not exist.
inline std::vector<text_edit> heldout_set(const std::filesystem::path& dir) {
  std::vector<text_edit> all;
  if (!std::filesystem::is_directory(dir)) return all;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    for (auto& e : heldout_edits(f.stem().string(), s.str())) all.push_back(std::move(e));
  }
  return all;
}

/// heldout_set(dir) as token streams, each a Task{name, prompt, output}: prompt = original +
/// "\n\n" + instruction, output = edited, both encoded line by line by `encode` (text -> token
/// vector).
template <class Task, class Encode>
std::vector<Task> heldout_tasks(const std::filesystem::path& dir, const Encode& encode) {
  std::vector<Task> tasks;
  for (const auto& e : heldout_set(dir)) {
    const std::string prompt = e.original + "\n\n" + e.instruction;
    tasks.push_back(Task{e.name, detail::encode_by_line(encode, prompt),
                         detail::encode_by_line(encode, e.edited)});
  }
  return tasks;
}

}  // namespace specdec::test
