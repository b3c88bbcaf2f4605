// specdec/detail/suffix_automaton.hpp - an online suffix automaton over a token stream with the
// latest end position and the number of end positions of every state: the unbounded index
// behind ngram_drafter (max_ngram = 0).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

#include "specdec/detail/ngram_index.hpp"  // ngram_vector: huge-page-advised storage
#include "specdec/detail/path_paint_forest.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

/**
 * The suffix automaton (Blumer et al. 1985) of the stream t[0..n], built online: a state is a
 * class of substrings with the same set of end positions (endpos); `length(s)` is its longest
 * member, `link(s)` the state of the longest suffix outside the class. Appending a token is
 * amortised O(1) automaton work (at most 2n states and 3n transitions).
 *
 * What the drafter asks, with n the last position:
 * - `match()`: the state of the longest suffix of t[0..n] that also ends at an earlier position
 *   (the suffix link of the state of the whole stream); its length is unbounded.
 * - `stats(s)`: over the end positions of s *before n*: the latest one and how many there are.
 *   These are kept in a path_paint_forest over the suffix links (position i is painted onto the
 *   link path of the state that ended at i when position i + 1 arrives), amortised O(log n).
 * - `next(s, token)` and `for_each_child(s, f)`: transitions, for continuations ranked by count.
 *
 * Tokens are opaque 32-bit symbols: any token_id value (negative or beyond a vocabulary
 * included) is indexed like any other.
 *
 * Memory: per state one 44-byte record, its 24 bytes (with its first transition) held in the
 * forest's node (20 bytes), so that a walk up the suffix links loads one line per state; per
 * further transition a 16-byte hash slot at load <= 1/2, which is the transition itself (a
 * lookup that finds it reads nothing else), except the root's: an 8-byte slot at load <= 1/2
 * per distinct token; plus 4 bytes per token for the copy of the stream.
 * Not thread-safe (reads splay).
 */
class suffix_automaton {
 public:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t root = 0;
  /// The longest stream it holds: at most 2n states and 2n transitions outside them, in a
  /// power-of-2 table at load <= 1/2 (at most 2^31 slots), numbered in 32 bits below `none`.
  /// push() beyond it is undefined; ngram_drafter refuses such histories first.
  static constexpr std::size_t max_tokens = std::size_t{1} << 29;

  suffix_automaton() { clear(); }

  /// Forgets the stream; keeps capacity. O(capacity of the transition table).
  void clear() {
    tokens_.clear();
    edges_ = 0;
    forest_.clear();
    empty_table(slots_, slot{none, 0, 0, none});
    mask_ = slots_.size() - 1;
    empty_table(root_slots_, root_slot{0, none});
    root_edges_ = 0;
    forest_.add({forest::nil, 0}, state{0, none, none, 0, none, none});
    last_ = root;
  }

  /// Pre-sizes storage for n tokens (worst case: 2n states, 3n transitions, at most 2n of them
  /// outside the states, at most n distinct tokens leaving the root) so that growing to n tokens
  /// never reallocates or rehashes.
  void reserve(std::size_t n) {
    tokens_.reserve(n);
    forest_.reserve(2 * n + 1);
    std::size_t capacity = slots_.size();
    while (capacity < 4 * n) capacity *= 2;
    if (capacity > slots_.size()) rehash(capacity);
    std::size_t roots = root_slots_.size();  // at most n distinct tokens leave the root
    while (roots < 2 * (n + 1)) roots *= 2;
    if (roots > root_slots_.size()) grow_roots(roots);
  }

  std::size_t size() const noexcept { return tokens_.size(); }
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  std::size_t state_count() const noexcept { return forest_.size(); }
  /// Transitions outside the states' records (the root's and the states' first ones excluded).
  std::size_t transition_count() const noexcept { return edges_; }
  /// Bytes held (capacity), for the memory figures in docs/ngram.md.
  std::size_t memory_bytes() const noexcept {
    return tokens_.capacity() * sizeof(token_id) + forest_.memory_bytes() +
           slots_.size() * sizeof(slot) + root_slots_.size() * sizeof(root_slot);
  }

  /// Appends tokens. Amortised O(1) per token for the automaton plus O(log n) for the forest.
  void push(std::span<const token_id> ts) {
    for (const token_id t : ts) extend(static_cast<std::uint32_t>(t));
  }

  /// State of the longest suffix of the stream with an earlier end position (root: none).
  std::uint32_t match() const noexcept { return tokens_.empty() ? root : state_at(last_).link; }
  /// State of the whole stream (its only end position is the last one).
  std::uint32_t whole() const noexcept { return last_; }
  std::size_t length(std::uint32_t s) const noexcept { return state_at(s).length; }
  std::uint32_t link(std::uint32_t s) const noexcept { return state_at(s).link; }
  /// The first end position of s (none for the root). O(1).
  std::uint32_t first_end(std::uint32_t s) const noexcept { return state_at(s).first_end; }

