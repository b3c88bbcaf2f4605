// specdec/decoder.hpp - the loop: draft -> target -> verify -> commit, and plain decoding.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/stats.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/rejection.hpp"

namespace specdec {

/// Options of one generation. Validated by generate()/start(); the error names the field.
struct generate_options {
  std::size_t max_new_tokens = 128;    ///< stop after this many generated tokens (>= 1)
  std::vector<token_id> stop_tokens;   ///< stop after emitting any of these (it is returned)
  std::size_t draft_length = 4;        ///< K, draft tokens per step; 0 = plain decoding
  sampling_params sampling;            ///< warping + seed, same for target and draft
  /// Called with each emitted token, in order, as soon as it is verified; return false to stop.
  std::function<bool(token_id)> on_token;
};

/// Why a generation ended.
enum class stop_reason { max_new_tokens, stop_token, callback, context_full };

/// The tokens a generation produced (prompt excluded) and how it went.
struct generate_result {
  std::vector<token_id> tokens;
  decode_stats stats;
  stop_reason reason = stop_reason::max_new_tokens;
};

/// The tokens one step emitted (a view into the decoder's history, valid until the next call).
struct step_result {
  std::span<const token_id> tokens;
  std::size_t drafted = 0;
  std::size_t accepted = 0;
  bool done = false;
};

/**
 * Speculative decoding of a Target with a Drafter: each step the drafter proposes up to K tokens,
 * the target scores [last token, drafts...] in one append, the verifier keeps a prefix and adds
 * one token of the target's own, and both caches are rolled back to what was kept.
 *
 * Guarantees: with temperature 0 the output equals greedy decoding of the target as the decoder
 * evaluates it (token for token); with temperature > 0 each token is distributed exactly as
 * sampling the warped target alone. Given the same seed, the same tokens come out.
 *
 * Cache invariant between calls: the target's context holds the prompt and every emitted token
 * except the last one (whose logits nobody needed yet). Stop tokens and max_new_tokens that fall
 * inside an accepted block cut it there and roll the caches back accordingly. Any exception
 * leaves the target's context consistent with history() and the decoder usable.
 *
 * Use generate() for a whole run, or start() then step() until done() to drive it from an
 * engine's own scheduler. The decoder holds references: the models and the drafter must outlive
 * it. Not thread-safe. (Target must model LanguageModel and Draft must model Drafter; the class
 * checks it with a static_assert that says what is missing.)
 */
template <class Target, class Draft = no_drafter>
class speculative_decoder {
  static_assert(detail::check_language_model<Target>());
  static_assert(detail::check_drafter<Draft>());

 public:
  /// Throws std::invalid_argument if the drafter has a vocabulary that differs from the target's,
  /// or drafts with the target object itself (they would overwrite each other's cache).
  speculative_decoder(Target& target, Draft& drafter) : target_(target), drafter_(drafter) {
    if constexpr (requires { drafter.vocab_size(); }) {
      const std::size_t dv = static_cast<std::size_t>(drafter.vocab_size());
      if (dv != vocab())
        throw std::invalid_argument("drafter: draft vocab_size " + std::to_string(dv) +
                                    " differs from the target's vocab_size " +
                                    std::to_string(vocab()));
    }
    if constexpr (requires { { &drafter.model() } -> std::convertible_to<const void*>; }) {
      if (static_cast<const void*>(&drafter.model()) == static_cast<const void*>(&target))
        throw std::invalid_argument(
            "drafter: the draft model is the target itself; both need their own context (use a "
            "second instance, or a view with its own cache such as a layer-skip draft)");
    }
  }

  /// Runs a whole generation: start(prompt, options) then step() until done().
  generate_result generate(std::span<const token_id> prompt, const generate_options& options) {
    start(prompt, options);
    while (!done()) step();
    generate_result r;
    r.tokens.assign(history_.begin() + static_cast<std::ptrdiff_t>(prompt_size_), history_.end());
    r.stats = stats_;
    r.reason = reason_;
    return r;
  }

