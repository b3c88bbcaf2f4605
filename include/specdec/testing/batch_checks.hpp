// specdec/testing/batch_checks.hpp - conformance checks (g1)-(g5) for a BatchLanguageModel
// adapter: rows independent of the rest of the batch (bit for bit), truncating one sequence
// leaves the others alone, sequences created and released, bad input refused with nothing
// changed, (for BatchTreeLanguageModel) tree entries equal to chains and (g6, for
// BatchPrefillLanguageModel) prefill then score equal to scoring alone.
//
// Each check creates its own sequences on the model it is given and releases them at the end;
// failures are returned as check_results like the model checks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "specdec/concepts/batch_language_model.hpp"
#include "specdec/detail/conformance.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

namespace detail {

/// The sequences a check created, released when the check ends (even when it fails).
template <class M>
struct batch_sequences {
  M& m;
  std::vector<sequence_id> ids;
  sequence_id add() {
    ids.push_back(m.create_sequence());
    expect(m.size(ids.back()) == 0, "a new sequence reports size " +
                                        std::to_string(m.size(ids.back())));
    return ids.back();
  }
  void drop(sequence_id id) {
    for (auto& x : ids)
      if (x == id) x = ids.back();
    ids.pop_back();
    m.release_sequence(id);
  }
  ~batch_sequences() {
    for (sequence_id id : ids) try {
        m.release_sequence(id);
      } catch (...) {
      }
  }
};

/// The check's token sequence: conformance_options::tokens, or 16 tokens (7 i + 1) % V.
template <class M>
std::vector<token_id> batch_sequence_for(const conformance_options& o, const M& m) {
  std::vector<token_id> t = o.tokens;
  const std::size_t v = m.vocab_size();
  if (t.empty())
    for (std::size_t i = 0; i < 16; ++i) t.push_back(static_cast<token_id>((7 * i + 1) % v));
  for (token_id x : t)
    if (x < 0 || static_cast<std::size_t>(x) >= v)
      throw check_failed{"conformance_options::tokens holds " + std::to_string(x) +
                         ", outside the model's vocabulary"};
  if (t.size() < 8)
    throw check_failed{"conformance_options::tokens has " + std::to_string(t.size()) +
                       " tokens; the batch checks need at least 8"};
  return t;
}

/// Scores `tokens` (a chain) for sequence id alone; returns the rows.
template <class M>
std::vector<float> score_alone(M& m, sequence_id id, std::span<const token_id> tokens) {
  std::vector<float> out(tokens.size() * m.vocab_size());
  const batch_entry e{id, tokens, {}, std::span<float>(out)};
  m.score(std::span<const batch_entry>(&e, 1));
  return out;
}

}  // namespace detail

/// (g1) Three sequences with contexts of different lengths scored in one call, in two orders,
/// give exactly (bit for bit: tolerance 0) the rows each gives scored alone. The batch decoder's
/// identical-output guarantee rests on this.
template <BatchLanguageModel M>
check_result check_batch_rows_independent(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_rows_independent", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    const std::size_t v = m.vocab_size(), n = seq.size();
    const std::size_t cut[3] = {1, n / 2, n - 3};  // context lengths before the scored tokens
    detail::batch_sequences<M> alone{m, {}}, together{m, {}}, reversed{m, {}};
    std::vector<std::vector<float>> want(3), got(3), got_reversed(3);
    for (std::size_t i = 0; i < 3; ++i) {
      for (auto* set : {&alone, &together, &reversed}) {
        const sequence_id id = set->add();
        detail::score_alone(m, id, s.first(cut[i]));
      }
      want[i] = detail::score_alone(m, alone.ids[i], s.subspan(cut[i], 3));
    }
    for (int pass = 0; pass < 2; ++pass) {
      auto& rows = pass == 0 ? got : got_reversed;
      auto& set = pass == 0 ? together : reversed;
      std::vector<batch_entry> batch;
      for (std::size_t j = 0; j < 3; ++j) {
        const std::size_t i = pass == 0 ? j : 2 - j;
        rows[i].resize(3 * v);
        batch.push_back({set.ids[i], s.subspan(cut[i], 3), {}, std::span<float>(rows[i])});
      }
      m.score(std::span<const batch_entry>(batch));
    }
    for (std::size_t i = 0; i < 3; ++i) {
      detail::comparer exact(0.0f, v, r.max_abs_diff, "alone", "in a batch");
      exact.rows(want[i], got[i], s.subspan(cut[i], 3), cut[i],
                 "sequence " + std::to_string(i) + " scored in a batch of 3 differs from alone");
      exact.rows(want[i], got_reversed[i], s.subspan(cut[i], 3), cut[i],
                 "sequence " + std::to_string(i) + " in a batch in reverse order differs");
    }
    r.message = "3 sequences, rows identical to scoring each alone, in either order";
  });
}

