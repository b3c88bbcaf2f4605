// specdec/testing.hpp - the adapter conformance kit: checks an engine author runs against their
// own LanguageModel / TreeLanguageModel adapter before trusting specdec's guarantees to it.
//
// Every check takes a *source*: either a model (each check first resets it with truncate(0)) or
// a factory, a callable returning a fresh model by value (each check builds its own, so a broken
// truncate cannot hide behind another check's state). Checks never throw for a failing model:
// they return a check_result whose message says which check, position, token and logit differ,
// and the largest absolute difference seen. Free of any test framework.
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
#include "specdec/types.hpp"

namespace specdec::testing {

/// What the checks feed the model and how close two evaluations must be.
struct conformance_options {
  /// The token sequence used as context. Empty: 16 tokens (7 * i + 1) % vocab_size, fewer if
  /// max_size() is small. Needs at least 2 tokens.
  std::vector<token_id> tokens;
  /// Largest accepted |difference| between logits that must agree (e.g. batched vs
  /// token-by-token append: floating-point summation order differs, so allow for it). >= 0.
  float tolerance = 1e-4f;
  /// The tree for the tree checks (parents[i] = -1 or an earlier index). Empty: a 7-node tree
  /// with two roots whose tokens come from the sequence.
  std::vector<token_id> tree_tokens;
  std::vector<std::int32_t> tree_parents;
  /// Fill the context to max_size() and check the boundary is enforced exactly, when the model
  /// has a max_size() no larger than capacity_probe_limit.
  bool check_capacity = true;
  std::size_t capacity_probe_limit = 4096;
};

/// The outcome of one check. `message` starts with the check's name, then says what differs and
/// where (position, token, logit, values, largest |diff|) on failure, or the largest difference
/// seen on success.
struct check_result {
  std::string name;
  bool ok = true;
  std::string message;
  float max_abs_diff = 0.0f;  ///< largest |logit difference| compared (0 if none compared)
};

/// The outcome of run_all: ok when every check is; `message` has one line per check.
struct conformance_report {
  bool ok = true;
  std::string message;
  std::vector<check_result> checks;
};

namespace detail {

/// A factory: callable with no arguments, returning a LanguageModel by value.
template <class S>
concept model_factory = std::invocable<S&> && LanguageModel<std::invoke_result_t<S&>>;

template <class S>
concept model_source = LanguageModel<S> || model_factory<S>;

template <class S>
struct model_of {
  using type = S;
};
template <class S>
  requires(!LanguageModel<S> && model_factory<S>)
struct model_of<S> {
  using type = std::invoke_result_t<S&>;
};

/// Calls fn(model&) on a fresh model: a new one from a factory, or `source` after truncate(0).
template <class S, class F>
void with_fresh(S& source, F&& fn) {
  if constexpr (LanguageModel<S>) {
    source.truncate(0);
    std::forward<F>(fn)(source);
  } else {
    auto m = source();
    std::forward<F>(fn)(m);
  }
}

/// Thrown inside a check to stop it with a failure message; never escapes the kit.
struct check_failed {
  std::string message;
};

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Compares rows of logits; keeps the largest difference in `max_out` (a result's field).
class comparer {
 public:
  comparer(float tolerance, std::size_t vocab, float& max_out, std::string expected_name = "expected",
           std::string actual_name = "got")
      : tol_(tolerance), v_(vocab), max_(max_out), e_name_(std::move(expected_name)),
        a_name_(std::move(actual_name)) {}

  /// Rows `expected` and `actual` (n * V each) are the logits after positions first..first+n-1,
  /// whose tokens are `tokens` (for the message).
  void rows(std::span<const float> expected, std::span<const float> actual,
            std::span<const token_id> tokens, std::size_t first, const std::string& what) {
    for (std::size_t r = 0; r * v_ < expected.size(); ++r) {
      for (std::size_t t = 0; t < v_; ++t) {
        const float e = expected[r * v_ + t], a = actual[r * v_ + t];
        const float d = std::fabs(e - a);
        const bool finite = std::isfinite(e) && std::isfinite(a);
        if (finite && d <= tol_) {
          max_ = std::max(max_, d);
          continue;
        }
        if (finite) max_ = std::max(max_, d);
        throw check_failed{what + ": position " + std::to_string(first + r) + " (token " +
                           std::to_string(r < tokens.size() ? tokens[r] : -1) + "), logit " +
                           std::to_string(t) + ": " + e_name_ + " " + num(e) + ", " + a_name_ +
                           " " + num(a) +
                           " (|diff| " + num(finite ? d : std::numeric_limits<float>::infinity()) + " > tolerance " +
                           num(tol_) + "; largest |diff| so far " + num(max_) + ")"};
      }
    }
  }

 private:
  float tol_;
  std::size_t v_;
  float& max_;
  std::string e_name_, a_name_;
};

inline void expect(bool cond, const std::string& message) {
  if (!cond) throw check_failed{message};
}

template <class M>
std::vector<token_id> sequence_for(const conformance_options& o, const M& m) {
  if (!o.tokens.empty()) return o.tokens;
  const std::size_t v = m.vocab_size();
  std::size_t n = 16;
  const std::size_t cap = max_size_of(m);
  if (cap / 2 < n) n = std::max<std::size_t>(2, cap / 2);
  std::vector<token_id> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<token_id>((7 * i + 1) % v);
  return t;
}

template <class M>
void check_inputs(const conformance_options& o, const M& m, std::span<const token_id> seq) {
  if (!(o.tolerance >= 0.0f))
    throw check_failed{"conformance_options::tolerance = " + num(o.tolerance) + " must be >= 0"};
  if (seq.size() < 2)
    throw check_failed{"conformance_options::tokens has " + std::to_string(seq.size()) +
                       " tokens; the checks need at least 2"};
  for (const token_id t : seq)
    if (t < 0 || static_cast<std::size_t>(t) >= m.vocab_size())
      throw check_failed{"conformance_options::tokens holds " + std::to_string(t) +
                         ", outside the model's vocabulary [0, " +
                         std::to_string(m.vocab_size()) + ")"};
}

/// The sequence the checks use (options or default), after validating it and the options.
template <class M>
std::vector<token_id> checked_sequence(const conformance_options& o, const M& m) {
  auto seq = sequence_for(o, m);
  check_inputs(o, m, seq);
  return seq;
}

/// Appends `tokens` in one call and returns the logits.
template <class M>
std::vector<float> append(M& m, std::span<const token_id> tokens) {
  std::vector<float> out(tokens.size() * m.vocab_size());
  m.append(tokens, std::span<float>(out));
  return out;
}

/// The checked sequence and the logits of appending it in one call to a fresh model.
struct reference_run {
  std::vector<token_id> seq;
  std::vector<float> logits;  ///< seq.size() rows of `vocab` logits
  std::size_t vocab = 0;
};

template <class S>
reference_run reference(S& source, const conformance_options& o) {
  reference_run ref;
  with_fresh(source, [&](auto& m) {
    ref.seq = checked_sequence(o, m);
    ref.vocab = m.vocab_size();
    ref.logits = append(m, ref.seq);
  });
  return ref;
}

/// Fails with "<what> did not throw" unless `call()` throws (anything).
template <class F>
void expect_throws(F&& call, const std::string& what) {
  bool threw = false;
  try {
    std::forward<F>(call)();
  } catch (...) {
    threw = true;
  }
  expect(threw, what + " did not throw");
}

/// Runs `body(result)` and turns check_failed / model exceptions into a failed result.
template <class Body>
check_result run_check(const char* name, Body&& body) {
  check_result r;
  r.name = name;
  try {
    std::forward<Body>(body)(r);
  } catch (const check_failed& f) {
    r.ok = false;
    r.message = f.message;
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("the model threw unexpectedly: ") + e.what();
  } catch (...) {
    r.ok = false;
    r.message = "the model threw a non-standard exception";
  }
  if (r.ok && r.message.empty()) r.message = "largest |diff| " + num(r.max_abs_diff);
  r.message = r.name + ": " + r.message;
  return r;
}

struct tree_spec {
  std::vector<token_id> tokens;
  std::vector<std::int32_t> parents;
  std::size_t prefix = 0;  // context length before the tree

  /// Node indices from a root down to `node`.
  std::vector<std::int32_t> path_to(std::int32_t node) const {
    std::vector<std::int32_t> p;
    for (std::int32_t i = node; i >= 0; i = parents[static_cast<std::size_t>(i)]) p.push_back(i);
    std::reverse(p.begin(), p.end());
    return p;
  }
  std::vector<token_id> tokens_of(std::span<const std::int32_t> path) const {
    std::vector<token_id> t;
    for (const auto i : path) t.push_back(tokens[static_cast<std::size_t>(i)]);
    return t;
  }
  bool is_leaf(std::size_t node) const {
    return std::find(parents.begin(), parents.end(), static_cast<std::int32_t>(node)) ==
           parents.end();
  }
};

template <class M>
tree_spec tree_for(const conformance_options& o, const M& m, std::span<const token_id> seq) {
  tree_spec t;
  t.prefix = std::max<std::size_t>(1, seq.size() / 2);
  if (!o.tree_tokens.empty() || !o.tree_parents.empty()) {
    if (o.tree_tokens.size() != o.tree_parents.size())
      throw check_failed{"conformance_options::tree_tokens has " +
                         std::to_string(o.tree_tokens.size()) + " nodes but tree_parents has " +
                         std::to_string(o.tree_parents.size())};
    for (std::size_t i = 0; i < o.tree_parents.size(); ++i)
      if (o.tree_parents[i] < -1 || o.tree_parents[i] >= static_cast<std::int32_t>(i))
        throw check_failed{"conformance_options::tree_parents[" + std::to_string(i) + "] = " +
                           std::to_string(o.tree_parents[i]) + " must be -1 or in [0, " +
                           std::to_string(i) + ")"};
    for (const token_id tok : o.tree_tokens)
      if (tok < 0 || static_cast<std::size_t>(tok) >= m.vocab_size())
        throw check_failed{"conformance_options::tree_tokens holds " + std::to_string(tok) +
                           ", outside the model's vocabulary"};
    t.tokens = o.tree_tokens;
    t.parents = o.tree_parents;
    return t;
  }
  // Two roots; the first is the sequence's own next token, so one path continues the sequence.
  t.parents = {-1, 0, 0, 1, 1, -1, 5};
  const auto v = static_cast<std::int64_t>(m.vocab_size());
  for (std::size_t i = 0; i < t.parents.size(); ++i) {
    const std::int64_t base = seq[(t.prefix + i) % seq.size()];
    t.tokens.push_back(static_cast<token_id>((base + static_cast<std::int64_t>(3 * i)) % v));
  }
  return t;
}

}  // namespace detail

/// (a) One append of the whole sequence gives the same logits (within tolerance) as appending
/// it one token at a time.
template <class Source>
  requires detail::model_source<Source>
check_result check_batched_append(Source& source, const conformance_options& o = {}) {
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
  requires detail::model_source<Source>
check_result check_truncate_then_append(Source& source, const conformance_options& o = {}) {
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
  requires detail::model_source<Source>
check_result check_truncate_every_length(Source& source, const conformance_options& o = {}) {
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
  requires detail::model_source<Source>
check_result check_size_reporting(Source& source, const conformance_options& o = {}) {
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
        detail::expect(m.size() == expected,
                       "size() is " + std::to_string(m.size()) + " after appending " +
                           std::to_string(expected) + " tokens in steps of 1, 2, ...");
        detail::expect(m.vocab_size() == v, "vocab_size() changed from " + std::to_string(v) +
                                                " to " + std::to_string(m.vocab_size()));
        detail::expect(max_size_of(m) >= m.size(), "max_size() = " +
                                                       std::to_string(max_size_of(m)) +
                                                       " is below size() = " +
                                                       std::to_string(m.size()));
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
                  std::to_string(max_size_of(m)) + ", sizes consistent";
    });
  });
}

/// (e) Bad input throws and leaves the context unchanged: token ids -1 and vocab_size(), a bad
/// id after a good one, a wrong logits size; the logits after the rejected calls equal a clean
/// run's. With a small max_size(): the exact capacity boundary is enforced.
template <class Source>
  requires detail::model_source<Source>
check_result check_rejects_bad_input(Source& source, const conformance_options& o = {}) {
  return detail::run_check("rejects_bad_input", [&](check_result& r) {
    const auto ref = detail::reference(source, o);
    const auto& seq = ref.seq;
    detail::with_fresh(source, [&](auto& m) {
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), h = seq.size() / 2;
      detail::append(m, s.first(h));
      const auto bad_v = static_cast<token_id>(std::min<std::size_t>(
          v, static_cast<std::size_t>(std::numeric_limits<token_id>::max())));
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

/// (f1) One append_tree gives, for every node, the logits of appending its root-to-node path
/// alone after the same context (within tolerance), and leaves size() unchanged.
template <class Source>
  requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
check_result check_tree_append(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_append", [&](check_result& r) {
    std::vector<token_id> seq;
    detail::tree_spec tree;
    std::vector<float> tree_logits;
    std::size_t v = 0;
    detail::with_fresh(source, [&](auto& m) {
      seq = detail::checked_sequence(o, m);
      tree = detail::tree_for(o, m, seq);
      v = m.vocab_size();
      detail::append(m, std::span<const token_id>(seq).first(tree.prefix));
      tree_logits.resize(tree.tokens.size() * v);
      m.append_tree(tree.tokens, tree.parents, std::span<float>(tree_logits));
      detail::expect(m.size() == tree.prefix, "size() is " + std::to_string(m.size()) +
                                                  " after append_tree; it must stay " +
                                                  std::to_string(tree.prefix) + " until commit");
      m.commit(std::span<const std::int32_t>());
      detail::expect(m.size() == tree.prefix, "size() is " + std::to_string(m.size()) +
                                                  " after commit of an empty path");
    });
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff, "path alone", "tree");
    for (std::size_t leaf = 0; leaf < tree.tokens.size(); ++leaf) {
      if (!tree.is_leaf(leaf)) continue;
      const auto path = tree.path_to(static_cast<std::int32_t>(leaf));
      const auto toks = tree.tokens_of(path);
      detail::with_fresh(source, [&](auto& m) {
        detail::append(m, std::span<const token_id>(seq).first(tree.prefix));
        const auto got = detail::append(m, toks);
        for (std::size_t k = 0; k < path.size(); ++k) {
          const auto node = static_cast<std::size_t>(path[k]);
          cmp.rows(std::span<const float>(got).subspan(k * v, v),
                   std::span<const float>(tree_logits).subspan(node * v, v),
                   std::span<const token_id>(toks).subspan(k, 1), tree.prefix + k,
                   "tree node " + std::to_string(node) + " differs from appending its path to " +
                       "leaf " + std::to_string(leaf) + " alone");
        }
      });
    }
  });
}

/// (f2) commit(path) leaves the cache exactly as if only the path had been appended: for every
/// node's root path (and the empty path), the logits of two tokens appended after the commit
/// equal those after appending context + path + the two tokens in one call.
template <class Source>
  requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
check_result check_tree_commit(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_commit", [&](check_result& r) {
    std::vector<token_id> seq;
    detail::tree_spec tree;
    detail::with_fresh(source, [&](auto& m) {
      seq = detail::checked_sequence(o, m);
      tree = detail::tree_for(o, m, seq);
    });
    const std::span<const token_id> s(seq);
    const std::vector<token_id> follow{seq[0], seq[1]};
    for (std::int32_t node = -1; node < static_cast<std::int32_t>(tree.tokens.size()); ++node) {
      const auto path = node < 0 ? std::vector<std::int32_t>{} : tree.path_to(node);
      const auto path_toks = tree.tokens_of(path);
      std::vector<token_id> full(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(tree.prefix));
      full.insert(full.end(), path_toks.begin(), path_toks.end());
      full.insert(full.end(), follow.begin(), follow.end());
      std::vector<float> ref, got;
      std::size_t v = 0;
      detail::with_fresh(source, [&](auto& m) {
        v = m.vocab_size();
        const auto all = detail::append(m, full);
        ref.assign(all.end() - static_cast<std::ptrdiff_t>(2 * v), all.end());
      });
      detail::with_fresh(source, [&](auto& m) {
        detail::append(m, s.first(tree.prefix));
        std::vector<float> tree_logits(tree.tokens.size() * v);
        m.append_tree(tree.tokens, tree.parents, std::span<float>(tree_logits));
        m.commit(path);
        detail::expect(m.size() == tree.prefix + path.size(),
                       "size() is " + std::to_string(m.size()) + " after commit of a path of " +
                           std::to_string(path.size()) + " nodes after " +
                           std::to_string(tree.prefix) + " tokens");
        got = detail::append(m, follow);
      });
      detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
      cmp.rows(ref, got, follow, tree.prefix + path.size(),
               "after commit of the path to node " + std::to_string(node) + " (length " +
                   std::to_string(path.size()) +
                   "), the next tokens' logits differ from appending that path alone");
    }
  });
}

