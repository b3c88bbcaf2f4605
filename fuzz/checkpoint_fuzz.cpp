// fuzz/checkpoint_fuzz.cpp - the llama2.c checkpoint loader (llama2c/engine/checkpoint.hpp) on hostile
// files. The first byte picks a mode:
//   even: the rest of the input is the file, byte for byte;
//   odd:  a structured file: seven header fields drawn from edge values (0, +-1, 2, INT32_MIN,
//         INT32_MAX, small numbers, raw input) and a size around the one the header implies
//         (exactly, a few bytes or floats either side, or a raw length).
// Properties checked on every input:
//   1. the loader returns or throws std::runtime_error, and nothing else (no crash, leak,
//      undefined behaviour, or allocation above the 1 GB limit that run.sh sets);
//   2. it accepts exactly the files an independent computation in 128-bit arithmetic calls
//      valid (fields positive, vocab_size non-zero, dim % n_heads == 0, n_heads % n_kv_heads ==
//      0, even head size, size == 28 + 4 * the floats of the header's tensors);
//   3. an accepted file reports its header back unchanged, bytes() == size - 28, every tensor
//      view lies inside the weights, and a model built on it appends a token without throwing.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <llama2c/engine/checkpoint.hpp>
#include <llama2c/engine/model.hpp>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"

namespace {

using specdec::fuzz::input;
namespace l2 = specdec::llama2c;
using u128 = unsigned __int128;

struct verdict {
  bool valid = false;
  u128 floats = 0;
};

// What a header of these fields and a file of `size` bytes should give, computed apart from the
// loader (its own formula, 128-bit so no product overflows for 32-bit fields).
verdict judge(const std::int32_t h[7], u128 size) {
  verdict v;
  for (int i = 0; i < 7; ++i) {
    if (i == 5) {
      if (h[i] == 0 || h[i] == std::numeric_limits<std::int32_t>::min()) return v;
    } else if (h[i] <= 0) {
      return v;
    }
  }
  const u128 dim = static_cast<u128>(h[0]), hid = static_cast<u128>(h[1]),
             layers = static_cast<u128>(h[2]), heads = static_cast<u128>(h[3]),
             kv_heads = static_cast<u128>(h[4]), seq = static_cast<u128>(h[6]);
  const u128 vocab = static_cast<u128>(h[5] > 0 ? static_cast<std::int64_t>(h[5])
                                                : -static_cast<std::int64_t>(h[5]));
  if (dim % heads != 0 || kv_heads > heads || heads % kv_heads != 0) return v;
  const u128 hs = dim / heads;
  if (hs % 2 != 0) return v;
  const u128 kv = kv_heads * hs;
  v.floats = vocab * dim  // token embedding
             + layers * (dim + dim * dim + 2 * kv * dim + dim * dim + dim + 3 * hid * dim) +
             dim                              // final norm
             + 2 * seq * (hs / 2)             // RoPE tables
             + (h[5] < 0 ? vocab * dim : 0);  // unshared classifier
  v.valid = size == 28 + 4 * v.floats;
  return v;
}

std::int32_t field(input& in, std::int32_t fallback) {
  switch (in.below(10)) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return -1;
    case 3:
      return 2;
    case 4:
      return std::numeric_limits<std::int32_t>::min();
    case 5:
      return std::numeric_limits<std::int32_t>::max();
    case 6:
      return static_cast<std::int32_t>(in.below(9));
    case 7:
      return static_cast<std::int32_t>(in.u32());
    case 8:
      return -static_cast<std::int32_t>(in.below(40));
    default:
      return fallback;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  std::string file;
  if (in.byte() % 2 == 0) {
    file = std::string(in.rest());
  } else {
    // A tiny valid shape as the default of each field, so most structured inputs come close.
    const std::int32_t defaults[7] = {8, 12, 1, 2, 1, 6, 4};
    std::int32_t h[7];
    for (int i = 0; i < 7; ++i) h[i] = field(in, defaults[i]);
    const verdict v = judge(h, 0);
    u128 want = 28 + 4 * v.floats;
    if (v.floats == 0) want = 28;
    switch (in.below(6)) {
      case 0:
        break;
      case 1:
        want += 1 + in.below(7);
        break;
      case 2:
        want = want > 7 ? want - 1 - in.below(7) : 0;
        break;
      case 3:
        want += 4;
        break;
      case 4:
        want = want >= 4 ? want - 4 : 0;
        break;
      default:
        want = in.below(1 << 16);
        break;
    }
    if (want > (1u << 20)) want = 28 + in.below(64);  // the file itself stays small
    file.assign(reinterpret_cast<const char*>(h), 28);
    file.resize(static_cast<std::size_t>(want), '\0');
    if (file.size() > 28) {  // weights: the rest of the input, repeated, then zeros
      const std::string_view rest = in.rest();
      for (std::size_t i = 28; i < file.size() && !rest.empty(); ++i)
        file[i] = rest[(i - 28) % rest.size()];
    }
  }

  std::int32_t h[7] = {};
  if (file.size() >= 28) std::memcpy(h, file.data(), 28);
  const verdict expected = file.size() >= 28 ? judge(h, file.size()) : verdict{};

  const auto& path = specdec::fuzz::scratch_file("checkpoint");
  specdec::fuzz::write_file(path, file);
  std::shared_ptr<const l2::weights> w;
  try {
    w = l2::load_checkpoint(path);
  } catch (const std::runtime_error& e) {
    SPECDEC_FUZZ_CHECK(!expected.valid, std::string("a valid file was refused: ") + e.what());
    return 0;
  }
  SPECDEC_FUZZ_CHECK(expected.valid, "an invalid file was accepted");
  const l2::config& c = w->cfg();
  const auto back = l2::detail::header_fields(c);
  for (int i = 0; i < 7; ++i)
    SPECDEC_FUZZ_CHECK(back[static_cast<std::size_t>(i)] == h[i], "header");
  SPECDEC_FUZZ_CHECK(w->bytes() + 28 == file.size(), "bytes()");
  const float* lo = w->token_embedding().data();
  const float* hi = lo + w->bytes() / sizeof(float);
  for (const l2::tensor_info& t : l2::file_layout(c))
    for (std::size_t l = 0; l < t.layers; ++l) {
      const auto s = w->tensor(t.kind, l);
      SPECDEC_FUZZ_CHECK(s.data() >= lo && s.data() + s.size() <= hi, t.name);
    }
  // The engine on it: one token in, one row of logits out.
  l2::model m(w, {.max_context = 4, .threads = 1});
  std::vector<float> logits(m.vocab_size());
  const std::int32_t token = 0;
  m.append(std::span(&token, 1), logits);
  SPECDEC_FUZZ_CHECK(m.size() == 1, "model size after one append");
  return 0;
}
