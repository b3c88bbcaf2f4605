// tests/llamacpp/common.hpp - what the llama.cpp test programs share: where make_gguf.sh put the
// GGUF models, the models loaded once per program, and main(), which skips (exit 77, CTest:
// skipped) when the models were not made (no ../shared/models).
#pragma once

#include <catch2/catch.hpp>

#include "catch_runner.hpp"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <llamacpp/adapters/gguf_model.hpp>
#include <specdec/types.hpp>

namespace llamacpp_test {

inline const std::filesystem::path gguf_dir{SPECDEC_GGUF_DIR};
inline std::string path_of(const char* name) { return (gguf_dir / name).string(); }
/// The llama2.c checkpoint make_gguf.sh converted to target.gguf.
inline std::string checkpoint_path() { return std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.bin"; }

/// aidreams260K as GGUF (F32), loaded once.
inline const specdec::llamacpp::gguf_model& target() {
  static const specdec::llamacpp::gguf_model m(path_of("target.gguf"));
  return m;
}
/// Its first 3 layers (the draft model).
inline const specdec::llamacpp::gguf_model& draft() {
  static const specdec::llamacpp::gguf_model m(path_of("draft.gguf"));
  return m;
}
/// aidreams260K quantized to Q8_0.
inline const specdec::llamacpp::gguf_model& target_q8() {
  static const specdec::llamacpp::gguf_model m(path_of("target-q8_0.gguf"));
  return m;
}

/// Prompts as token ids (BOS = 1, then ids of the 512-token vocabulary).
inline const std::vector<std::vector<specdec::token_id>> prompts{
    {1, 303, 281, 269, 435, 447},
    {1, 446, 262, 421, 392},
    {1, 279, 438, 349, 261, 446, 299, 303, 384},
};

}  // namespace llamacpp_test

int main(int argc, char* argv[]) {
  for (const char* f : {"target.gguf", "draft.gguf", "target-q8_0.gguf"})
    if (!std::filesystem::exists(llamacpp_test::gguf_dir / f)) {
      std::cout << "skipping: " << (llamacpp_test::gguf_dir / f).string()
                << " not found; make_gguf.sh makes it from ../shared/models (absent here?)\n";
      return 77;
    }
  specdec::llamacpp::set_llama_log_level(true);
  return specdec_test::run_catch(argc, argv);
}
