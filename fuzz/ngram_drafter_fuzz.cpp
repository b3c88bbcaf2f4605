// fuzz/ngram_drafter_fuzz.cpp - specdec::ngram_drafter (prompt lookup) against a brute-force
// rescan (tests/support/naive_prompt_lookup.hpp), through its public API only, over random
// interleavings of: appending tokens to the history (the decoder's new tokens), accept (tokens
// the drafter is told about), propose, propose_candidates, propose_tree, reset,
// set_prompt_length and rollbacks (the history cut back; the next call rebuilds the index).
// The options (n-gram range, K cap, match and search policy, candidate scan) come from the input;
// tokens from a small alphabet so that n-grams repeat. Half the inputs run the unbounded lookup
// (max_ngram = 0) with any of the three match rules and an adaptive_factor, and half of those
// with a cross-request cache (ngram_cache, 4096-byte bound) filled with documents from the input
// first: documents beyond the bound must be refused, the oldest evicted, and the drafts must
// equal the rescan over the documents the snapshot kept.
// Properties checked after every operation:
//   1. propose(history, k) equals the rescan's proposal;
//   2. propose_candidates(history, k, n) equals the rescan's candidates, in order;
//   3. propose_tree builds the trie of those candidates under history.back(), deterministic;
//   4. no operation throws on valid input, crashes, leaks or reads out of bounds; invalid
//      options throw std::invalid_argument at construction.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <specdec/draft/ngram_cache.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/math/rng.hpp>
#include <specdec/tree/token_tree.hpp>
#include <specdec/tree/tree_draft.hpp>
#include <stdexcept>
#include <support/naive_prompt_lookup.hpp>
#include <vector>

#include "fuzz_input.hpp"

