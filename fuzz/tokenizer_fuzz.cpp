// fuzz/tokenizer_fuzz.cpp - the llama2.c tokenizer (llama2c/engine/tokenizer.hpp): its loader on hostile
// files, and encode/decode on what it loads. The first byte picks a mode:
//   even: the rest of the input is a tokenizer.bin, byte for byte (bit 1 of the mode byte: load
//         it with the expected vocabulary size taken from the next byte);
//   odd:  a well-formed vocabulary built from the input (<unk>, <s>, </s>, the 256 byte tokens,
//         " ", then pieces over a small alphabet with scores), and a text to encode.
// Properties checked on every input:
//   1. the loader returns or throws std::runtime_error, nothing else (no crash, leak, undefined
//      behaviour, or allocation above run.sh's 1 GB limit: a claimed length never allocates);
//   2. it accepts exactly the files an independent parser calls valid (max_token_length > 0,
//      whole entries to the end, lengths in [0, max_token_length], at least 3 tokens, the
//      expected count when one is given), and then holds every piece as the file has it;
//   3. encode returns ids inside the vocabulary, or throws std::out_of_range for a byte without
//      a byte token; decode of a bad id throws std::out_of_range;
//   4. on a well-formed vocabulary, decode(encode(text)) == text for any bytes, with and
//      without BOS/EOS.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <llama2c/engine/tokenizer.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using specdec::token_id;
using specdec::fuzz::input;
namespace l2 = specdec::llama2c;

// An independent reading of the format: the pieces, or false for a file the loader must refuse.
bool parse(std::string_view f, std::size_t expected_vocab, std::vector<std::string>& pieces) {
  const auto i32 = [&](std::size_t at) {
    std::int32_t v;
    std::memcpy(&v, f.data() + at, 4);
    return v;
  };
  if (f.size() < 4 || i32(0) <= 0) return false;
  const std::int64_t max_len = i32(0);
  std::size_t at = 4;
  while (at < f.size()) {
    if (f.size() - at < 8) return false;
    const std::int64_t len = i32(at + 4);
    at += 8;
    if (len < 0 || len > max_len || static_cast<std::size_t>(len) > f.size() - at) return false;
    pieces.emplace_back(f.substr(at, static_cast<std::size_t>(len)));
    at += static_cast<std::size_t>(len);
  }
  return pieces.size() >= 3 && (expected_vocab == 0 || pieces.size() == expected_vocab);
}

void put(std::string& f, const void* p, std::size_t n) { f.append(static_cast<const char*>(p), n); }
void entry(std::string& f, float score, std::string_view piece) {
  const auto len = static_cast<std::int32_t>(piece.size());
  put(f, &score, 4);
  put(f, &len, 4);
  f.append(piece);
}

void check_encode(const l2::tokenizer& tok, std::string_view text, bool round_trip, input& in) {
  for (int variant = 0; variant < 2; ++variant) {
    const l2::encode_options o{.bos = variant == 0, .eos = variant == 1};
    std::vector<token_id> ids;
    try {
      ids = tok.encode(text, o);
    } catch (const std::out_of_range& e) {
      SPECDEC_FUZZ_CHECK(!round_trip, std::string("a full vocabulary lacks a byte: ") + e.what());
      SPECDEC_FUZZ_CHECK(std::strstr(e.what(), "has no byte token") != nullptr, e.what());
      continue;
    }
    for (const token_id t : ids)
      SPECDEC_FUZZ_CHECK(t >= 0 && static_cast<std::size_t>(t) < tok.vocab_size(), "id range");
    const std::string back = tok.decode(ids);
    if (round_trip) SPECDEC_FUZZ_CHECK(back == text, "decode(encode(text)) != text");
  }
  const auto bad = static_cast<token_id>(tok.vocab_size() + in.below(3));
  try {
    (void)tok.decode(1, bad);
    specdec::fuzz::fail("decode accepted an id outside the vocabulary");
  } catch (const std::out_of_range&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  const std::uint8_t mode = in.byte();
  const auto& path = specdec::fuzz::scratch_file("tokenizer");

  if (mode % 2 == 0) {
    const std::size_t expected_vocab = (mode & 2) ? in.byte() : 0;
    const std::string file(in.rest());
    std::vector<std::string> pieces;
    const bool valid = parse(file, expected_vocab, pieces);
    specdec::fuzz::write_file(path, file);
    try {
      const l2::tokenizer tok(path, expected_vocab);
      SPECDEC_FUZZ_CHECK(valid, "an invalid file was accepted");
      SPECDEC_FUZZ_CHECK(tok.vocab_size() == pieces.size(), "vocab_size");
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        SPECDEC_FUZZ_CHECK(tok.piece(static_cast<token_id>(i)) == pieces[i], "piece");
        const token_id found = tok.find(pieces[i]);
        SPECDEC_FUZZ_CHECK(found >= 0 && found <= static_cast<token_id>(i) &&
                               pieces[static_cast<std::size_t>(found)] == pieces[i],
                           "find returns the first id of a piece");
      }
      input none(nullptr, 0);
      const std::string_view text(file.data(), std::min<std::size_t>(file.size(), 64));
      check_encode(tok, text, false, none);
    } catch (const std::runtime_error& e) {
      SPECDEC_FUZZ_CHECK(!valid, std::string("a valid file was refused: ") + e.what());
    }
    return 0;
  }

  // A well-formed vocabulary: specials, the 256 byte tokens at id byte + 3, " ", then pieces
  // over "ab c\xc3\xa9" (no '<' or '>', so no merge can spell a byte token).
  static constexpr char alphabet[] = {'a', 'b', ' ', 'c', '\xc3', '\xa9'};
  std::string file;
  const std::int32_t max_len = 16;
  put(file, &max_len, 4);
  entry(file, 0, "<unk>");
  entry(file, 0, "<s>");
  entry(file, 0, "</s>");
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    entry(file, 0, piece);
  }
  entry(file, -1.0f, " ");
  const std::size_t extra = in.below(24);
  for (std::size_t i = 0; i < extra; ++i) {
    std::string piece;
    const std::size_t len = 1 + in.below(5);
    for (std::size_t k = 0; k < len; ++k) piece += alphabet[in.below(sizeof alphabet)];
    entry(file, static_cast<float>(static_cast<int>(in.byte()) - 128), piece);
  }
  specdec::fuzz::write_file(path, file);
  const l2::tokenizer tok(path, 3 + 256 + 1 + extra);
  std::string text;
  const std::size_t raw = in.byte() % 2;  // raw bytes, or mostly the alphabet
  while (in.left() > 0 && text.size() < 96) {
    const std::uint8_t b = in.byte();
    text += raw ? static_cast<char>(b) : alphabet[b % sizeof alphabet];
  }
  check_encode(tok, text, true, in);
  return 0;
}