/// (f3) Bad trees and paths throw and leave the context unchanged: a parent that is not earlier,
/// a token outside the vocabulary, a path that does not start at a root or is not a chain. A
/// valid commit after a rejected one still works.
template <class Source>
  requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
check_result check_tree_rejects_bad_input(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_rejects_bad_input", [&](check_result& r) {
    detail::with_fresh(source, [&](auto& m) {
      const auto seq = detail::checked_sequence(o, m);
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), h = 1;
      detail::append(m, s.first(h));
      std::vector<float> logits(3 * v);
      const auto rejects = [&](auto&& call, const std::string& what) {
        detail::expect_throws(call, what);
        detail::expect(m.size() == h, what + " threw but changed size() from " +
                                          std::to_string(h) + " to " + std::to_string(m.size()));
      };
      const std::vector<token_id> toks{seq[0], seq[1], seq[0]};
      const std::vector<std::int32_t> self_parent{-1, 1, 0}, good{-1, 0, 1};
      const auto bad_v = static_cast<token_id>(v);
      const std::vector<token_id> bad_toks{seq[0], bad_v, seq[1]};
      rejects([&] { m.append_tree(toks, self_parent, std::span<float>(logits)); },
              "append_tree with parents[1] = 1 (not earlier)");
      rejects([&] { m.append_tree(bad_toks, good, std::span<float>(logits)); },
              "append_tree with token " + std::to_string(bad_v) + " (= vocab_size)");
      m.append_tree(toks, good, std::span<float>(logits));
      const std::vector<std::int32_t> not_root{1, 2}, not_chain{0, 2};
      rejects([&] { m.commit(not_root); }, "commit of path {1, 2} (node 1 is not a root)");
      rejects([&] { m.commit(not_chain); }, "commit of path {0, 2} (2 is not a child of 0)");
      const std::vector<std::int32_t> full_path{0, 1, 2};
      m.commit(full_path);
      detail::expect(m.size() == h + 3, "after rejected commits, a valid commit of 3 nodes left "
                                        "size() = " + std::to_string(m.size()));
      r.message = "bad parents, tokens and paths rejected";
    });
  });
}

