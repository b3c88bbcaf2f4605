// tests/llama2c/common.hpp - what the real-model test programs share: where the checkpoints are,
// the run.c reference output, and the program's main(), which skips (exit 77, CTest: skipped)
// when the checkpoint is absent.
//
// Each program includes this header once, in its one source file: it defines main() (Catch's
// implementation is tests/catch_runner.cpp's, linked once). A program that sets Eigen macros (EIGEN_RUNTIME_NO_MALLOC, eigen_assert) defines them
// before including it, since the header includes Eigen through the adapter's headers.
#pragma once

#include <catch2/catch.hpp>

#include "run_or_skip.hpp"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <llama2c/engine/reference.hpp>
#include <specdec/types.hpp>

namespace llama2c_test {

inline const std::filesystem::path models_dir{SPECDEC_MODELS_DIR};
inline const std::filesystem::path checkpoint_path = models_dir / "aidreams260K.bin";
inline const std::filesystem::path tokenizer_path = models_dir / "aidreams260K.tok512.bin";

// run.c's reference for aidreams260K.bin (llama2c/engine/reference.hpp) as the types the tests compare
// with: the 96 ids fed after BOS for "I dreamed", greedy, and the text they decode to.
inline const std::vector<specdec::token_id> reference_ids(specdec::llama2c::reference_ids.begin(),
                                                          specdec::llama2c::reference_ids.end());
inline const std::string reference_text{specdec::llama2c::reference_text};

}  // namespace llama2c_test

int main(int argc, char* argv[]) {
  return llama2c_test::run_or_skip(argc, argv, {llama2c_test::checkpoint_path});
}