  /// Latest end position of s before the last position, and their number.
  path_values stats(std::uint32_t s) noexcept { return forest_.read(s); }

  /// The state reached from s by `t`, or none. O(1) expected.
  std::uint32_t next(std::uint32_t s, token_id t) const noexcept {
    const std::uint32_t* target = find(s, static_cast<std::uint32_t>(t));
    return target == nullptr ? none : *target;
  }

  /// Calls f(token, state) for every transition out of s, in no particular order. O(out-degree)
  /// (the root: O(its table), at most 4x its out-degree).
  template <class F>
  void for_each_child(std::uint32_t s, F&& f) const {
    if (s == root) {
      for (const root_slot& r : root_slots_)
        if (r.target != none) f(static_cast<token_id>(r.token), r.target);
      return;
    }
    const state& st = state_at(s);
    if (st.target0 != none) f(static_cast<token_id>(st.token0), st.target0);
    for (std::uint32_t e = st.first_edge; e != none; e = slots_[e].next)
      f(static_cast<token_id>(slots_[e].token), slots_[e].target);
  }

 private:
  static constexpr std::size_t initial_slots = 64;

  // The first transition of a state lives in the state itself (most states have one), the
  // others in the slots of the hash table, where a lookup finds them, each state's listed
  // through slot::next (for_each_child, and the copy into a clone). The root's
  // transitions (one per distinct token, looked up for about every other appended token) have a
  // small table of their own, which stays in cache where the shared one, scattered over 100 MB
  // at 1M tokens, would not.
  struct state {
    std::uint32_t length;
    std::uint32_t link;
    std::uint32_t first_end;
    std::uint32_t token0;   // the first transition's token
    std::uint32_t target0;  // its target; none: no transition at all
    std::uint32_t first_edge;
  };
  struct slot {
    std::uint32_t from;  // none: empty
    std::uint32_t token;
    std::uint32_t target;
    std::uint32_t next;  // the slot of from's next transition, or none
  };
  struct root_slot {
    std::uint32_t token;
    std::uint32_t target;  // none: empty
  };

  static std::size_t hash(std::uint32_t from, std::uint32_t token) noexcept {
    std::uint64_t h = (static_cast<std::uint64_t>(from) << 32 | token) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return static_cast<std::size_t>(h ^ (h >> 32));
  }