/// Runs every check (the tree checks when the model is a TreeLanguageModel) and collects them.
template <class Source>
  requires detail::model_source<Source>
conformance_report run_all(Source& source, const conformance_options& o = {}) {
  conformance_report rep;
  rep.checks.push_back(check_size_reporting(source, o));
  rep.checks.push_back(check_batched_append(source, o));
  rep.checks.push_back(check_truncate_then_append(source, o));
  rep.checks.push_back(check_truncate_every_length(source, o));
  rep.checks.push_back(check_rejects_bad_input(source, o));
  if constexpr (TreeLanguageModel<typename detail::model_of<Source>::type>) {
    rep.checks.push_back(check_tree_append(source, o));
    rep.checks.push_back(check_tree_commit(source, o));
    rep.checks.push_back(check_tree_rejects_bad_input(source, o));
  }
  for (const check_result& c : rep.checks) {
    rep.ok = rep.ok && c.ok;
    rep.message += (c.ok ? "ok   " : "FAIL ") + c.message + "\n";
  }
  return rep;
}

/// run_all for a temporary factory (e.g. a lambda written in the call).
template <class Factory>
  requires detail::model_factory<Factory> && (!LanguageModel<Factory>)
conformance_report run_all(Factory&& factory, const conformance_options& o = {}) {
  auto f = std::forward<Factory>(factory);
  return run_all(f, o);
}

}  // namespace specdec::testing
