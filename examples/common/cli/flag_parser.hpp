// common/cli/flag_parser.hpp - the parsing machinery both command lines (specdec-generate,
// specdec-llama) stand on: a CLI11 app whose options are read as text and converted by hand, so
// every error names the flag as the user typed it and the value; llama.cpp's multi-letter
// single-dash flags (-md, -ngl, -fa, -np); "did you mean" for unknown flags.
//
// Parsing has no side effects: tests build parsers freely. Not thread-safe (one parser per call).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cli/parse_number.hpp"

namespace specdec::cli {

/// A bad flag or value. The message names the flag as typed and the value; both programs print
/// it and exit with status 2.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// -n -1 (llama.cpp's spelling and default): no token limit; generation ends at an end-of-text
/// token or when the context is full.
inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

/// Levenshtein distance, for "did you mean". O(|a| |b|).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// A CLI11 app of text options. Declare options with text() and flag(), call parse(), then read
/// each option with the converters, which throw usage_error naming the flag as typed.
class flag_parser {
 public:
  /// `short_words`: llama.cpp's multi-letter single-dash spellings and the long name each stands
  /// for (CLI11, like getopt, has one-letter short names only), e.g. {"-md", "--model-draft"}.
  flag_parser(std::string program, std::string description,
              std::vector<std::pair<std::string, std::string>> short_words)
      : app_(std::move(description), program), short_words_(std::move(short_words)) {
    app_.set_help_flag("-h,--help", "print this help and exit");
    app_.allow_extras();  // unknown flags are reported by parse(), with a suggestion
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }

  CLI::App& app() { return app_; }
  std::string help() const { return app_.help(); }

  /// A text option, in the --help group `group`.
  CLI::Option* text(const char* names, std::string& slot, const std::string& what,
                    const char* group, const char* type = "TEXT") {
    CLI::Option* o = app_.add_option(names, slot, what)->type_name(type)->group(group);
    all_.push_back(o);
    return o;
  }

  /// An on/off flag.
  CLI::Option* flag(const char* names, bool& slot, const std::string& what, const char* group) {
    CLI::Option* o = app_.add_flag(names, slot, what)->group(group);
    all_.push_back(o);
    return o;
  }

  /// A spelling handled before CLI11 sees the arguments (e.g. --spec-type), for suggestions.
  void add_spelling(std::string s) { extra_spellings_.push_back(std::move(s)); }

