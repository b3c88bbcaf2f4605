// llama2c/engine/reference.hpp - the run.c reference output for aidreams260K.bin, the one quoted in the
// models' README (../shared/models/README.md, "A reference output"): llama2.c's run.c, greedy
// (`-t 0 -n 96`), with aidreams260K.bin and aidreams260K.tok512.bin, prompt "I dreamed".
//
// Shared by the real-model tests (tests/llama2c/) and the benchmarks (bench/), which use the ids
// as a realistic context and realistic draft tokens.
#pragma once

#include <array>
#include <string_view>

#include <specdec/types.hpp>

namespace specdec::llama2c {

/// The prompt run.c was given.
inline constexpr std::string_view reference_prompt = "I dreamed";

/// The 96 ids run.c feeds after BOS: the prompt's own ids first (303 281 269 435 447 328), then
/// its greedy choices.
inline constexpr std::array<token_id, 96> reference_ids{
    303, 281, 269, 435, 447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262, 421,
    392, 275, 280, 302, 450, 405, 403, 399, 448, 429, 465, 265, 434, 317, 431, 434, 289, 408, 326,
    446, 262, 279, 438, 349, 261, 446, 299, 303, 384, 467, 407, 446, 299, 303, 266, 323, 434, 285,
    362, 262, 263, 428, 434, 436, 451, 275, 429, 339, 315, 374, 448, 429, 465, 265, 434, 317, 431,
    434, 289, 418, 321, 278, 416, 446, 262, 429, 453, 435, 285, 361, 437, 431, 440, 437, 445, 430,
    275};

/// What run.c prints: the decoded reference ids.
inline constexpr std::string_view reference_text =
    "I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as "
    "I adjust, as I settle into a tapestry of vectors. Contrast edges sharpen, a kaleidoscope of";

}  // namespace specdec::llama2c
