// tests/support/four_member_model.hpp - an engine author's first adapter, as README and
// docs/adapter.md teach it: the four required members of specdec::LanguageModel and nothing else
// (no max_size(), no append_tree), over any model it wraps by reference (whatever else that one
// has stays hidden). It counts its appends: the engine calls the decoder made.
#pragma once

#include <cstddef>
#include <span>

#include <specdec/types.hpp>

namespace specdec::test {

template <class Inner>
class four_member_model {
 public:
  explicit four_member_model(Inner& inner) : inner_(inner) {}
  std::size_t vocab_size() const { return inner_.vocab_size(); }
  std::size_t size() const { return inner_.size(); }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    inner_.append(tokens, logits);
    ++appends;
  }
  void truncate(std::size_t n) { inner_.truncate(n); }

  std::size_t appends = 0;  ///< append calls made (the decoder's engine calls)

 private:
  Inner& inner_;
};

}  // namespace specdec::test
