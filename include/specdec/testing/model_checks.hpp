// specdec/testing/model_checks.hpp - conformance checks (a)-(e) for any LanguageModel adapter:
// batched append, truncate then append, truncate at every length, size reporting, bad input
// refused; and (i) for the optional prefill: prefill then append equals append alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/detail/conformance.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

/// (a) One append of the whole sequence gives the same logits (within tolerance) as appending
/// it one token at a time.
template <class Source>
requires detail::model_source<Source> check_result
check_batched_append(Source& source, const conformance_options& o = {}) {
  return detail::run_check("batched_append", [&](check_result& r) {
    const auto batched = detail::reference(source, o);
    const std::span<const token_id> s(batched.seq);
    std::vector<float> single;
    detail::with_fresh(source, [&](auto& m) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const auto row = detail::append(m, s.subspan(i, 1));
        single.insert(single.end(), row.begin(), row.end());
      }
    });
    detail::comparer cmp(o.tolerance, batched.vocab, r.max_abs_diff, "batched", "token-by-token");
    cmp.rows(batched.logits, single, s, 0, "token-by-token append differs from one batched append");
  });
}

/// (b) Appending after a truncate equals a fresh context: junk appended and truncated away
/// leaves no trace in later logits.
template <class Source>
requires detail::model_source<Source> check_result
check_truncate_then_append(Source& source, const conformance_options& o = {}) {
  return detail::run_check("truncate_then_append", [&](check_result& r) {
    const auto ref = detail::reference(source, o);
    const auto& seq = ref.seq;
    detail::with_fresh(source, [&](auto& m) {
      const std::size_t v = m.vocab_size(), h = seq.size() / 2;
      const std::span<const token_id> s(seq);
      detail::append(m, s.first(h));
      std::vector<token_id> junk;
      for (std::size_t i = 0; i < 3; ++i)
        junk.push_back(static_cast<token_id>((static_cast<std::size_t>(seq[h]) + 1 + 2 * i) % v));
      detail::append(m, junk);
      m.truncate(h);
      detail::expect(m.size() == h, "size() is " + std::to_string(m.size()) + " after truncate(" +
                                        std::to_string(h) + ")");
      const auto got = detail::append(m, s.subspan(h));
      detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
      cmp.rows(std::span<const float>(ref.logits).subspan(h * v), got, s.subspan(h), h,
               "after appending " + std::to_string(junk.size()) + " junk tokens and truncate(" +
                   std::to_string(h) + "), re-appending differs from a fresh context");
    });
  });
}

/// (c) truncate(L) for every L from size()-1 down to 0, then re-appending the rest of the
/// sequence in one call, reproduces the logits of a single full append.
template <class Source>
requires detail::model_source<Source> check_result
check_truncate_every_length(Source& source, const conformance_options& o = {}) {
  return detail::run_check("truncate_every_length", [&](check_result& r) {
    detail::with_fresh(source, [&](auto& m) {
      const auto seq = detail::checked_sequence(o, m);
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), n = seq.size();
      const auto ref = detail::append(m, s);
      detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
      for (std::size_t len = n; len-- > 0;) {
        m.truncate(len);
        detail::expect(m.size() == len, "size() is " + std::to_string(m.size()) +
                                            " after truncate(" + std::to_string(len) + ")");
        const auto got = detail::append(m, s.subspan(len));
        cmp.rows(std::span<const float>(ref).subspan(len * v), got, s.subspan(len), len,
                 "after truncate(" + std::to_string(len) + ") and re-appending " +
                     std::to_string(n - len) + " tokens");
      }
    });
  });
}

