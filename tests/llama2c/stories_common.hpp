// tests/llama2c/stories_common.hpp - what the stories260K test programs share: the checkpoint's
// paths, the prompts they decode, and the program's main(), which skips (exit 77, CTest: skipped)
// when the checkpoint is absent. stories260K is the second real model of the tests: TinyStories
// English, 5 layers, 8 query heads on 4 KV heads (grouped-query attention), seq_len 512, its own
// 512-token vocabulary (../shared/models/README.md).
//
// Each program includes this header once, in its one source file: it defines main() (Catch's
// implementation is tests/catch_runner.cpp's, linked once).
#pragma once

#include <catch2/catch.hpp>

#include "run_or_skip.hpp"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace stories_test {

inline const std::filesystem::path models_dir{SPECDEC_MODELS_DIR};
inline const std::filesystem::path checkpoint_path = models_dir / "stories260K.bin";
inline const std::filesystem::path tokenizer_path = models_dir / "stories260K.tok512.bin";

/// Prompts in the model's own register (children's stories).
inline const std::vector<std::string> prompts{"Once upon a time", "Lily and Ben went to the park",
                                              "The little dog was sad"};

}  // namespace stories_test

int main(int argc, char* argv[]) {
  return llama2c_test::run_or_skip(argc, argv,
                                   {stories_test::checkpoint_path, stories_test::tokenizer_path});
}
