// fuzz/heads_fuzz.cpp - the heads file loader (llama2c/engine/heads_file.hpp) on hostile files. The first
// byte picks a mode:
//   even: the rest of the input is the file, byte for byte;
//   odd:  a structured file: a valid header whose sizes (hidden, vocab, heads, inner, accuracy
//         table, own classifier, kind, version, attention heads / width / rotary) come from the
//         input, small, then a payload of about the size the header implies (exactly, a few
//         bytes either side) filled from the input.
// Properties checked on every input:
//   1. parse_heads returns or throws std::runtime_error, and nothing else (no crash, leak,
//      undefined behaviour, or allocation above the 1 GB limit that run.sh sets);
//   2. an accepted file writes back to the same bytes (heads_bytes; a version 1 file to those
//      bytes in version 2's layout), its weights are finite and fit the library's checks at
//      their own width;
//   3. fitting it to a target of the same vocabulary and a width from the input either throws
//      std::runtime_error or gives weights that pass the library's checks at that width.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <llama2c/engine/heads_file.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using specdec::fuzz::input;
namespace l2 = specdec::llama2c;

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "property violated: %s\n", what);
  std::abort();
}

std::vector<char> structured(input& in) {
  std::vector<char> f(l2::heads_magic, l2::heads_magic + 8);
  const auto put = [&](std::uint32_t v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    f.insert(f.end(), p, p + 4);
  };
  const std::uint32_t kind = 1 + in.byte() % 2, d = 1 + in.byte() % 8, v = 1 + in.byte() % 16,
                      heads = kind == 1 ? 1 + in.byte() % 4 : 1,
                      inner = kind == 2 ? 1 + in.byte() % 8 : 0,
                      own = kind == 1 ? in.byte() % 2 : 0, ar = in.byte() % 4, ac = in.byte() % 4;
  const std::uint32_t version = in.byte() % 4 == 0 ? 1 : l2::heads_version;
  // Attention (version 2, eagle): 0-2 heads, widths 1-4 (odd ones refused under rotary).
  const std::uint32_t attn = version >= 2 && kind == 2 ? in.byte() % 3 : 0,
                      width = attn ? 1 + in.byte() % 4 : 0, rope = attn ? in.byte() % 2 : 0;
  for (std::uint32_t x : {version, kind, d, v, heads, inner, own, ar, ac, 0u}) put(x);
  put(0);  // training seconds (a float 0)
  if (version >= 2)
    for (std::uint32_t x : {attn, width, rope}) put(x);
  std::size_t floats = ar * ac + (kind == 1 ? heads * (d * d + d + (own ? v * d : 0))
                                            : inner * 2 * d + inner + d * inner + d +
                                                  attn * width * 7 * d);
  const int delta = static_cast<int>(in.byte() % 7) - 3;  // -3..3 bytes off
  std::size_t bytes = floats * 4;
  bytes = delta < 0 && static_cast<std::size_t>(-delta) > bytes ? 0 : bytes + static_cast<std::size_t>(static_cast<std::ptrdiff_t>(delta));
  for (std::size_t i = 0; i < bytes; ++i) {
    // Mostly small finite floats; a raw byte now and then (NaN / infinity patterns included).
    if (i % 4 == 3) f.push_back(static_cast<char>(in.byte() % 8 == 0 ? in.byte() : 0x3e));
    else f.push_back(static_cast<char>(in.byte()));
  }
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  const std::uint8_t mode = in.byte();
  std::vector<char> file;
  if (mode % 2 == 0) {
    const auto rest = in.rest();
    file.assign(rest.begin(), rest.end());
  } else {
    file = structured(in);
  }
  l2::heads_record r;
  try {
    r = l2::parse_heads(file, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::vector<char> same = file;  // the bytes it writes back to: version 2's layout
  std::uint32_t version;
  std::memcpy(&version, file.data() + 8, 4);
  if (version == 1) {
    same.insert(same.begin() + 52, 12, '\0');  // no attention: heads, width, rotary = 0
    same[8] = 2;
  }
  if (l2::heads_bytes(r) != same) violated("an accepted file does not write back to its bytes");
  const specdec::row_matrix classifier = specdec::row_matrix::Zero(
      static_cast<Eigen::Index>(r.vocab), static_cast<Eigen::Index>(r.hidden));
  const specdec::weight_view cv(classifier.data(), classifier.rows(), classifier.cols());
  try {
    if (r.kind == l2::heads_kind::medusa)
      specdec::check_medusa_weights(r.medusa, r.hidden, r.vocab, cv);
    else
      specdec::check_eagle_weights(r.eagle, r.hidden);
  } catch (const std::invalid_argument&) {
    violated("an accepted file fails the library's weight checks");
  }
  l2::config c{.dim = r.hidden + in.byte() % 8, .hidden_dim = 1, .n_layers = 1, .n_heads = 1,
               .n_kv_heads = 1, .vocab_size = r.vocab + (in.byte() % 4 == 0 ? 1 : 0),
               .seq_len = 1};
  try {
    l2::fit_heads(r, c, "fuzz");
  } catch (const std::runtime_error&) {
    return 0;
  }
  const specdec::row_matrix wide = specdec::row_matrix::Zero(
      static_cast<Eigen::Index>(c.vocab_size), static_cast<Eigen::Index>(c.dim));
  const specdec::weight_view wv(wide.data(), wide.rows(), wide.cols());
  try {
    if (r.kind == l2::heads_kind::medusa)
      specdec::check_medusa_weights(r.medusa, c.dim, c.vocab_size, wv);
    else
      specdec::check_eagle_weights(r.eagle, c.dim);
  } catch (const std::invalid_argument&) {
    violated("fitted weights fail the library's checks at the target's width");
  }
  return 0;
}