  /// Parses `args` (without the program name). Returns false when --help was asked. Unknown
  /// flags and stray words are usage errors.
  bool parse(std::vector<std::string> args) {
    args_ = args;
    for (auto& a : args)
      for (const auto& [word, name] : short_words_)
        if (a == word) a = name;
    check_single_dash_words(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    try {
      app_.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      return false;
    } catch (const CLI::ParseError& e) {
      throw usage_error(e.what());
    }
    const auto extra = app_.remaining();
    if (!extra.empty()) {
      if (extra.front().size() > 1 && extra.front()[0] == '-') unknown_option(extra.front());
      throw usage_error("unexpected argument '" + extra.front() +
                        "' (a prompt goes after -p/--prompt)");
    }
    return true;
  }

  /// The arguments as given (before any rewriting).
  const std::vector<std::string>& args() const { return args_; }

  bool given(const CLI::Option* o) const { return o->count() > 0; }

  /// The name the user typed for `o` (its last occurrence), for messages.
  std::string typed(const CLI::Option* o) const {
    for (auto it = args_.rbegin(); it != args_.rend(); ++it) {
      const std::string& a = *it;
      if (a.size() < 2 || a[0] != '-') continue;
      for (const auto& [word, name] : short_words_)
        if (a == word && o->check_name(name)) return a;
      const std::string name = a.starts_with("--") ? a.substr(0, a.find('=')) : a.substr(0, 2);
      if (o->check_name(name)) return name;
    }
    return o->get_name(false, false);
  }

  [[noreturn]] void bad(const CLI::Option* o, const std::string& value,
                        const std::string& why) const {
    throw usage_error(typed(o) + " '" + value + "': " + why);
  }

  std::uint64_t whole(const CLI::Option* o, const std::string& text) const {
    std::uint64_t v = 0;
    const number_read r = parse_number(text, v);
    if (r == number_read::out_of_range) bad(o, text, "is out of range");
    if (r != number_read::ok) bad(o, text, "is not a whole number");
    return v;
  }

  std::size_t whole_at_most(const CLI::Option* o, const std::string& text, std::uint64_t max,
                            const std::string& bound_name) const {
    std::uint64_t v = 0;
    const number_read r = parse_number(text, v);
    if (r == number_read::not_a_number) bad(o, text, "is not a whole number");
    if (r == number_read::out_of_range || v > max)
      bad(o, text, "exceeds " + bound_name + " = " + std::to_string(max));
    return static_cast<std::size_t>(v);
  }

  float real(const CLI::Option* o, const std::string& text) const {
    float v = 0.0f;
    if (parse_number(text, v) != number_read::ok) bad(o, text, "is not a number");
    if (!std::isfinite(v)) bad(o, text, "is not a finite number");
    return v;
  }

  /// Unless `allowed`, a usage error for the first of `flags` given: "<flag>: needs <what>".
  void only_with(std::initializer_list<const CLI::Option*> flags, bool allowed,
                 const std::string& what) const {
    if (allowed) return;
    for (const CLI::Option* o : flags)
      if (given(o)) throw usage_error(typed(o) + ": needs " + what);
  }

  [[noreturn]] void unknown_option(const std::string& flag) const {
    const std::string guess = nearest(flag);
    throw usage_error("unknown option '" + flag + "'" +
                      (guess.empty() ? std::string() : " (did you mean " + guess + "?)"));
  }

 private:
  // Every name a user may type, with its dashes.
  std::vector<std::string> spellings() const {
    std::vector<std::string> out{"-h", "--help"};
    for (const auto& [word, name] : short_words_) out.push_back(word);
    out.insert(out.end(), extra_spellings_.begin(), extra_spellings_.end());
    for (const CLI::Option* o : all_) {
      for (const auto& s : o->get_snames()) out.push_back("-" + s);
      for (const auto& l : o->get_lnames()) out.push_back("--" + l);
    }
    return out;
  }

  std::string nearest(std::string_view unknown) const {
    const std::string_view bare = unknown.substr(0, unknown.find('='));
    std::string best;
    std::size_t best_d = std::numeric_limits<std::size_t>::max();
    for (const auto& s : spellings()) {
      const std::size_t d = edit_distance(bare, s);
      if (d < best_d) best_d = d, best = s;
    }
    // A suggestion only when it is plausibly a typo: at most a third of the name differs (one
    // unknown letter after a dash is near every short flag, so it gets none).
    return bare.size() > 2 && best_d <= std::max<std::size_t>(2, bare.size() / 3) ? best
                                                                                  : std::string();
  }

  // CLI11 would read an unknown multi-letter short flag (-xyz) as a known short flag with an
  // attached value (-x yz): refuse words of letters after one dash instead, unless they are the
  // value of the option before them.
  void check_single_dash_words(const std::vector<std::string>& args) const {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--") break;
      const bool word = a.size() > 2 && a[0] == '-' && a[1] != '-' &&
                        std::all_of(a.begin() + 1, a.end(), [](char ch) {
                          return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
                        });
      if (word && !(i > 0 && takes_value(args[i - 1]))) unknown_option(a);
    }
  }

  bool takes_value(const std::string& a) const {
    if (a.find('=') != std::string::npos) return false;
    for (const CLI::Option* o : all_)
      if (o->get_type_size() != 0 && o->check_name(a)) return true;
    return false;
  }

  CLI::App app_;
  std::vector<std::pair<std::string, std::string>> short_words_;
  std::vector<std::string> extra_spellings_;
  std::vector<CLI::Option*> all_;
  std::vector<std::string> args_;
};

}  // namespace specdec::cli