namespace {
using specdec::token_id;
using specdec::fuzz::input;

std::string show(const std::vector<token_id>& v) {
  std::string s = "[";
  for (const token_id t : v) s += std::to_string(t) + " ";
  return s + "]";
}
std::string describe(const specdec::ngram_options& o, const std::vector<token_id>& history,
                     std::size_t prompt, std::size_t k) {
  return "min_ngram " + std::to_string(o.min_ngram) + " max_ngram " + std::to_string(o.max_ngram) +
         " max_draft " + std::to_string(o.max_draft) + " match " +
         std::to_string(static_cast<int>(o.match)) + " search " +
         std::to_string(static_cast<int>(o.search)) + " prompt " + std::to_string(prompt) +
         " adaptive " + std::to_string(o.adaptive_factor) + " cache " +
         std::to_string(o.cache ? o.cache->document_count() : 0) + " k " + std::to_string(k) +
         " history " + show(history);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  specdec::ngram_options o;
  o.min_ngram = in.below(5);  // 0 is invalid on purpose
  o.max_ngram = o.min_ngram + in.below(6);
  o.max_draft = in.below(10);
  o.match = in.byte() % 2 ? specdec::ngram_match_policy::longest_continuation
                          : specdec::ngram_match_policy::most_recent;
  o.search = in.byte() % 2 ? specdec::ngram_search_policy::prompt_only
                           : specdec::ngram_search_policy::prompt_and_generated;
  o.max_candidate_scan = in.below(6);
  const std::size_t alphabet = 1 + in.below(5);
  const std::size_t mode = in.below(4);  // 0, 1: bounded; 2: unbounded; 3: unbounded + cache
  std::vector<std::vector<token_id>> inserted;
  if (mode >= 2) {
    o.max_ngram = 0;
    o.match = static_cast<specdec::ngram_match_policy>(in.below(3));
    o.adaptive_factor = 0.75 * static_cast<double>(in.below(4));
  }
  if (mode == 3) {
    auto cache = std::make_shared<specdec::ngram_cache>(
        specdec::ngram_cache_options{.max_bytes = 4096});
    for (std::size_t i = in.below(5); i > 0; --i) {
      std::vector<token_id> doc(in.below(90));
      for (auto& x : doc) x = static_cast<token_id>(in.below(alphabet));
      const bool fits = specdec::ngram_cache::snapshot::bytes_bound(doc.size(), 1) <= 4096;
      const std::size_t before = cache->document_count();
      try {
        cache->insert(doc);
        SPECDEC_FUZZ_CHECK(fits, "a document beyond the bound was accepted");
        if (!doc.empty()) inserted.push_back(doc);
      } catch (const std::invalid_argument&) {
        SPECDEC_FUZZ_CHECK(!fits, "a document within the bound was refused");
        SPECDEC_FUZZ_CHECK(cache->document_count() == before, "a refused insert changed the cache");
      }
      SPECDEC_FUZZ_CHECK(cache->memory_bytes() <= 4096, "the cache exceeds its bound");
    }
    o.cache = cache;
  }
  const bool options_valid = o.min_ngram >= 1 && o.max_draft >= 1 && o.max_candidate_scan >= 1;
  std::optional<specdec::ngram_drafter> d;
  try {
    d.emplace(o);
  } catch (const std::invalid_argument&) {
    SPECDEC_FUZZ_CHECK(!options_valid, "valid options refused");
    return 0;
  }
  SPECDEC_FUZZ_CHECK(options_valid, "invalid options accepted");

  specdec::test::naive_prompt_lookup ref{o, 0};
  if (o.cache) {  // the newest documents, oldest first, none skipped
    const auto snapshot = o.cache->current();
    for (std::size_t i = 0; i < snapshot->document_count(); ++i)
      ref.documents.emplace_back(snapshot->document(i).begin(), snapshot->document(i).end());
    SPECDEC_FUZZ_CHECK(ref.documents.size() <= inserted.size() &&
                           std::equal(ref.documents.begin(), ref.documents.end(),
                                      inserted.end() - static_cast<std::ptrdiff_t>(
                                                           ref.documents.size())),
                       "the cache kept other than the newest documents");
  }
  // The drafter's documented bookkeeping, restated: the prompt is the first history it sees
  // after construction or reset (or a rebuild after a rollback), unless set_prompt_length said.
  bool synced = false, prompt_explicit = false;
  std::size_t indexed = 0;
  std::vector<token_id> history;
  specdec::rng g(1);
  const specdec::sampling_params sp{};
  specdec::tree_draft tree_out;

  const auto sync = [&] {
    if (!synced || history.size() < indexed) {
      if (!prompt_explicit) ref.prompt_length = history.size();
      synced = true;
    }
    indexed = history.size();
  };
  const auto some_tokens = [&] {
    std::vector<token_id> t(in.below(6));
    for (auto& x : t) x = static_cast<token_id>(in.below(alphabet));
    return t;
  };

  static const bool trace = std::getenv("SPECDEC_FUZZ_TRACE") != nullptr;
  while (in.left() > 0 && history.size() < 400) {
    const std::size_t op = in.below(9);
    if (trace)
      std::fprintf(stderr, "op %zu history %s drafter prompt %zu model prompt %zu\n", op,
                   show(history).c_str(), d->prompt_length(), ref.prompt_length);
    switch (op) {
      case 0:
      case 1: {  // the decoder appended tokens; the drafter sees them at its next call
        const auto t = some_tokens();
        history.insert(history.end(), t.begin(), t.end());
        break;
      }
      case 2: {  // accept: tokens joined the history and the drafter is told
        // accept() extends what the drafter has seen, so it must have seen the history so far:
        // a decoder proposes before it accepts. Bring it up to date as the decoder would.
        if (synced && indexed != history.size()) {
          sync();
          SPECDEC_FUZZ_CHECK(d->propose(history, 0).empty(), "propose with k = 0");
        }
        const auto t = some_tokens();
        history.insert(history.end(), t.begin(), t.end());
        d->accept(t);
        if (synced) indexed += t.size();
        break;
      }
      case 3: {
        const std::size_t k = in.below(12);
        sync();
        const auto got = d->propose(history, k);
        const auto want = ref.propose(history, k);
        SPECDEC_FUZZ_CHECK(got == want, "propose differs from the rescan: " +
                                            describe(o, history, ref.prompt_length, k) + " drafter prompt " + std::to_string(d->prompt_length()) + " got " +
                                            show(got) + " want " + show(want));
        break;
      }
      case 4: {
        const std::size_t k = in.below(12), n = in.below(6);
        sync();
        const auto got = d->propose_candidates(history, k, n);
        SPECDEC_FUZZ_CHECK(got == ref.candidates(history, k, n),
                           "propose_candidates differs from the rescan");
        break;
      }
      case 5: {
        std::vector<std::size_t> branching(in.below(5));
        for (auto& b : branching) b = 1 + in.below(4);
        if (history.empty()) break;  // the decoder never drafts without a history
        // An empty branching returns the root alone without reading the history (so it does not
        // make that history the prompt either).
        if (!branching.empty()) sync();
        d->propose_tree(history, branching, sp, g, specdec::candidate_draw::iid, tree_out);
        SPECDEC_FUZZ_CHECK(tree_out.draw == specdec::candidate_draw::deterministic, "draw");
        const auto expected =
            branching.empty()
                ? specdec::token_tree(history.back())
                : specdec::token_tree::from_candidates(
                      history.back(), ref.candidates(history, branching.size(), branching[0]),
                      branching);  // the trie within the shape, node by node
        SPECDEC_FUZZ_CHECK(tree_out.tree == expected, "propose_tree differs from the rescan");
        break;
      }
      case 6:
        d->reset();
        synced = prompt_explicit = false;
        indexed = 0;
        ref.prompt_length = 0;
        break;
      case 7: {  // rollback: the history is cut back, and the drafter hears of it at once
        history.resize(history.size() - in.below(history.size() + 1));
        const std::size_t k = in.below(12);
        sync();
        SPECDEC_FUZZ_CHECK(d->propose(history, k) == ref.propose(history, k),
                           "propose after a rollback differs from the rescan");
        break;
      }
      default: {
        const std::size_t n = in.below(history.size() + 2);
        d->set_prompt_length(n);
        prompt_explicit = true;
        ref.prompt_length = n;
        break;
      }
    }
  }
  return 0;
}
