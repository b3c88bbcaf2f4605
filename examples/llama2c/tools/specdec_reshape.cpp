// specdec-reshape: writes a larger llama2.c checkpoint that computes the same function as a
// smaller one (reshape.hpp), or the first layers of a checkpoint as a separate draft model.
//
// Shows how a real model's predictions (so acceptance rates are real) can run at the forward
// cost of a larger model on the same engine (so times are real):
//
//   specdec-reshape aidreams260K.bin big.bin --shape 110M
//   specdec-reshape aidreams260K.bin draft.bin --keep-layers 3
//
// Exit status: 0 written; 2 for bad usage (checked before anything is read); 1 when IN cannot be
// read, the shape cannot hold it, or OUT cannot be written (OUT is then untouched).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli/parse_number.hpp"
#include "llama2c/tools/reshape.hpp"

namespace {

namespace l2 = specdec::llama2c;

const char* const usage =
    "usage: specdec-reshape IN.bin OUT.bin [--shape NAME] [--dim N] [--hidden-dim N]\n"
    "                       [--layers N] [--heads N] [--kv-heads N] [--seq-len N]\n"
    "       specdec-reshape IN.bin OUT.bin --keep-layers L\n"
    "  Writes OUT, a checkpoint that computes IN's function in a larger shape: zero-padded\n"
    "  widths and heads, identity layers spread among IN's, the same vocabulary (use IN's\n"
    "  tokenizer). Fields not given keep IN's values.\n"
    "  --shape NAME      15M (288, 768, 6 layers, 6 heads, 6 kv heads), 42M (512, 1376, 8, 8, 8)\n"
    "                    or 110M (768, 2048, 12, 12, 12); the flags below override its fields\n"
    "  --dim N           model width (>= IN's)\n"
    "  --hidden-dim N    FFN width (>= IN's)\n"
    "  --layers N        transformer blocks (>= IN's)\n"
    "  --heads N         query heads: dim / heads a multiple of IN's head size\n"
    "  --kv-heads N      key/value heads (>= IN's; a group heads / kv-heads smaller than IN's must\n"
    "                    divide it: each kv head is then copied)\n"
    "  --seq-len N       context length (>= IN's)\n"
    "  --keep-layers L   instead: IN's first L layers with its final norm and classifier\n"
    "exit status: 0 written; 2 bad usage; 1 IN unreadable, a shape that cannot hold IN, or OUT\n"
    "not writable (OUT is never left as a partial file)\n";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "specdec-reshape: %s\n%s", message.c_str(), usage);
  std::exit(2);
}

// A header field: an integer in [1, 2^31 - 1], nothing after it.
std::size_t field(std::string_view flag, std::string_view text) {
  std::size_t value = 0;
  if (specdec::cli::parse_number(text, value) != specdec::cli::number_read::ok || value < 1 ||
      value > 2147483647)
    fail(std::string(flag) + ": '" + std::string(text) + "' is not an integer in [1, 2147483647]");
  return value;
}

struct cli {
  std::string in, out;
  l2::reshape_options shape;
  std::optional<std::size_t> keep;
};

cli parse(int argc, char** argv) {
  cli c;
  std::vector<std::string_view> positional;
  std::optional<std::string_view> shape_name;
  struct explicit_field {
    std::string_view flag;
    std::size_t l2::reshape_options::*member;
    std::optional<std::size_t> value;
  };
  explicit_field fields[] = {{"--dim", &l2::reshape_options::dim, {}},
                             {"--hidden-dim", &l2::reshape_options::hidden_dim, {}},
                             {"--layers", &l2::reshape_options::n_layers, {}},
                             {"--heads", &l2::reshape_options::n_heads, {}},
                             {"--kv-heads", &l2::reshape_options::n_kv_heads, {}},
                             {"--seq-len", &l2::reshape_options::seq_len, {}}};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (!arg.starts_with("-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) fail(std::string(arg) + ": missing value");
      return argv[++i];
    };
    const auto once = [&](bool given) {
      if (given) fail(std::string(arg) + ": given twice");
    };
    if (arg == "--shape") {
      once(shape_name.has_value());
      shape_name = value();
      continue;
    }
    if (arg == "--keep-layers") {
      once(c.keep.has_value());
      c.keep = field(arg, value());
      continue;
    }
    bool known = false;
    for (explicit_field& f : fields)
      if (arg == f.flag) {
        once(f.value.has_value());
        f.value = field(arg, value());
        known = true;
      }
    if (!known) fail("unknown option " + std::string(arg));
  }
  if (positional.size() != 2)
    fail("expected IN.bin and OUT.bin, got " + std::to_string(positional.size()) + " path(s)");
  c.in = positional[0];
  c.out = positional[1];
  bool any_field = false;
  for (const explicit_field& f : fields) any_field = any_field || f.value.has_value();
  if (c.keep && (shape_name || any_field))
    fail("--keep-layers: give it alone, without --shape or shape fields");
  if (!c.keep && !shape_name && !any_field)
    fail("give --shape NAME, a shape field (--dim, ...) or --keep-layers L");
  if (shape_name) {
    try {
      c.shape = l2::shape_named(*shape_name);
    } catch (const std::invalid_argument& e) {
      fail(std::string("--shape: ") + e.what());
    }
  }
  for (const explicit_field& f : fields)
    if (f.value) c.shape.*f.member = *f.value;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const cli c = parse(argc, argv);  // exits with 2 on bad usage
  try {
    const l2::reshape_result r = c.keep ? l2::keep_layers(c.in, c.out, *c.keep)
                                        : l2::reshape_checkpoint(c.in, c.out, c.shape);
    const l2::config& s = r.shape;
    std::string layers;
    for (std::size_t l : r.real_layers) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
    std::printf(
        "wrote %s: dim %zu, hidden_dim %zu, %zu layers, %zu heads, %zu kv heads, vocab %zu "
        "(%s classifier), seq_len %zu\n"
        "%llu bytes in %.2f s; %s's layers are layers %s\n",
        c.out.c_str(), s.dim, s.hidden_dim, s.n_layers, s.n_heads, s.n_kv_heads, s.vocab_size,
        s.shared_classifier ? "shared" : "separate", s.seq_len,
        static_cast<unsigned long long>(r.bytes), r.seconds, c.in.c_str(), layers.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-reshape: %s\n", e.what());
    return 1;
  }
}
