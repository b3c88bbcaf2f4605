// specdec/batch_decoder.hpp - speculative decoding of many sequences with one target call per
// step (continuous batching): each sequence has its own drafter, options, generator, callback
// and statistics, and runs the same step pipeline as the single-sequence decoder
// (decode/pipeline.hpp); only the score phase is shared, as one BatchLanguageModel::score.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <exception>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/batch/batch_stats.hpp"
#include "specdec/batch/k_policy.hpp"
#include "specdec/batch/sequence_view.hpp"
#include "specdec/concepts/batch_language_model.hpp"
#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/pipeline.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/stats.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Options of a batch decoder; checked by its constructor.
struct batch_options {
  /// The per-step K policy (off by default: each sequence drafts what its options ask).
  batch_k_policy k_policy;
};

/// Where a sequence of a batch decoder stands.
enum class sequence_status {
  running,   ///< steps go on
  finished,  ///< ended normally (result().reason says why)
  failed,    ///< ended by an error of its own (error() says which); its tokens are kept
};

/// The status's name: "running", "finished", "failed".
constexpr const char* to_string(sequence_status s) noexcept {
  switch (s) {
    case sequence_status::running: return "running";
    case sequence_status::finished: return "finished";
    case sequence_status::failed: return "failed";
  }
  return "unknown";
}

/**
 * Decodes many sequences of one BatchLanguageModel together. add() joins a sequence (creating
 * it in the model and feeding its prompt), step() advances every running sequence by one
 * draft -> score -> verify -> commit step with ONE score call for all of them, remove() lets a
 * sequence leave (releasing it in the model). Sequences join and leave between steps.
 *
 * Guarantee: a sequence's tokens are exactly those the single-sequence decoder
 * (speculative_decoder on sequence_view) produces with the same prompt, options (seed
 * included) and drafter, provided the model keeps its rows independent of the rest of the batch
 * (BatchLanguageModel's contract) and the K policy is off (with it on, greedy outputs are still
 * the same, and so are sampled ones under coupled verification; other sampled ones are equally
 * distributed but not the same draws). Under coupled verification a sequence's tokens are plain
 * decoding's with its seed, whatever joins or leaves the batch.
 *
 * Failures stay with their sequence: a drafter that throws or proposes a token outside the
 * vocabulary, logits the verifier refuses (NaN, +inf), an entry the model refuses (found by
 * scoring the entries one by one after a refused call), a callback that throws. That sequence
 * becomes failed, keeps the tokens it emitted and its context as they were before the failed
 * step; the others go on in the same step. An exception not derived from std::exception (an
 * engine's cancellation, say) fails its sequence the same way and is then rethrown by step()
 * (see there). Holds references to the model and the drafters. Not thread-safe.
 */
template <class Batch, class Draft = no_drafter>
class batch_decoder {
  // Chosen only when Batch or Draft does not model its concept: the static_asserts name what is
  // missing, and the members below do nothing, so that no further errors follow.
  static_assert(detail::check_batch_language_model<Batch>());
  static_assert(detail::check_drafter<Draft>());

 public:
  explicit batch_decoder(Batch&, batch_options = {}) {}
  sequence_id add(std::span<const token_id>, const generate_options&, Draft&) { return 0; }
  const batch_step_result& step() { return step_; }
  void run() {}
  void remove(sequence_id) {}
  generate_result result(sequence_id) const { return {}; }
  sequence_status status(sequence_id) const { return {}; }
  std::size_t running_count() const noexcept { return 0; }
  const batch_stats& stats() const noexcept { return stats_; }

 private:
  batch_step_result step_;
  batch_stats stats_;
};

template <class Batch, class Draft>
  requires BatchLanguageModel<Batch> && Drafter<Draft> && detail::drafts_with_a_language_model<Draft>
class batch_decoder<Batch, Draft> {
 public:
  /// Throws std::invalid_argument for a K policy whose cost curve is not positive and finite.
  explicit batch_decoder(Batch& model, batch_options options = {})
      : model_(model), options_(std::move(options)) {
    options_.k_policy.check("batch_options.k_policy");
  }
  batch_decoder(const batch_decoder&) = delete;
  batch_decoder& operator=(const batch_decoder&) = delete;
  /// Releases the model's sequences of every sequence not yet removed.
  ~batch_decoder() {
    for (auto& s : slots_) release_quietly(s->view.id());
  }

