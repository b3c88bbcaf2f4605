// llama2c/engine/tokenizer.hpp - llama2.c's BPE tokenizer (tokenizer.bin), encoding exactly as run.c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <specdec/types.hpp>

namespace specdec::llama2c {

/// Options of tokenizer::encode.
struct encode_options {
  bool bos = true;   ///< prepend BOS (id 1), as run.c does for a prompt
  bool eos = false;  ///< append EOS (id 2)
};

/**
 * A llama2.c `tokenizer.bin`: int32 max_token_length, then per token float32 score, int32 byte
 * length and the bytes. Lookup is a hash map from piece to id. Immutable after construction;
 * const member functions are safe to call from several threads.
 */
class tokenizer {
 public:
  static constexpr token_id bos_id = 1;
  static constexpr token_id eos_id = 2;

  /// Reads `path`: every entry to the end of the file. `vocab_size` > 0 is the model's
  /// vocabulary, which the file must match exactly (0: any size). Throws std::runtime_error
  /// naming the file and the problem: missing, truncated (with the bytes left), a token length
  /// outside [0, max_token_length], fewer than 3 tokens (BOS = 1 and EOS = 2 must exist), or
  /// a size other than `vocab_size` (both named). Every length the file claims is checked
  /// against the bytes it still holds before anything is allocated; memory grows only with the
  /// entries actually read (about 80 bytes each, an entry being at least 8 bytes of file).
  explicit tokenizer(const std::filesystem::path& path, std::size_t vocab_size = 0);

  std::size_t vocab_size() const noexcept { return pieces_.size(); }
  /// The raw piece of `id` (e.g. " I", "<0x0A>"). Throws std::out_of_range for a bad id.
  const std::string& piece(token_id id) const { return pieces_.at(check(id, "piece")); }
  /// The id of an exact piece, or -1. Does not allocate.
  token_id find(std::string_view piece) const {
    const auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }

  /**
   * Encodes like run.c's encode(): optional BOS; for non-empty text the " " piece (a dummy
   * prefix, SentencePiece's add_dummy_prefix); each UTF-8 codepoint as its piece, or its bytes
   * as byte tokens <0xNN> (id byte + 3) when the vocabulary lacks it; then, repeatedly, merges
   * the adjacent pair whose concatenation is the highest-scoring piece (the leftmost on ties).
   * O(n^2) in the text length.
   */
  std::vector<token_id> encode(std::string_view text, encode_options options = {}) const;

  /// The text run.c prints for `token` following `prev`: the leading space is stripped after
  /// BOS, and <0xNN> pieces become the raw byte.
  std::string decode(token_id prev, token_id token) const;

  /// Concatenated pieces of a sequence; BOS and EOS produce no text. The first token is decoded
  /// as following BOS, so "[BOS] I dreamed" and "I dreamed" both decode without a leading space.
  std::string decode(std::span<const token_id> tokens) const;

 private:
  std::size_t check(token_id id, const char* where) const {
    if (id < 0 || static_cast<std::size_t>(id) >= pieces_.size())
      throw std::out_of_range(std::string("llama2c::tokenizer::") + where + ": token " +
                              std::to_string(id) + " outside the vocabulary of " +
                              std::to_string(pieces_.size()));
    return static_cast<std::size_t>(id);
  }