  // The target field of the transition (from, token), or nullptr; valid until the next add_edge.
  const std::uint32_t* find(std::uint32_t from, std::uint32_t token) const noexcept {
    if (from == root) return find_root(token);
    const state& st = state_at(from);
    if (st.target0 == none) return nullptr;
    if (st.token0 == token) return &st.target0;
    if (st.first_edge == none) return nullptr;
    for (std::size_t i = hash(from, token) & mask_;; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.from == none) return nullptr;
      if (s.from == from && s.token == token) return &s.target;
    }
  }
  std::uint32_t* find(std::uint32_t from, std::uint32_t token) noexcept {
    return const_cast<std::uint32_t*>(std::as_const(*this).find(from, token));
  }
  const std::uint32_t* find_root(std::uint32_t token) const noexcept {
    const std::size_t mask = root_slots_.size() - 1;
    for (std::size_t i = hash(root, token) & mask;; i = (i + 1) & mask) {
      const root_slot& s = root_slots_[i];
      if (s.target == none) return nullptr;
      if (s.token == token) return &s.target;
    }
  }

  void add_edge(std::uint32_t from, std::uint32_t token, std::uint32_t target) {
    if (from == root) return add_root_edge(token, target);
    state& st = state_at(from);
    if (st.target0 == none) {
      st.token0 = token;
      st.target0 = target;
      return;
    }
    make_room(1);
    place(slot{from, token, target, none});
  }

  // Grows the table, if needed, so that `more` transitions fit at load <= 1/2.
  void make_room(std::size_t more) {
    std::size_t capacity = slots_.size();
    while (2 * (edges_ + more) > capacity) capacity *= 2;
    if (capacity > slots_.size()) rehash(capacity);
  }

  // Puts s, a transition of s.from, in the table and at the head of s.from's list; the table
  // has room for it.
  void place(slot s) noexcept {
    state& st = state_at(s.from);
    std::size_t i = hash(s.from, s.token) & mask_;
    while (slots_[i].from != none) i = (i + 1) & mask_;
    s.next = st.first_edge;
    slots_[i] = s;
    st.first_edge = static_cast<std::uint32_t>(i);
    ++edges_;
  }

  void grow_roots(std::size_t size) {
    ngram_vector<root_slot> fresh(size, root_slot{0, none});
    fresh.swap(root_slots_);
    for (const root_slot& s : fresh)
      if (s.target != none) place_root(s);
  }
  void add_root_edge(std::uint32_t token, std::uint32_t target) {
    if (2 * (root_edges_ + 1) > root_slots_.size()) grow_roots(root_slots_.size() * 2);
    ++root_edges_;
    place_root(root_slot{token, target});
  }
  void place_root(root_slot s) noexcept {
    const std::size_t mask = root_slots_.size() - 1;
    std::size_t i = hash(root, s.token) & mask;
    while (root_slots_[i].target != none) i = (i + 1) & mask;
    root_slots_[i] = s;
  }

  // Makes `table` hold at least initial_slots slots, all `empty`; keeps a larger capacity.
  template <class Slot>
  static void empty_table(ngram_vector<Slot>& table, const Slot& empty) {
    if (table.size() < initial_slots)
      table.assign(initial_slots, empty);
    else
      std::fill(table.begin(), table.end(), empty);
  }

  // Moves every transition to a table of `capacity` slots, each state's list rebuilt (in
  // another order, which nobody depends on).
  void rehash(std::size_t capacity) {
    ngram_vector<slot> old(capacity, slot{none, 0, 0, none});
    old.swap(slots_);
    mask_ = capacity - 1;
    for (std::uint32_t s = 0; s < forest_.size(); ++s) state_at(s).first_edge = none;
    edges_ = 0;
    for (const slot& s : old)
      if (s.from != none) place(s);
  }

  std::uint32_t new_state(std::uint32_t length, std::uint32_t first_end, path_values v) {
    return forest_.add(v, state{length, none, first_end, 0, none, none});
  }

  // The textbook online construction; the forest mirrors every suffix-link change.
  void extend(std::uint32_t c) {
    const auto i = static_cast<std::uint32_t>(tokens_.size());
    tokens_.push_back(static_cast<token_id>(c));
    const std::uint32_t previous = last_;
    const std::uint32_t cur = new_state(state_at(previous).length + 1, i, {forest::nil, 0});
    std::uint32_t p = previous;
    while (p != none && find(p, c) == nullptr) {
      add_edge(p, c, cur);
      p = state_at(p).link;
    }
    if (p == none) {
      state_at(cur).link = root;
    } else {
      const std::uint32_t q = *find(p, c);
      if (state_at(p).length + 1 == state_at(q).length) {
        state_at(cur).link = q;
      } else {
        const std::uint32_t clone =
            new_state(state_at(p).length + 1, state_at(q).first_end, forest_.read(q));
        add_edge(clone, state_at(q).token0, state_at(q).target0);  // q has transitions: p -> q
        std::size_t more = 0;  // room first: a rehash would move q's list under the loop
        for (std::uint32_t e = state_at(q).first_edge; e != none; e = slots_[e].next) ++more;
        make_room(more);
        for (std::uint32_t e = state_at(q).first_edge; e != none; e = slots_[e].next)
          place(slot{clone, slots_[e].token, slots_[e].target, none});
        const std::uint32_t above = state_at(q).link;
        state_at(clone).link = above;
        forest_.link(clone, above);
        forest_.cut(q);
        forest_.link(q, clone);
        state_at(q).link = clone;
        state_at(cur).link = clone;
        for (; p != none; p = state_at(p).link) {
          std::uint32_t* target = find(p, c);
          if (target == nullptr || *target != q) break;
          *target = clone;
        }
      }
    }
    forest_.link(cur, state_at(cur).link);
    last_ = cur;
    // Position i - 1 joins the statistics now that i exists (stats count positions before n).
    if (i > 0) forest_.paint(previous, i - 1);
  }

  ngram_vector<token_id> tokens_;
  ngram_vector<slot> slots_;  // the transitions outside the states, load <= 1/2
  std::size_t edges_ = 0;     // how many
  std::size_t mask_ = 0;
  ngram_vector<root_slot> root_slots_;  // the root's transitions, load <= 1/2
  std::size_t root_edges_ = 0;          // how many
  // The suffix-link tree with the statistics, its nodes holding the states.
  using forest = path_paint_forest<state>;
  forest forest_;
  state& state_at(std::uint32_t s) noexcept { return forest_.payload(s); }
  const state& state_at(std::uint32_t s) const noexcept { return forest_.payload(s); }
  std::uint32_t last_ = root;
};

}  // namespace specdec::detail