/// (g2) Truncating one sequence (and appending junk to it, then truncating that away) changes
/// nothing in another; the truncated sequence then scores as a fresh one would.
template <BatchLanguageModel M>
check_result check_batch_truncate_isolated(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_truncate_isolated", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    const std::size_t v = m.vocab_size(), n = seq.size(), h = n / 2;
    detail::batch_sequences<M> set{m, {}};
    const sequence_id a = set.add(), b = set.add(), fresh = set.add();
    const auto ref = detail::score_alone(m, fresh, s);
    detail::score_alone(m, a, s.first(h));
    detail::score_alone(m, b, s.first(h));
    detail::score_alone(m, a, s.subspan(h, 2));
    m.truncate(a, 1);
    detail::expect(m.size(a) == 1, "size(a) is " + std::to_string(m.size(a)) + " after truncate(a, 1)");
    detail::expect(m.size(b) == h, "truncating sequence a changed size(b) from " +
                                       std::to_string(h) + " to " + std::to_string(m.size(b)));
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
    cmp.rows(std::span<const float>(ref).subspan(h * v), detail::score_alone(m, b, s.subspan(h)),
             s.subspan(h), h, "after truncating another sequence, this one's logits differ");
    cmp.rows(std::span<const float>(ref).subspan(v), detail::score_alone(m, a, s.subspan(1)),
             s.subspan(1), 1, "after truncate(a, 1), re-appending differs from a fresh sequence");
  });
}

/// (g3) create_sequence gives empty sequences with distinct ids; after release_sequence the id
/// is refused by size, score and truncate, and never handed out again.
template <BatchLanguageModel M>
check_result check_batch_lifecycle(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_lifecycle", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    detail::batch_sequences<M> set{m, {}};
    const sequence_id a = set.add(), b = set.add();
    detail::expect(a != b, "two live sequences share the id " + std::to_string(a));
    detail::score_alone(m, a, s.first(2));
    set.drop(a);
    std::vector<float> logits(m.vocab_size());
    const batch_entry e{a, s.first(1), {}, std::span<float>(logits)};
    detail::expect_throws([&] { (void)m.size(a); }, "size() of a released sequence");
    detail::expect_throws([&] { m.score(std::span<const batch_entry>(&e, 1)); },
                          "score() of a released sequence");
    detail::expect_throws([&] { m.truncate(a, 0); }, "truncate() of a released sequence");
    for (int i = 0; i < 3; ++i) {
      const sequence_id c = set.add();
      detail::expect(c != a, "the released id " + std::to_string(a) + " was handed out again");
    }
    r.message = "ids distinct, released ids refused and not reused";
  });
}

