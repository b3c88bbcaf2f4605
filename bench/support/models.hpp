// bench/support/models.hpp - where the benchmarks on the real llama2.c checkpoint find it, and how
// they skip without it: print a clear message and exit 0 (a missing model is not a failure).
//
// SPECDEC_MODELS_DIR comes from bench/CMakeLists.txt (the cache variable of the same name).
#pragma once

#include <cstdio>
#include <filesystem>
#include <initializer_list>

#ifndef SPECDEC_MODELS_DIR
#error "SPECDEC_MODELS_DIR is not defined: bench/CMakeLists.txt defines it for the benchmarks on the real model"
#endif

namespace specdec::bench {

inline const std::filesystem::path models_dir{SPECDEC_MODELS_DIR};
inline const std::filesystem::path checkpoint_path = models_dir / "aidreams260K.bin";
inline const std::filesystem::path tokenizer_path = models_dir / "aidreams260K.tok512.bin";

/// True when one of `files` is missing, after printing "<program>: skipped: <file> not found
/// (set SPECDEC_MODELS_DIR)": the caller then returns 0 from main.
inline bool skip_without(const char* program, std::initializer_list<std::filesystem::path> files) {
  for (const auto& file : files)
    if (!std::filesystem::exists(file)) {
      std::printf("%s: skipped: %s not found (set SPECDEC_MODELS_DIR)\n", program,
                  file.string().c_str());
      return true;
    }
  return false;
}

}  // namespace specdec::bench