  /**
   * Validates prompt and options, resets the statistics, the rng (options.sampling.seed) and the
   * drafter, and feeds the prompt (all but its last token) to the target.
   * Throws std::invalid_argument naming the bad argument: empty prompt, a token outside the
   * vocabulary, a prompt longer than the target's max_size, bad options. The decoder is then
   * idle (done()) and the models untouched.
   */
  void start(std::span<const token_id> prompt, const generate_options& options) {
    validate(prompt, options);
    const auto t0 = clock::now();
    options_ = options;
    gen_.reseed(options.sampling.seed);
    stats_ = decode_stats{};
    done_ = true;
    history_.assign(prompt.begin(), prompt.end());
    prompt_size_ = prompt.size();
    drafter_.reset();
    if constexpr (requires { drafter_.model_calls(); })
      draft_calls_at_start_ = drafter_.model_calls();
    target_.truncate(0);
    if (prompt.size() > 1) {
      logits_.resize((prompt.size() - 1) * vocab());
      target_.append(prompt.first(prompt.size() - 1), std::span<float>(logits_));
    }
    done_ = false;
    reason_ = stop_reason::max_new_tokens;
    update_done();
    stats_.prefill_seconds = seconds_since(t0);
    stats_.total_seconds = stats_.prefill_seconds;
  }

  /// One draft -> target -> verify -> commit iteration; emits between 1 and K + 1 tokens.
  /// Throws std::logic_error if called when done().
  step_result step() {
    if (done_) throw std::logic_error("speculative_decoder::step: no generation in progress");
    const auto t0 = clock::now();
    const std::size_t v = vocab();
    const std::size_t h = history_.size();
    const std::size_t remaining = options_.max_new_tokens - generated();
    const std::size_t room = max_size_of(target_) - h;  // >= 1 while not done
    const std::size_t k = std::min({options_.draft_length, remaining - 1, room - 1});

    // 1. draft
    draft_.clear();
    if (k > 0) drafter_.propose(history_, k, options_.sampling, gen_, draft_);
    const auto t1 = clock::now();
    const std::size_t n = std::min(draft_.size(), k);
    for (std::size_t i = 0; i < n; ++i)
      if (draft_.tokens[i] < 0 || static_cast<std::size_t>(draft_.tokens[i]) >= v)
        throw std::invalid_argument("drafter: proposed token " +
                                    std::to_string(draft_.tokens[i]) +
                                    " outside the vocabulary [0, " + std::to_string(v) + ")");
    if (!draft_.deterministic() &&
        (static_cast<std::size_t>(draft_.q.rows()) < n || static_cast<std::size_t>(draft_.q.cols()) != v))
      throw std::invalid_argument("drafter: q must have one row of vocab_size per draft token");

    // 2. target: [last token, drafts...] in one append
    feed_.assign(1, history_.back());
    feed_.insert(feed_.end(), draft_.tokens.begin(), draft_.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    logits_.resize((n + 1) * v);
    target_.append(feed_, std::span<float>(logits_));  // model contract: throws => unchanged
    const auto t2 = clock::now();

    // 3. verify
    verify_result verdict;
    try {
      const logits_view rows(logits_.data(), static_cast<Eigen::Index>(n + 1),
                             static_cast<Eigen::Index>(v));
      const std::span<const token_id> drafts(draft_.tokens.data(), n);
      if (options_.sampling.greedy()) {
        verdict = verify_greedy(rows, drafts);
      } else {
        const logits_view q(draft_.q.data(), draft_.deterministic() ? 0 : static_cast<Eigen::Index>(n),
                            static_cast<Eigen::Index>(v));
        verdict = verify_rejection(rows, drafts, q, options_.sampling, gen_, verify_ws_);
      }
    } catch (...) {
      target_.truncate(h - 1);
      throw;
    }
    const auto t3 = clock::now();

    // 4. commit: emit accepted drafts + the target's token, cut at a stop condition
    const std::size_t before = h;
    try {
      for (std::size_t i = 0; i <= verdict.accepted && !done_; ++i) {
        const token_id t = i < verdict.accepted ? draft_.tokens[i] : verdict.next;
        history_.push_back(t);
        update_done(t);
        if (options_.on_token && !options_.on_token(t) && !done_) {
          done_ = true;
          reason_ = stop_reason::callback;
        }
      }
    } catch (...) {
      target_.truncate(history_.size() - 1);
      done_ = true;
      reason_ = stop_reason::callback;
      throw;
    }
    target_.truncate(history_.size() - 1);
    const std::span<const token_id> emitted(history_.data() + before, history_.size() - before);
    drafter_.accept(emitted);

    // 5. statistics
    const std::size_t kept = std::min(verdict.accepted, emitted.size());
    stats_.target_calls += 1;
    stats_.draft_calls += n > 0;
    stats_.drafted_tokens += n;
    stats_.accepted_tokens += kept;
    if (stats_.drafted_at.size() < n) {
      stats_.drafted_at.resize(n);
      stats_.accepted_at.resize(n);
    }
    for (std::size_t i = 0; i < n; ++i) stats_.drafted_at[i] += 1;
    for (std::size_t i = 0; i < verdict.accepted; ++i) stats_.accepted_at[i] += 1;
    stats_.generated_tokens = generated();
    if constexpr (requires { drafter_.model_calls(); })
      stats_.draft_model_calls = drafter_.model_calls() - draft_calls_at_start_;
    const auto t4 = clock::now();
    stats_.draft_seconds += seconds(t1 - t0);
    stats_.target_seconds += seconds(t2 - t1);
    stats_.verify_seconds += seconds(t3 - t2);
    stats_.total_seconds += seconds(t4 - t0);
    return {emitted, n, verdict.accepted, done_};
  }

  /// True when no generation is in progress or the current one has finished.
  bool done() const noexcept { return done_; }
  /// Why the last generation ended (meaningful once done()).
  stop_reason reason() const noexcept { return reason_; }
  /// Prompt + emitted tokens of the current generation.
  std::span<const token_id> history() const noexcept { return history_; }
  const decode_stats& stats() const noexcept { return stats_; }
  Target& target() noexcept { return target_; }
  Draft& drafter() noexcept { return drafter_; }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }
  static double seconds_since(clock::time_point t) { return seconds(clock::now() - t); }