/// (d) vocab_size() is positive and constant; size() starts at 0 (fresh model) and follows
/// appends and truncates; truncate(size()) is a no-op; max_size() bounds size().
template <class Source>
requires detail::model_source<Source> check_result
check_size_reporting(Source& source, const conformance_options& o = {}) {
  return detail::run_check("size_reporting", [&](check_result& r) {
    detail::with_fresh(source, [&](auto& m) {
      const auto seq = detail::checked_sequence(o, m);
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), n = seq.size();
      detail::expect(v > 0, "vocab_size() is 0");
      detail::expect(m.size() == 0, "a fresh model (or one after truncate(0)) reports size() = " +
                                        std::to_string(m.size()));
      std::size_t expected = 0;
      for (std::size_t step = 1; expected < n; ++step) {  // appends of 1, 2, 3, ... tokens
        const std::size_t k = std::min(step, n - expected);
        detail::append(m, s.subspan(expected, k));
        expected += k;
        detail::expect(m.size() == expected, "size() is " + std::to_string(m.size()) +
                                                 " after appending " + std::to_string(expected) +
                                                 " tokens in steps of 1, 2, ...");
        detail::expect(m.vocab_size() == v, "vocab_size() changed from " + std::to_string(v) +
                                                " to " + std::to_string(m.vocab_size()));
        detail::expect(max_size_of(m) >= m.size(),
                       "max_size() = " + std::to_string(max_size_of(m)) +
                           " is below size() = " + std::to_string(m.size()));
      }
      m.truncate(n);
      detail::expect(m.size() == n, "truncate(size()) changed size() from " + std::to_string(n) +
                                        " to " + std::to_string(m.size()));
      for (const std::size_t len : {n - 1, n / 2, std::size_t{0}}) {
        m.truncate(len);
        detail::expect(m.size() == len, "size() is " + std::to_string(m.size()) +
                                            " after truncate(" + std::to_string(len) + ")");
      }
      r.message = "vocab_size " + std::to_string(v) + ", max_size " +
                  (requires { m.max_size(); } ? std::to_string(max_size_of(m)) : std::string("none")) +
                  ", sizes consistent";
    });
  });
}

/// (e) Bad input throws and leaves the context unchanged: token ids -1 and vocab_size(), a bad
/// id after a good one, a wrong logits size; the logits after the rejected calls equal a clean
/// run's. With a small max_size(): the exact capacity boundary is enforced.
template <class Source>
requires detail::model_source<Source> check_result
check_rejects_bad_input(Source& source, const conformance_options& o = {}) {
  return detail::run_check("rejects_bad_input", [&](check_result& r) {
    const auto ref = detail::reference(source, o);
    const auto& seq = ref.seq;
    detail::with_fresh(source, [&](auto& m) {
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), h = seq.size() / 2;
      detail::append(m, s.first(h));
      const auto bad_v = static_cast<token_id>(
          std::min<std::size_t>(v, static_cast<std::size_t>(std::numeric_limits<token_id>::max())));
      struct attempt {
        std::vector<token_id> tokens;
        std::size_t logits_rows;
        std::string what;
      };
      const std::vector<attempt> attempts{
          {{bad_v}, 1, "token " + std::to_string(bad_v) + " (= vocab_size)"},
          {{-1}, 1, "token -1"},
          {{seq[h], bad_v}, 2, "a good token followed by token " + std::to_string(bad_v)},
          {{seq[h]}, 2, "a logits span of 2 rows for 1 token"},
      };
      for (const attempt& a : attempts) {
        std::vector<float> logits(a.logits_rows * v);
        detail::expect_throws([&] { m.append(a.tokens, std::span<float>(logits)); },
                              "append of " + a.what + " at size " + std::to_string(h));
        detail::expect(m.size() == h, "append of " + a.what + " threw but changed size() from " +
                                          std::to_string(h) + " to " + std::to_string(m.size()));
      }
      const auto got = detail::append(m, s.subspan(h));
      detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
      cmp.rows(std::span<const float>(ref.logits).subspan(h * v), got, s.subspan(h), h,
               "after rejected appends, the logits differ from a clean run");

      const std::size_t cap = max_size_of(m);
      if (!o.check_capacity || cap > o.capacity_probe_limit) {
        r.message = "largest |diff| " + detail::num(r.max_abs_diff) + "; capacity not probed";
        return;
      }
      m.truncate(0);
      std::vector<token_id> fill(64);
      while (m.size() + 1 < cap) {
        const std::size_t k = std::min<std::size_t>(fill.size(), cap - 1 - m.size());
        for (std::size_t i = 0; i < k; ++i) fill[i] = seq[(m.size() + i) % seq.size()];
        detail::append(m, std::span<const token_id>(fill).first(k));
      }
      const std::size_t before = m.size();
      detail::expect_throws([&] { detail::append(m, s.first(2)); },
                            "appending 2 tokens at size " + std::to_string(before) +
                                " with max_size() = " + std::to_string(cap));
      detail::expect(m.size() == before, "the refused append past max_size() changed size() to " +
                                             std::to_string(m.size()));
      detail::append(m, s.first(1));  // exactly at capacity: must work
      detail::expect(m.size() == cap, "size() is " + std::to_string(m.size()) +
                                          " after filling to max_size() = " + std::to_string(cap));
      r.message = "largest |diff| " + detail::num(r.max_abs_diff) +
                  "; capacity boundary at max_size() = " + std::to_string(cap) + " enforced";
    });
  });
}