  /**
   * Joins a sequence: creates it in the model, then validates and feeds `prompt` as
   * speculative_decoder::start does (one score call of one entry). Returns its id (the model's
   * sequence_id). Throws std::invalid_argument for a bad prompt or options (naming the field),
   * a drafter that does not fit the model (checked part by part: a vocabulary other than the
   * model's, a draft model shared by two parts or with a running sequence's drafter, or one
   * that is a sequence of this model that this decoder decodes), or a tree on a model without
   * tree scoring;
   * std::length_error when the model holds max_sequences() already or max_batch_tokens() has
   * no room for one more row per step; whatever the model throws. Nothing is added then.
   */
  sequence_id add(std::span<const token_id> prompt, const generate_options& options,
                  Draft& drafter) {
    if (!options.tree.empty() && !BatchTreeLanguageModel<Batch>)
      throw std::invalid_argument(
          "generate_options.tree: the batch model cannot score trees (it does not model "
          "specdec::BatchTreeLanguageModel)");
    const std::size_t live = slots_.size(), cap = max_sequences_of(model_);
    if (live >= cap)
      throw std::length_error("batch_decoder::add: the model holds at most " +
                              std::to_string(cap) + " sequences (max_sequences()); " +
                              std::to_string(live) + " are live, remove one first");
    if (running_count() + 1 > max_batch_tokens_of(model_))
      throw std::length_error("batch_decoder::add: max_batch_tokens() = " +
                              std::to_string(max_batch_tokens_of(model_)) +
                              " has no room for one more row per step");
    const sequence_id id = model_.create_sequence();
    try {
      auto s = std::make_unique<slot>(model_, id, drafter);
      detail::check_drafter_for(s->view, drafter);
      check_draft_contexts(drafter, id);
      s->pipe.start(prompt, options);
      s->status = s->pipe.state().done ? sequence_status::finished : sequence_status::running;
      slots_.push_back(std::move(s));
    } catch (...) {
      release_quietly(id);
      throw;
    }
    return id;
  }

  /**
   * One step of every running sequence: drafts (at most the K policy's cap), one score call for
   * all (more only when max_batch_tokens() forces it), verification and commit per sequence,
   * each sequence's callback called with its tokens. Returns what the step did. A step with no
   * running sequence does nothing.
   *
   * Whatever a drafter, the model or a callback throws fails only the sequences it concerns
   * (status failed, error() says what) and every other sequence finishes the step, committed or
   * rolled back, so each keeps the model's context at its history minus the last token. A
   * std::exception is then done with (error() is its what()); any other exception, e.g. an
   * engine's cancellation, gives error() "unknown exception ..." and is rethrown once the step
   * is complete (the first one, if several), so that the caller sees it; one the model throws
   * for a call of several entries is rethrown even when each entry, scored alone, succeeds.
   */
  const batch_step_result& step() {
    const auto t0 = detail::decode_clock::now();
    foreign_ = nullptr;
    step_.sequences = step_.emitted = step_.rows = step_.calls = step_.failed = 0;
    step_.k_cap = choose_k();
    active_.clear();
    for (auto& s : slots_) {
      if (s->status != sequence_status::running) continue;
      try {  // every sequence's rows (K + 1, or a tree's nodes) must fit one call
        s->pipe.draft(step_.k_cap.k, max_batch_tokens_of(model_));
        active_.push_back(s.get());
      } catch (...) {
        fail_current(*s);
      }
    }
    const auto t1 = detail::decode_clock::now();
    score_active();
    const auto t2 = detail::decode_clock::now();
    const double call_seconds = detail::seconds_between(t1, t2);
    double verify_seconds = 0.0;
    for (slot* s : active_) {
      if (s->status != sequence_status::running) continue;  // refused by the model
      s->pipe.state().target_seconds = call_seconds;
      try {
        const step_result r = s->pipe.finish();
        step_.emitted += r.tokens.size();
        if (r.done) s->status = sequence_status::finished;
      } catch (...) {
        fail_current(*s);
      }
      verify_seconds += s->pipe.state().verify_seconds;
      step_.sequences += 1;
    }
    const auto t3 = detail::decode_clock::now();
    stats_.steps += 1;
    stats_.sequence_steps += step_.sequences;
    stats_.target_calls += step_.calls;
    stats_.rows_scored += step_.rows;
    stats_.generated_tokens += step_.emitted;
    stats_.draft_seconds += detail::seconds_between(t0, t1);
    stats_.target_seconds += call_seconds;
    stats_.verify_seconds += verify_seconds;
    stats_.total_seconds += detail::seconds_between(t0, t3);
    if (foreign_) std::rethrow_exception(std::exchange(foreign_, nullptr));
    return step_;
  }

  /// Steps until no sequence runs.
  void run() {
    while (running_count() > 0) step();
  }

