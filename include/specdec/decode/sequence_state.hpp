// specdec/decode/sequence_state.hpp - what one generation carries from step to step (options,
// generator, history, statistics) and the step in flight (the draft, the rows the target must
// score, the verdict). The phases of decode/ read and write it; the single-sequence decoder owns
// one, the batch decoder one per sequence.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/row_processor.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/tree/tree_fallback.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/coupled.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/rejection.hpp"

namespace specdec {

namespace detail {

using decode_clock = std::chrono::steady_clock;

inline double seconds_between(decode_clock::time_point a, decode_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/**
 * Room for the rows the target writes: resize(n) gives n floats with unspecified contents and
 * never fills them (the score phase overwrites every row it is given; a std::vector would
 * zero-fill each growth, 128 KiB per row at a 32k vocabulary). The storage only grows, so a
 * sequence allocates once for its largest step; a contiguous range of float.
 */
class row_buffer {
 public:
  void resize(std::size_t n) {
    if (n > capacity_) {
      data_.reset(new float[n]);  // default-initialised: not zeroed
      capacity_ = n;
    }
    size_ = n;
  }
  std::size_t size() const noexcept { return size_; }
  float* data() noexcept { return data_.get(); }
  const float* data() const noexcept { return data_.get(); }
  float* begin() noexcept { return data_.get(); }
  float* end() noexcept { return data_.get() + size_; }
  const float* begin() const noexcept { return data_.get(); }
  const float* end() const noexcept { return data_.get() + size_; }

 private:
  std::unique_ptr<float[]> data_;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace detail

/// The phase a sequence expects next (sequence_state::expects). Each phase of decode/ checks it
/// and throws std::logic_error naming the expected phase when called out of order.
enum class step_phase {
  draft,    ///< between steps: draft_phase (or start_sequence)
  verify,   ///< drafted: score_phase (or the engine's own call writing the rows), then verify_phase
  commit,   ///< verified: commit_phase (or abandon_step)
  abandon,  ///< verification threw: abandon_step (the rows may be half processed)
};

/// The name of the function that runs phase `p`, for error messages.
constexpr const char* phase_name(step_phase p) noexcept {
  switch (p) {
    case step_phase::draft:
      return "draft_phase";
    case step_phase::verify:
      return "score_phase or verify_phase";
    case step_phase::commit:
      return "commit_phase";
    case step_phase::abandon:
      return "abandon_step";
  }
  return "?";
}

/**
 * One sequence's generation state, and the object the step's phases work on: an engine with its
 * own scheduler holds one per sequence and calls, per step,
 *
 * @code
 *   start_sequence(s, model, drafter, prompt, options);    // once; s.done may already be true
 *   while (!s.done) {
 *     draft_phase(s, drafter);      // propose and check; s.score_tokens() / score_parents()
 *     score_phase(s, model);        // or the engine's own call writing s.score_logits()
 *     verify_phase(s);              // s.accepted, s.next (on a throw: abandon_step(s, model))
 *     commit_phase(s, model, drafter);  // emit, roll the caches back, count
 *   }
 * @endcode
 *
 * which is what speculative_decoder (one sequence) and batch_decoder (one scored call for all
 * sequences between their draft and verify phases) do. `expects` records where the step stands;
 * a phase called out of order (commit_phase twice, verify_phase after a verify_phase that threw,
 * draft_phase on a finished sequence) throws std::logic_error and changes nothing. Invariant
 * between steps (while !done):
 * the model's context holds `history` minus its last token. The fields below the step's marker
 * belong to the step in flight and are meaningful between the phase that fills them and the
 * next step. Not thread-safe; one per sequence.
 */
struct sequence_state {
  // The generation.
  generate_options options;
  /// What the drafters are given: options.sampling at options.draft_temperature (set by start).
  sampling_params draft_sampling;
  rng gen;
  decode_stats stats;
  std::vector<token_id> history;  ///< prompt + emitted tokens
  std::size_t prompt_size = 0;
  bool done = true;
  stop_reason reason = stop_reason::max_new_tokens;
  std::size_t vocab = 0;
  std::size_t capacity = std::numeric_limits<std::size_t>::max();  ///< the model's max_size
  /// What the pipeline can run (set by start_sequence): a tree step needs a TreeDrafter and a
  /// model that scores trees (see trees_possible); a tree is at most tree_rows nodes (root
  /// included) and tree_leaves leaves (the model's max_tree_size() and max_tree_leaves()).
  bool can_tree = false;
  /// Whether the model scores a tree in one call (TreeLanguageModel: append_tree); without it a
  /// tree costs one append per leaf and one to commit, and the speed policy plans chains only.
  bool trees_in_one_call = false;
  std::size_t tree_rows = std::numeric_limits<std::size_t>::max();
  std::size_t tree_leaves = std::numeric_limits<std::size_t>::max();
  step_phase expects = step_phase::draft;  ///< the phase the sequence expects next
  std::size_t draft_calls_at_start = 0;
  // Re-planning (generate_options::policy): the shape in force and what it was planned from.
  tree_plan plan;
  decode_stats measured;  ///< rank counts of every re-planning generation of this sequence
  /// Steps counted toward policy.half_life since `measured` last halved (the speed policy).
  std::size_t measured_calls = 0;

  // The step in flight, filled by the draft phase.
  bool tree_step = false;          ///< this step drafted a tree (else a chain)
  std::size_t history_before = 0;  ///< history.size() when the step began
  std::size_t positions = 0;       ///< draft positions (chain: tokens; tree: depth)
  std::size_t nodes = 0;           ///< draft tokens (chain: tokens; tree: nodes but the root)
  std::size_t calls = 1;           ///< calls this step made to the target (score and commit)
  draft chain;
  tree_draft tree;
  std::vector<token_id> feed;  ///< chain: [last history token, drafts...]
  detail::row_buffer logits;           ///< rows x vocab, written by the score phase
  // The verdict, filled by the verify phase.
  std::vector<token_id> accepted;
  token_id next = 0;
  std::vector<std::int32_t> path;  ///< tree: {0, accepted nodes...}
  tree_verify_result tree_verdict;
  // Where this step's time went (seconds), summed into stats by the commit phase.
  double draft_seconds = 0.0, target_seconds = 0.0, verify_seconds = 0.0;
  // Scratch reused across steps.
  rejection_workspace verify_ws;
  block_workspace block_ws;
  tree_eval_workspace tree_eval_ws;
  tree_verify_workspace tree_verify_ws;
  coupled_workspace coupled_ws;
  detail::prefix_buffer prefixes;  ///< the row processor's prefixes (verify phase)

  std::size_t generated() const noexcept { return history.size() - prompt_size; }

  /// What the generation produced so far: the emitted tokens (prompt excluded), the statistics
  /// and why it ended.
  generate_result result() const {
    generate_result r;
    r.tokens.assign(history.begin() + static_cast<std::ptrdiff_t>(prompt_size), history.end());
    r.stats = stats;
    r.reason = reason;
    return r;
  }

  /// How many draft positions this step may use: the last token of a step is the target's own,
  /// and every emitted token must fit in the context (both >= 1 while not done).
  std::size_t draft_budget() const noexcept {
    const std::size_t remaining = options.max_new_tokens - generated();
    const std::size_t room = capacity - history.size();
    return std::min(remaining - 1, room - 1);
  }

  /// The tokens the target must score this step: [last, drafts...] or the tree's nodes.
  std::span<const token_id> score_tokens() const noexcept {
    return tree_step ? tree.tree.tokens() : std::span<const token_id>(feed);
  }
  /// The tree's parents (root: -1) for a tree step, empty for a chain.
  std::span<const std::int32_t> score_parents() const noexcept {
    return tree_step ? tree.tree.parents() : std::span<const std::int32_t>();
  }
  /// Where the score phase writes its rows: score_tokens().size() x vocab floats.
  std::span<float> score_logits() noexcept { return logits; }

  /// Throws std::logic_error, naming `who` and the phase s expects, unless s expects `p`.
  void require_phase(step_phase p, const char* who) const {
    if (expects != p)
      throw std::logic_error(std::string(who) + ": called out of order; the sequence expects " +
                             phase_name(expects) + " next");
  }

  /// Marks the run done when a limit is reached (after emitting `t`, if given).
  void update_done(token_id t = -1) {
    if (t >= 0 && std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) !=
                      options.stop_tokens.end()) {
      done = true;
      reason = stop_reason::stop_token;
    } else if (generated() >= options.max_new_tokens) {
      done = true;
      reason = stop_reason::max_new_tokens;
    } else if (history.size() >= capacity) {
      done = true;
      reason = stop_reason::context_full;
    }
  }

  /// Counts, at depth d, `offered` candidates judged and (if `kept`) the one of rank `rank`
  /// accepted, in this generation's statistics and in the re-planning measurements.
  void count_rank(std::size_t d, std::size_t rank, std::size_t offered, bool kept) {
    stats.count_judged(d, rank, offered, kept);
    if (options.policy.every > 0) measured.count_judged(d, rank, offered, kept);
  }
};

}  // namespace specdec