/// (i) PrefillLanguageModel: prefill then append equals append alone. From an empty context,
/// prefill of the first half leaves size() = half and appending the rest gives the rows of one
/// full append; after an append of the first token, a prefill of the next ones does the same
/// (prefill continues a context); a prefill of a bad token (-1 or vocab_size()) throws and
/// changes nothing. A prefill that drops, adds or alters a token fails on the size or the rows.
template <class Source>
requires detail::model_source<Source> && PrefillLanguageModel<typename detail::model_of<Source>::type>
check_result check_prefill(Source& source, const conformance_options& o = {}) {
  return detail::run_check("prefill", [&](check_result& r) {
    const auto ref = detail::reference(source, o);
    const auto& seq = ref.seq;
    const std::size_t v = ref.vocab, n = seq.size(), h = std::max<std::size_t>(1, n / 2);
    const std::span<const token_id> s(seq);
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff, "append alone", "prefill then append");
    for (const std::size_t first : {std::size_t{0}, std::size_t{1}}) {  // context before prefill
      if (first >= h) continue;
      detail::with_fresh(source, [&](auto& m) {
        if (first > 0) detail::append(m, s.first(first));
        m.prefill(s.subspan(first, h - first));
        detail::expect(m.size() == h, "size() is " + std::to_string(m.size()) + " after " +
                                          (first ? "append(1 token) then " : "") + "prefill(" +
                                          std::to_string(h - first) + " tokens)");
        const auto got = detail::append(m, s.subspan(h));
        cmp.rows(std::span<const float>(ref.logits).subspan(h * v), got, s.subspan(h), h,
                 std::string("appending after ") + (first ? "append(1 token) then " : "") +
                     "prefill(" + std::to_string(h - first) + " tokens) differs from one append");
      });
    }
    detail::with_fresh(source, [&](auto& m) {
      detail::append(m, s.first(h));
      const auto bad_v = static_cast<token_id>(std::min<std::size_t>(
          v, static_cast<std::size_t>(std::numeric_limits<token_id>::max())));
      for (const std::vector<token_id>& bad :
           {std::vector<token_id>{seq[h], bad_v}, std::vector<token_id>{-1}}) {
        const std::string what = "prefill of a token " + std::to_string(bad.back()) +
                                 " (vocab_size " + std::to_string(v) + ")";
        detail::expect_throws([&] { m.prefill(std::span<const token_id>(bad)); }, what);
        detail::expect(m.size() == h, what + " threw but changed size() from " +
                                          std::to_string(h) + " to " + std::to_string(m.size()));
      }
      const auto got = detail::append(m, s.subspan(h));
      cmp.rows(std::span<const float>(ref.logits).subspan(h * v), got, s.subspan(h), h,
               "after refused prefills, the logits differ from a clean run");
    });
    r.message = "largest |diff| " + detail::num(r.max_abs_diff) + "; prefill at size 0 and 1, " +
                "bad tokens refused";
  });
}

}  // namespace specdec::testing