  std::size_t vocab() const { return static_cast<std::size_t>(target_.vocab_size()); }
  std::size_t generated() const noexcept { return history_.size() - prompt_size_; }

  void validate(std::span<const token_id> prompt, const generate_options& o) const {
    if (prompt.empty()) throw std::invalid_argument("prompt: must not be empty");
    const std::size_t v = vocab();
    for (std::size_t i = 0; i < prompt.size(); ++i)
      if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= v)
        throw std::invalid_argument("prompt[" + std::to_string(i) + "] = " +
                                    std::to_string(prompt[i]) + " is outside the vocabulary [0, " +
                                    std::to_string(v) + ")");
    const std::size_t cap = max_size_of(target_);
    if (prompt.size() > cap)
      throw std::invalid_argument("prompt: " + std::to_string(prompt.size()) +
                                  " tokens exceed the target's max_size " + std::to_string(cap));
    if (o.max_new_tokens == 0)
      throw std::invalid_argument("generate_options.max_new_tokens: must be >= 1");
    for (std::size_t i = 0; i < o.stop_tokens.size(); ++i)
      if (o.stop_tokens[i] < 0 || static_cast<std::size_t>(o.stop_tokens[i]) >= v)
        throw std::invalid_argument("generate_options.stop_tokens[" + std::to_string(i) +
                                    "] = " + std::to_string(o.stop_tokens[i]) +
                                    " is outside the vocabulary [0, " + std::to_string(v) + ")");
    o.sampling.validate();
  }

  // Marks the run done when a limit is reached (after emitting `t`, if given).
  void update_done(token_id t = -1) {
    if (t >= 0 && std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(), t) !=
                      options_.stop_tokens.end()) {
      done_ = true;
      reason_ = stop_reason::stop_token;
    } else if (generated() >= options_.max_new_tokens) {
      done_ = true;
      reason_ = stop_reason::max_new_tokens;
    } else if (history_.size() >= max_size_of(target_)) {
      done_ = true;
      reason_ = stop_reason::context_full;
    }
  }

  Target& target_;
  Draft& drafter_;
  generate_options options_;
  rng gen_;
  decode_stats stats_;
  std::vector<token_id> history_;
  std::size_t prompt_size_ = 0;
  bool done_ = true;
  stop_reason reason_ = stop_reason::max_new_tokens;
  draft draft_;
  std::vector<token_id> feed_;
  std::vector<float> logits_;
  rejection_workspace verify_ws_;
  std::size_t draft_calls_at_start_ = 0;
};

/// Plain autoregressive decoding with the same sampler: one target call per token.
template <LanguageModel Model>
generate_result generate_autoregressive(Model& model, std::span<const token_id> prompt,
                                        generate_options options) {
  no_drafter none;
  options.draft_length = 0;
  speculative_decoder<Model, no_drafter> decoder(model, none);
  return decoder.generate(prompt, options);
}

}  // namespace specdec