  /// Ends sequence `id` (running or not) and releases it in the model. Throws
  /// std::invalid_argument for an id this decoder does not hold (never added, or removed). If the
  /// model's release_sequence throws, the exception propagates and the sequence stays held (a
  /// later remove, or the destructor, releases it).
  void remove(sequence_id id) {
    const auto it = std::find_if(slots_.begin(), slots_.end(),
                                 [&](const auto& s) { return s->view.id() == id; });
    if (it == slots_.end()) throw unknown(id, "remove");
    model_.release_sequence(id);
    slots_.erase(it);
  }

  /// The tokens generated so far (prompt excluded), the statistics and why it ended.
  generate_result result(sequence_id id) const { return find(id, "result").pipe.state().result(); }
  sequence_status status(sequence_id id) const { return find(id, "status").status; }
  /// Why a failed sequence failed (empty otherwise).
  const std::string& error(sequence_id id) const { return find(id, "error").error; }
  /// Prompt + emitted tokens of sequence `id`.
  std::span<const token_id> history(sequence_id id) const {
    return find(id, "history").pipe.state().history;
  }
  const decode_stats& stats(sequence_id id) const { return find(id, "stats").pipe.state().stats; }
  /// The ids this decoder holds, in the order they joined.
  std::vector<sequence_id> ids() const {
    std::vector<sequence_id> out;
    for (const auto& s : slots_) out.push_back(s->view.id());
    return out;
  }
  std::size_t running_count() const noexcept {
    return static_cast<std::size_t>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) {
      return s->status == sequence_status::running;
    }));
  }
  /// Counters and time of every step so far.
  const batch_stats& stats() const noexcept { return stats_; }
  Batch& model() noexcept { return model_; }

 private:
  using view_type = sequence_view<Batch>;
  struct slot {
    slot(Batch& m, sequence_id id, Draft& d)
        : view(m, id), pipe(view, d, BatchTreeLanguageModel<Batch>) {}
    view_type view;
    sequence_pipeline<view_type, Draft> pipe;
    sequence_status status = sequence_status::running;
    std::string error;
  };

  static std::invalid_argument unknown(sequence_id id, const char* what) {
    return std::invalid_argument("batch_decoder::" + std::string(what) + ": sequence " +
                                 std::to_string(id) +
                                 " is not held by this decoder (never added, or removed)");
  }
  const slot& find(sequence_id id, const char* what) const {
    for (const auto& s : slots_)
      if (s->view.id() == id) return *s;
    throw unknown(id, what);
  }
  void release_quietly(sequence_id id) noexcept {
    try {
      model_.release_sequence(id);
    } catch (...) {  // a destructor or a failed add must not throw over the original error
    }
  }
  void fail(slot& s, const char* what) {
    s.status = sequence_status::failed;
    s.error = what;
    s.pipe.state().done = true;
    step_.failed += 1;
  }
  // Called inside a catch block: fails s with the exception in flight; one not derived from
  // std::exception is kept (the first of the step) for step() to rethrow at its end.
  void fail_current(slot& s) {
    try {
      throw;
    } catch (const std::exception& e) {
      fail(s, e.what());
    } catch (...) {
      fail(s, "unknown exception (not derived from std::exception; step() rethrows it)");
      if (!foreign_) foreign_ = std::current_exception();
    }
  }
  // Called inside a catch block: keeps the exception in flight for step() to rethrow if it is
  // not derived from std::exception and is the step's first such one.
  void note_foreign() {
    try {
      throw;
    } catch (const std::exception&) {
    } catch (...) {
      if (!foreign_) foreign_ = std::current_exception();
    }
  }
  bool holds(sequence_id id) const noexcept {
    return std::any_of(slots_.begin(), slots_.end(),
                       [&](const auto& s) { return s->view.id() == id; });
  }
  // Throws std::invalid_argument if a part of `drafter` drafts with a sequence of this decoder's
  // model that the decoder decodes (`joining`, or one it holds: it would overwrite that
  // sequence's context), or with the draft model of a running sequence's drafter (the two would
  // take the model from each other). Other sequences of the model are fine draft contexts.
  void check_draft_contexts(Draft& drafter, sequence_id joining) {
    std::vector<std::pair<detail::context_key_t, std::string>> in_use;  // running drafters'
    for (auto& s : slots_) {
      if (s->status != sequence_status::running) continue;
      auto collect = [&](auto& d, const std::string& name) {
        if constexpr (detail::exposes_draft_model<std::remove_reference_t<decltype(d)>>)
          in_use.emplace_back(detail::context_of(d.model()),
                              "sequence " + std::to_string(s->view.id()) + "'s " + name);
      };
      detail::walk_drafter(s->pipe.drafter(), "drafter", collect);
    }
    auto check = [&](auto& d, const std::string& name) {
      if constexpr (detail::exposes_draft_model<std::remove_reference_t<decltype(d)>>) {
        const detail::context_key_t key = detail::context_of(d.model());
        const auto [batch, id] = key;  // a view: (batch model, sequence)
        if (batch == static_cast<const void*>(&model_) && (id == joining || holds(id)))
          throw std::invalid_argument(name + ": the draft model is sequence " +
                                      std::to_string(id) +
                                      " of the target batch model, a context this decoder "
                                      "decodes; a draft model needs a context of its own");
        for (const auto& [other, who] : in_use)
          if (other == key)
            throw std::invalid_argument(name + ": its draft model is also " + who +
                                        "'s; each draft model needs a context of its own");
      }
    };
    detail::walk_drafter(drafter, "drafter", check);
  }

  // The K cap of this step from the policy and the running sequences' pooled acceptance.
  k_choice choose_k() {
    const batch_k_policy& policy = options_.k_policy;
    if (!policy.enabled()) return {};
    // Zeroed in place, not replaced: the counts keep their storage from step to step.
    for (auto& row : pooled_.offered_at_rank) std::fill(row.begin(), row.end(), 0);
    for (auto& row : pooled_.accepted_at_rank) std::fill(row.begin(), row.end(), 0);
    std::size_t running = 0;
    for (const auto& s : slots_) {
      if (s->status != sequence_status::running) continue;
      ++running;
      const decode_stats& st = s->pipe.state().stats;
      auto& offered = pooled_.offered_at_rank;
      auto& accepted = pooled_.accepted_at_rank;
      if (offered.size() < st.offered_at_rank.size()) {
        offered.resize(st.offered_at_rank.size());
        accepted.resize(st.offered_at_rank.size());
      }
      for (std::size_t d = 0; d < st.offered_at_rank.size(); ++d) {
        const auto& o = st.offered_at_rank[d];
        const auto& a = st.accepted_at_rank[d];
        if (offered[d].size() < o.size()) {
          offered[d].resize(o.size());
          accepted[d].resize(o.size());
        }
        for (std::size_t r = 0; r < o.size(); ++r) {
          offered[d][r] += o[r];
          accepted[d][r] += r < a.size() ? a[r] : 0;
        }
      }
    }
    k_choice c = choose_draft_length(policy, running, pooled_);
    // A probe step drafts one position beyond the plan, so that the acceptance there keeps being
    // measured (after a plan of K = 0 nothing else would be). Not the sequences' whole K: on a
    // compute-bound curve one uncapped step of 8 sequences x 9 rows costs about 7 plain steps.
    const bool probe =
        policy.probe_every > 0 && stats_.steps % policy.probe_every == policy.probe_every - 1;
    if (probe && c.k != std::numeric_limits<std::size_t>::max()) c.k += 1;  // max: no cap
    return c;
  }

  // The score phase of every drafted sequence: one call, or several of at most
  // max_batch_tokens() rows; a refused call is retried entry by entry so that only the entries
  // the model refuses fail.
  void score_active() {
    const std::size_t limit = max_batch_tokens_of(model_);
    std::size_t first = 0;
    while (first < active_.size()) {
      entries_.clear();
      std::size_t rows = 0, last = first;
      for (; last < active_.size(); ++last) {
        sequence_state& st = active_[last]->pipe.state();
        const std::size_t n = st.score_tokens().size();
        if (!entries_.empty() && rows + n > limit) break;
        entries_.push_back({active_[last]->view.id(), st.score_tokens(), st.score_parents(),
                            st.score_logits()});
        rows += n;
      }
      try {
        model_.score(std::span<const batch_entry>(entries_));
        step_.calls += 1;
        step_.rows += rows;
      } catch (...) {
        note_foreign();  // a cancellation reaches the caller even if every entry then scores
        for (std::size_t i = first; i < last; ++i) {
          try {
            model_.score(std::span<const batch_entry>(&entries_[i - first], 1));
            step_.calls += 1;
            step_.rows += entries_[i - first].tokens.size();
          } catch (...) {
            fail_current(*active_[i]);
          }
        }
      }
      first = last;
    }
  }

  Batch& model_;
  batch_options options_;
  std::vector<std::unique_ptr<slot>> slots_;
  std::vector<slot*> active_;
  std::vector<batch_entry> entries_;
  decode_stats pooled_;
  batch_step_result step_;
  batch_stats stats_;
  std::exception_ptr foreign_;  // the step's first exception not derived from std::exception
};

}  // namespace specdec
