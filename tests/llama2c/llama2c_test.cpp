// Real-model tests of the llama2.c adapter: tokenizer, greedy reference output, checkpoint
// errors, capacity, tree attention, layer-skip drafts and the conformance kit.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <llama2c/model.hpp>
#include <llama2c/tokenizer.hpp>

namespace fs = std::filesystem;
using namespace specdec;

namespace {

const fs::path models_dir{SPECDEC_MODELS_DIR};
const fs::path checkpoint_path = models_dir / "aidreams260K.bin";
const fs::path tokenizer_path = models_dir / "aidreams260K.tok512.bin";

// The README's reference: the ids run.c prints after BOS for "I dreamed", greedy, 96 positions.
const std::vector<token_id> reference_ids{
    303, 281, 269, 435, 447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262, 421,
    392, 275, 280, 302, 450, 405, 403, 399, 448, 429, 465, 265, 434, 317, 431, 434, 289, 408, 326,
    446, 262, 279, 438, 349, 261, 446, 299, 303, 384, 467, 407, 446, 299, 303, 266, 323, 434, 285,
    362, 262, 263, 428, 434, 436, 451, 275, 429, 339, 315, 374, 448, 429, 465, 265, 434, 317, 431,
    434, 289, 418, 321, 278, 416, 446, 262, 429, 453, 435, 285, 361, 437, 431, 440, 437, 445, 430,
    275};
const std::string reference_text =
    "I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as "
    "I adjust, as I settle into a tapestry of vectors. Contrast edges sharpen, a kaleidoscope of";

std::size_t argmax(std::span<const float> row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

TEST_CASE("llama2c tokenizer: encodes the prompt as run.c does") {
  const llama2c::tokenizer tok(tokenizer_path);
  REQUIRE(tok.vocab_size() == 512);
  const auto ids = tok.encode("I dreamed");
  const std::vector<token_id> expected{1, 303, 281, 269, 435, 447, 328};
  CHECK(ids == expected);
  CHECK(tok.decode(reference_ids) == reference_text);
}

TEST_CASE("llama2c model: greedy generation reproduces run.c's reference output") {
  llama2c::model m(checkpoint_path);
  const llama2c::tokenizer tok(tokenizer_path);
  const auto prompt = tok.encode("I dreamed");
  std::vector<token_id> fed{prompt.front()};
  std::vector<float> logits(m.vocab_size());
  for (std::size_t pos = 0; pos < 96; ++pos) {
    m.append(std::span(fed).subspan(pos, 1), logits);
    const auto next = pos + 1 < prompt.size() ? prompt[pos + 1]
                                              : static_cast<token_id>(argmax(logits));
    fed.push_back(next);
  }
  const std::vector<token_id> generated(fed.begin() + 1, fed.end());
  CHECK(generated == reference_ids);
  CHECK(tok.decode(generated) == reference_text);
}

int main(int argc, char* argv[]) {
  if (!fs::exists(checkpoint_path)) {
    std::cout << "skipping: " << checkpoint_path.string()
              << " not found; real-model tests need ../shared/models (set SPECDEC_MODELS_DIR)\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
