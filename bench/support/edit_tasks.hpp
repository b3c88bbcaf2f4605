// bench/support/edit_tasks.hpp - the input-grounded edit tasks of bench/data/ngram and
// bench/data/ngram_prose, as token streams: prompt = original + "\n\n" + instruction, output =
// the edited text; on byte tokens (one token per byte) or through any encoder (the Llama 2
// tokenizer for the subword set). Shared by ngram_rules_bench, ngram_cache_bench and
// ngram_replay_bench.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/types.hpp"

namespace specdec::bench {

using tokens = std::vector<token_id>;

struct edit_task {
  std::string name;
  tokens prompt, output;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every `<name>.original.txt` in `dirs` with its instruction and edited text, sorted by name.
inline std::vector<edit_task> load_edit_tasks(
    const std::vector<std::filesystem::path>& dirs,
    const std::function<tokens(const std::string&)>& encode) {
  std::vector<edit_task> tasks;
  const std::string suffix = ".original.txt";
  for (const auto& dir : dirs)
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (!file.ends_with(suffix)) continue;
      const std::string name = file.substr(0, file.size() - suffix.size());
      tasks.push_back(
          {name, encode(slurp(dir / file) + "\n\n" + slurp(dir / (name + ".instruction.txt"))),
           encode(slurp(dir / (name + ".edited.txt")))});
    }
  std::sort(tasks.begin(), tasks.end(),
            [](const edit_task& a, const edit_task& b) { return a.name < b.name; });
  return tasks;
}

/// One token per byte.
inline tokens byte_tokens(const std::string& s) {
  tokens t;
  for (const unsigned char c : s) t.push_back(static_cast<token_id>(c));
  return t;
}

}  // namespace specdec::bench