/// (g4) A call with one bad entry (a token -1 or vocab_size(), a wrong logits size, the same
/// sequence twice, more rows than max_batch_tokens()) throws and changes no sequence: sizes
/// stay and the next rows equal a clean run's.
template <BatchLanguageModel M>
check_result check_batch_rejects_bad_input(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_rejects_bad_input", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    const std::size_t v = m.vocab_size(), n = seq.size(), h = n / 2;
    detail::batch_sequences<M> set{m, {}};
    const sequence_id a = set.add(), b = set.add(), ref_id = set.add();
    const auto ref = detail::score_alone(m, ref_id, s);
    detail::score_alone(m, a, s.first(h));
    detail::score_alone(m, b, s.first(h));
    const auto bad_v = static_cast<token_id>(
        std::min<std::size_t>(v, static_cast<std::size_t>(std::numeric_limits<token_id>::max())));
    const std::vector<token_id> bad_high{bad_v}, bad_low{-1};
    std::vector<float> la(2 * v), lb(2 * v), wrong(v);
    const auto good = s.subspan(h, 2);
    struct attempt {
      std::vector<batch_entry> batch;
      std::string what;
    };
    std::vector<attempt> attempts{
        {{{a, good, {}, la}, {b, bad_high, {}, std::span<float>(lb).first(v)}},
         "token " + std::to_string(bad_v) + " (= vocab_size) in the second entry"},
        {{{a, good, {}, la}, {b, bad_low, {}, std::span<float>(lb).first(v)}},
         "token -1 in the second entry"},
        {{{a, good, {}, la}, {b, good, {}, wrong}}, "a logits span of 1 row for 2 tokens"},
        {{{a, good, {}, la}, {a, good, {}, lb}}, "the same sequence twice"},
    };
    const std::size_t limit = max_batch_tokens_of(m);
    std::vector<token_id> many;
    std::vector<float> lmany;
    if (limit < 4096) {
      for (std::size_t i = 0; i <= limit; ++i) many.push_back(seq[i % n]);
      lmany.resize(many.size() * v);
      attempts.push_back({{{a, many, {}, lmany}},
                          std::to_string(many.size()) + " rows with max_batch_tokens() = " +
                              std::to_string(limit)});
    }
    for (const attempt& t : attempts) {
      detail::expect_throws([&] { m.score(std::span<const batch_entry>(t.batch)); },
                            "score() with " + t.what);
      detail::expect(m.size(a) == h && m.size(b) == h,
                     "score() with " + t.what + " threw but changed a size");
    }
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
    for (const sequence_id id : {a, b})
      cmp.rows(std::span<const float>(ref).subspan(h * v), detail::score_alone(m, id, s.subspan(h)),
               s.subspan(h), h, "after refused calls, the logits differ from a clean run");
  });
}

/// (g5) BatchTreeLanguageModel: a tree entry's rows equal each node's path scored as a chain,
/// and commit(id, path) leaves the sequence as appending the path would.
template <BatchTreeLanguageModel M>
check_result check_batch_tree(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_tree", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    const std::size_t v = m.vocab_size(), h = seq.size() / 2;
    // Root s[h] with children s[h+1], s[h+2]; s[h+1] has child s[h+3].
    const std::vector<token_id> tokens{seq[h], seq[h + 1], seq[h + 2], seq[h + 3]};
    const std::vector<std::int32_t> parents{-1, 0, 0, 1};
    detail::batch_sequences<M> set{m, {}};
    const sequence_id t = set.add(), c = set.add(), c2 = set.add();
    for (const sequence_id id : {t, c, c2}) detail::score_alone(m, id, s.first(h));
    std::vector<float> rows(tokens.size() * v);
    const batch_entry e{t, tokens, parents, std::span<float>(rows)};
    m.score(std::span<const batch_entry>(&e, 1));
    const auto chain = detail::score_alone(m, c, std::vector<token_id>{seq[h], seq[h + 1], seq[h + 3]});
    const auto other = detail::score_alone(m, c2, std::vector<token_id>{seq[h], seq[h + 2]});
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff, "chain", "tree");
    const std::span<const float> tr(rows);
    cmp.rows(std::span<const float>(chain).first(2 * v), tr.first(2 * v), s.subspan(h, 2), h,
             "tree nodes 0, 1 differ from the chain");
    cmp.rows(std::span<const float>(chain).subspan(2 * v), tr.subspan(3 * v), s.subspan(h + 3, 1),
             h + 2, "tree node 3 differs from the chain");
    cmp.rows(std::span<const float>(other).subspan(v), tr.subspan(2 * v, v), s.subspan(h + 2, 1),
             h + 1, "tree node 2 differs from its path");
    const std::vector<std::int32_t> path{0, 1, 3};
    m.commit(t, path);
    detail::expect(m.size(t) == h + 3, "after commit of a 3-node path, size is " +
                                           std::to_string(m.size(t)));
    const std::vector<token_id> next{seq[h + 4]};
    cmp.rows(detail::score_alone(m, c, next), detail::score_alone(m, t, next), next, h + 3,
             "after commit, the sequence differs from one that appended the path");
  });
}

