// llama2c/cli/find_tokenizer.hpp - the tokenizer of a checkpoint given without --tokenizer: the
// file beside it, as llama2.c's checkpoints come (stories260K.bin with stories260K.tok512.bin;
// stories15M.bin with tokenizer.bin).
#pragma once

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace specdec::llama2c {

/// The tokenizer beside `model`: the one file named `<stem>.tok*.bin` in its folder (MODEL's
/// name without its extension, e.g. aidreams260K.tok512.bin for aidreams260K.bin), else
/// `tokenizer.bin` in that folder. Throws std::runtime_error naming what was tried when neither
/// exists, or listing the candidates when several `<stem>.tok*.bin` do. Reads the folder only.
inline std::string find_tokenizer(const std::string& model) {
  namespace fs = std::filesystem;
  const fs::path path(model);
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.stem().string() + ".tok";
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > prefix.size() + 4 && name.starts_with(prefix) && name.ends_with(".bin") &&
        it->is_regular_file(ec))
      found.push_back((folder / name).string());
  }
  std::sort(found.begin(), found.end());
  if (found.size() > 1) {
    std::string list;
    for (const auto& f : found) list += (list.empty() ? "" : ", ") + f;
    throw std::runtime_error("--tokenizer: several tokenizers beside the model '" + model +
                             "' (" + list + "): give one with --tokenizer PATH");
  }
  if (found.size() == 1) return found.front();
  const fs::path beside = folder / "tokenizer.bin";
  if (fs::is_regular_file(beside, ec)) return beside.string();
  throw std::runtime_error("--tokenizer: no tokenizer found for the model '" + model +
                           "'; tried " + (folder / (prefix + "*.bin")).string() + " and " +
                           beside.string() + ": give one with --tokenizer PATH");
}

}  // namespace specdec::llama2c