  // Hashes std::string and std::string_view alike, so find() looks up a view without a copy.
  struct piece_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> byte_value_;  // 0..255 for a <0xNN> piece, else -1
  std::unordered_map<std::string, token_id, piece_hash, std::equal_to<>> ids_;
};

/// Throws std::invalid_argument unless the tokenizer's vocabulary has exactly `model_vocab`
/// tokens (a tokenizer made for another model decodes garbage). The message names both sizes.
inline void check_vocab(const tokenizer& tok, std::size_t model_vocab) {
  if (tok.vocab_size() != model_vocab)
    throw std::invalid_argument("llama2c: the tokenizer has " + std::to_string(tok.vocab_size()) +
                                " tokens but the model's vocabulary has " +
                                std::to_string(model_vocab) + "; use the model's own tokenizer");
}

inline tokenizer::tokenizer(const std::filesystem::path& path, std::size_t vocab_size) {
  const auto fail = [&path](const std::string& what) -> void {
    throw std::runtime_error("llama2c tokenizer '" + path.string() + "': " + what);
  };
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("file not found");
  if (!std::filesystem::is_regular_file(path, ec)) fail("not a regular file");
  const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open for reading");
  // Every size the file claims is checked against the bytes it still holds before anything is
  // allocated, so no allocation exceeds the file's size.
  std::uintmax_t left = file_size;
  const auto read = [&](void* to, std::size_t bytes) {
    if (bytes > left) return false;
    left -= bytes;
    return static_cast<bool>(in.read(static_cast<char*>(to), static_cast<std::streamsize>(bytes)));
  };
  std::int32_t max_len = 0;
  if (!read(&max_len, sizeof max_len))
    fail("truncated: no max_token_length header (file has " + std::to_string(file_size) +
         " bytes)");
  if (max_len <= 0) fail("bad header: max_token_length = " + std::to_string(max_len));

  // Entries to the end of the file; each takes at least 8 bytes, so the count is bounded too.
  while (left > 0) {  // `read` consumes `left`
    const std::size_t i = pieces_.size();
    float score = 0;
    std::int32_t len = 0;
    if (left < sizeof score + sizeof len || !read(&score, sizeof score) || !read(&len, sizeof len))
      fail("truncated at token " + std::to_string(i) + ": " + std::to_string(left) +
           " byte(s) left, an entry needs at least 8 (score, length)");
    if (len < 0 || len > max_len)
      fail("token " + std::to_string(i) + " has length " + std::to_string(len) +
           " outside [0, max_token_length = " + std::to_string(max_len) + "]");
    if (static_cast<std::uintmax_t>(len) > left)
      fail("truncated inside token " + std::to_string(i) + ": its length is " +
           std::to_string(len) + " but the file has " + std::to_string(left) + " byte(s) left");
    std::string bytes(static_cast<std::size_t>(len), '\0');
    if (!read(bytes.data(), bytes.size())) fail("read failed inside token " + std::to_string(i));
    pieces_.push_back(std::move(bytes));
    scores_.push_back(score);
  }
  if (pieces_.size() < 3)
    fail("has " + std::to_string(pieces_.size()) +
         " token(s); a vocabulary needs at least 3 (ids 0 = <unk>, 1 = BOS, 2 = EOS)");
  if (vocab_size != 0 && pieces_.size() != vocab_size)
    fail("the tokenizer has " + std::to_string(pieces_.size()) +
         " tokens but the model's vocabulary has " + std::to_string(vocab_size) +
         " (a tokenizer for another model)");
  if (pieces_.size() > static_cast<std::size_t>(std::numeric_limits<token_id>::max()))
    fail("too many tokens");

  byte_value_.assign(pieces_.size(), -1);
  ids_.reserve(pieces_.size());
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    ids_.emplace(pieces_[i], static_cast<token_id>(i));  // first id wins on duplicates
    const std::string& s = pieces_[i];
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
      int value = 0;
      bool ok = true;
      for (std::size_t k = 3; k < 5; ++k) {
        const char ch = s[k];
        int d = -1;
        if (ch >= '0' && ch <= '9') d = ch - '0';
        if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
        if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
        ok = ok && d >= 0;
        value = value * 16 + d;
      }
      if (ok) byte_value_[i] = value;
    }
  }
}

inline std::vector<token_id> tokenizer::encode(std::string_view text,
                                               encode_options options) const {
  std::vector<token_id> out;
  out.reserve(text.size() + 3);  // one token per byte at most, plus BOS, the prefix and EOS
  if (options.bos) out.push_back(bos_id);
  const auto byte_token = [this](unsigned char b) -> token_id {
    const std::size_t id = std::size_t{b} + 3;
    if (id >= pieces_.size())
      throw std::out_of_range(std::string("llama2c::tokenizer::encode: byte 0x") +
                              "0123456789ABCDEF"[b >> 4] + "0123456789ABCDEF"[b & 15] +
                              " has no byte token in a vocabulary of " +
                              std::to_string(pieces_.size()));
    return static_cast<token_id>(id);
  };
  if (!text.empty()) {
    const token_id space = find(" ");
    out.push_back(space >= 0 ? space : byte_token(' '));
  }
  // One UTF-8 codepoint at a time (at most 4 bytes, as run.c). The buffer grows with the pieces
  // actually merged, never from a size the file claims.
  std::string buf;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) buf.clear();
    buf.push_back(static_cast<char>(c));
    const bool next_continues =
        i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (next_continues && buf.size() < 4) continue;
    const token_id id = find(buf);
    if (id >= 0) {
      out.push_back(id);
    } else {
      for (const char b : buf) out.push_back(byte_token(static_cast<unsigned char>(b)));
    }
    buf.clear();
  }
  // Greedy merges: the best-scoring adjacent pair first, leftmost on ties.
  while (out.size() >= 2) {
    float best_score = -1e10f;
    token_id best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t i = 0; i + 1 < out.size(); ++i) {
      buf.assign(pieces_[static_cast<std::size_t>(out[i])]);
      buf.append(pieces_[static_cast<std::size_t>(out[i + 1])]);
      const auto it = ids_.find(buf);
      if (it != ids_.end() && scores_[static_cast<std::size_t>(it->second)] > best_score) {
        best_score = scores_[static_cast<std::size_t>(it->second)];
        best_id = it->second;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    out[best_at] = best_id;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  if (options.eos) out.push_back(eos_id);
  return out;
}

inline std::string tokenizer::decode(token_id prev, token_id token) const {
  const std::size_t id = check(token, "decode");
  if (byte_value_[id] >= 0) return std::string(1, static_cast<char>(byte_value_[id]));
  std::string_view p = pieces_[id];
  if (prev == bos_id && !p.empty() && p.front() == ' ') p.remove_prefix(1);
  return std::string(p);
}

inline std::string tokenizer::decode(std::span<const token_id> tokens) const {
  std::string out;
  token_id prev = bos_id;
  for (const token_id t : tokens) {
    check(t, "decode");
    if (t != bos_id && t != eos_id) out += decode(prev, t);
    prev = t;
  }
  return out;
}

}  // namespace specdec::llama2c