/// (g6) BatchPrefillLanguageModel: prefill(id, tokens) then score equals scoring alone. A
/// sequence prefilled with the first half (beside another sequence prefilled with a different
/// length) has size() = half and scores the rest as a sequence scored whole, and so does the other
/// after a second prefill; a prefill holding a bad token throws and changes nothing.
template <BatchPrefillLanguageModel M>
check_result check_batch_prefill(M& m, const conformance_options& o = {}) {
  return detail::run_check("batch_prefill", [&](check_result& r) {
    const auto seq = detail::batch_sequence_for(o, m);
    const std::span<const token_id> s(seq);
    const std::size_t v = m.vocab_size(), n = seq.size(), h = n / 2;
    detail::batch_sequences<M> set{m, {}};
    const sequence_id ref_id = set.add(), a = set.add(), b = set.add();
    const auto ref = detail::score_alone(m, ref_id, s);
    m.prefill(a, s.first(h));
    m.prefill(b, s.first(1));
    detail::expect(m.size(a) == h, "size(a) is " + std::to_string(m.size(a)) + " after prefill(a, " +
                                       std::to_string(h) + " tokens)");
    detail::expect(m.size(b) == 1, "size(b) is " + std::to_string(m.size(b)) +
                                       " after prefill(b, 1 token)");
    const auto bad_v = static_cast<token_id>(
        std::min<std::size_t>(v, static_cast<std::size_t>(std::numeric_limits<token_id>::max())));
    const std::vector<token_id> bad{seq[h], bad_v};
    detail::expect_throws([&] { m.prefill(a, std::span<const token_id>(bad)); },
                          "prefill of token " + std::to_string(bad_v) + " (= vocab_size)");
    detail::expect(m.size(a) == h, "a refused prefill changed size(a) to " + std::to_string(m.size(a)));
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff, "scored whole", "prefill then score");
    cmp.rows(std::span<const float>(ref).subspan(h * v), detail::score_alone(m, a, s.subspan(h)),
             s.subspan(h), h, "scoring after prefill(" + std::to_string(h) +
                                  " tokens) differs from one score of the whole sequence");
    m.prefill(b, s.subspan(1, h - 1));
    cmp.rows(std::span<const float>(ref).subspan(h * v), detail::score_alone(m, b, s.subspan(h)),
             s.subspan(h), h, "scoring after prefill(1 token) and prefill(" +
                                  std::to_string(h - 1) + " tokens) differs from one score");
  });
}

/// Runs (g1)-(g4), (g5) for a BatchTreeLanguageModel and (g6) for a BatchPrefillLanguageModel.
template <BatchLanguageModel M>
conformance_report run_batch_checks(M& m, const conformance_options& o = {}) {
  conformance_report rep;
  rep.checks.push_back(check_batch_rows_independent(m, o));
  rep.checks.push_back(check_batch_truncate_isolated(m, o));
  rep.checks.push_back(check_batch_lifecycle(m, o));
  rep.checks.push_back(check_batch_rejects_bad_input(m, o));
  if constexpr (BatchTreeLanguageModel<M>) rep.checks.push_back(check_batch_tree(m, o));
  if constexpr (BatchPrefillLanguageModel<M>) rep.checks.push_back(check_batch_prefill(m, o));
  for (const check_result& c : rep.checks) {
    rep.ok = rep.ok && c.ok;
    rep.message += (c.ok ? "ok   " : "FAIL ") + c.message + "\n";
  }
  return rep;
}

}  // namespace specdec::testing
