// specdec-generate's command line (llama2c/cli/cli.hpp), its --json pieces (llama2c/cli/report.hpp) and
// the --draft-min wrapper (specdec::min_length_drafter): every flag, every spelling, every bad value.
// No checkpoint needed.
#include <catch2/catch.hpp>
#include <cstddef>
#include <limits>
#include <filesystem>
#include <fstream>
#include <llama2c/cli/cli.hpp>
#include <llama2c/cli/find_tokenizer.hpp>
#include <specdec/draft/min_length_drafter.hpp>
#include <llama2c/cli/report.hpp>
#include <specdec/specdec.hpp>
#include <string>
#include <vector>

namespace {

namespace l2 = specdec::llama2c;
using args = std::vector<std::string>;

l2::cli_options parse(args a) { return l2::parse_cli(std::move(a)); }

}  // namespace

TEST_CASE("cli: defaults") {
  const auto c = parse({});
  CHECK(c.help.empty());
  CHECK(c.model.ends_with("/aidreams260K.bin"));
  CHECK(c.tokenizer.empty());  // found beside the model when the program starts
  CHECK(c.prompt == "I dreamed");
  CHECK(c.prompt_file.empty());
  // llama.cpp's defaults: -n -1, temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, a drawn
  // seed, no drafter.
  CHECK(c.n_predict == l2::unlimited);
  CHECK(c.sampling.temperature == 0.8f);
  CHECK(c.sampling.top_k == 40);
  CHECK(c.sampling.top_p == 0.95f);
  CHECK(c.sampling.min_p == 0.05f);
  CHECK_FALSE(c.seed_given);
  CHECK_FALSE(c.n_gpu_layers);
  CHECK(c.penalties.repeat == 1.0f);
  CHECK(c.draft == l2::draft_kind::none);
  CHECK(c.draft_text == "none");
  CHECK(c.draft_layers == 0);
  CHECK(c.k == 0);
  CHECK_FALSE(c.k_auto);
  CHECK(c.verification == specdec::verification_rule::block);  // sampled chains
  CHECK(c.draft_min == 0);
  CHECK(c.ngram.min_ngram == 2);
  CHECK(c.ngram.max_ngram == 4);
  CHECK(c.ngram_candidates == 1);
  CHECK(c.tree.empty());
  CHECK(c.draw == specdec::candidate_draw::iid);
  CHECK(c.ctx_size == 0);
  CHECK(c.threads == 0);
  CHECK_FALSE(c.quiet);
  CHECK_FALSE(c.json);
  CHECK_FALSE(c.compare_plain);
}

TEST_CASE("cli: every flag in every spelling") {
  SECTION("model, tokenizer, context, threads") {
    CHECK(parse({"--model", "a/b.bin"}).model == "a/b.bin");
    CHECK(parse({"-m", "a/b.bin"}).model == "a/b.bin");
    CHECK(parse({"--model=a/b.bin"}).model == "a/b.bin");
    CHECK(parse({"-m", "a/b.bin"}).tokenizer.empty());  // found beside it at run time
    CHECK(parse({"-m", "a/b.bin", "--tokenizer", "t.bin"}).tokenizer == "t.bin");
    CHECK(parse({"-c", "64"}).ctx_size == 64);
    CHECK(parse({"--ctx-size", "0"}).ctx_size == 0);
    CHECK(parse({"-t", "2"}).threads == 2);
    CHECK(parse({"--threads", "256"}).threads == 256);
  }
  SECTION("prompt and output") {
    CHECK(parse({"-p", "Once"}).prompt == "Once");
    CHECK(parse({"--prompt", "Once upon"}).prompt == "Once upon");
    CHECK(parse({"--prompt", "-starts with a dash"}).prompt == "-starts with a dash");
    CHECK(parse({"-p", "-abc"}).prompt == "-abc");  // a value, not llama.cpp-style -abc flag
    CHECK(parse({"-f", "p.txt"}).prompt_file == "p.txt");
    CHECK(parse({"--file", "p.txt"}).prompt_file == "p.txt");
    CHECK(parse({"-n", "7"}).n_predict == 7);
    CHECK(parse({"--n-predict", "7"}).n_predict == 7);
    CHECK(parse({"-n7"}).n_predict == 7);
    CHECK(parse({"-n", "-1"}).n_predict == l2::unlimited);
    CHECK(parse({"--quiet"}).quiet);
    CHECK(parse({"--json"}).json);
    CHECK(parse({"--compare-plain"}).compare_plain);
    CHECK(parse({"--json", "--compare-plain"}).compare_plain);
  }
  SECTION("sampling") {
    CHECK(parse({"--temp", "0.7"}).sampling.temperature == 0.7f);
    CHECK(parse({"--temperature", "1"}).sampling.temperature == 1.0f);
    CHECK(parse({"--top-k", "40"}).sampling.top_k == 40);
    CHECK(parse({"--top-p", "0.9"}).sampling.top_p == 0.9f);
    CHECK(parse({"--min-p", "0.05"}).sampling.min_p == 0.05f);
    CHECK(parse({"-s", "42"}).sampling.seed == 42);
    CHECK(parse({"--seed", "18446744073709551615"}).sampling.seed ==
          std::numeric_limits<std::uint64_t>::max());
  }
  SECTION("drafting") {
    CHECK(parse({"--draft", "none"}).draft == l2::draft_kind::none);
    CHECK(parse({"--draft", "ngram"}).draft == l2::draft_kind::ngram);
    const auto layers = parse({"--draft", "layers:2"});
    CHECK(layers.draft == l2::draft_kind::layers);
    CHECK(layers.draft_layers == 2);
    const auto model = parse({"--draft", "model:d.bin"});
    CHECK(model.draft == l2::draft_kind::model);
    CHECK(model.draft_model == "d.bin");
    CHECK(model.draft_layers == 0);
    for (const char* spelling : {"-md", "--model-draft"}) {
      const auto md = parse({spelling, "d.bin"});
      CHECK(md.draft == l2::draft_kind::model);
      CHECK(md.draft_model == "d.bin");
      CHECK(md.draft_text == "model:d.bin");
    }
    for (const char* spelling : {"-k", "--draft-max", "--spec-draft-n-max", "--num-speculative-tokens"})
      CHECK(parse({"--draft", "ngram", spelling, "6"}).k == 6);
    const args l3{"--draft", "layers:3"};
    const auto with = [&](args more) {
      args a = l3;
      a.insert(a.end(), more.begin(), more.end());
      return parse(a);
    };
    CHECK(with({"--spec-draft-n-min", "2"}).draft_min == 2);  // llama.cpp's 2026 spellings
    CHECK(with({"--spec-draft-p-min", "0.5"}).draft_p_min == 0.5f);
    CHECK(parse({"--spec-draft-model", "d.bin"}).draft_model == "d.bin");
    CHECK(parse({"--spec-type", "ngram-simple"}).draft == l2::draft_kind::ngram);
    CHECK(parse({"--spec-type=ngram-mod", "-k", "8"}).draft == l2::draft_kind::ngram);
    CHECK(parse({"--spec-type", "none"}).draft == l2::draft_kind::none);
    CHECK(parse({"--spec-type", "draft-simple", "-md", "d.bin"}).draft == l2::draft_kind::model);
    CHECK(parse({"-k", "0"}).k == 0);  // plain decoding needs no drafter
    CHECK(with({"-k", "1024"}).k == 1024);
    CHECK(!with({"-k", "4"}).k_auto);
    CHECK(with({"-k", "auto"}).k_auto);  // the speed policy: chains up to 8, trees, or plain
    CHECK(with({"--spec-draft-n-max", "auto"}).k == 8);
    CHECK(with({"--draft-min", "2"}).draft_min == 2);
    CHECK(with({"--draft-p-min", "0.75"}).draft_p_min == 0.75f);
    CHECK(parse({}).draft_p_min == 0.0f);
    CHECK(!parse({}).sampling.processor);  // no penalty: no row processor
    CHECK(!parse({}).draft_temperature);
    CHECK(parse({"--draft-temp", "0.5"}).draft_temperature == 0.5f);
    const auto pen = parse({"--repeat-penalty", "1.3", "--repeat-last-n", "16",
                            "--frequency-penalty", "0.1", "--presence-penalty", "0.2"});
    CHECK(pen.penalties.repeat == 1.3f);
    CHECK(pen.penalties.last_n == 16);
    CHECK(pen.penalties.frequency == 0.1f);
    CHECK(pen.penalties.presence == 0.2f);
    CHECK(static_cast<bool>(pen.sampling.processor));
    CHECK(with({"--draft-max", "8", "--draft-min", "8"}).draft_min == 8);
    const auto ng = parse({"--draft", "ngram", "--ngram-min", "1", "--ngram-max", "3", "-k", "8"});
    CHECK(ng.ngram.min_ngram == 1);
    CHECK(ng.ngram.max_ngram == 3);
    CHECK(ng.ngram.max_draft == 8);
    const auto vllm =
        parse({"--draft", "ngram", "--prompt-lookup-min", "3", "--prompt-lookup-max", "5"});
    CHECK(vllm.ngram.min_ngram == 3);
    CHECK(vllm.ngram.max_ngram == 5);
    const auto cand = parse({"--draft", "ngram", "--ngram-candidates", "3", "-k", "4"});
    CHECK(cand.ngram_candidates == 3);
    CHECK(cand.tree == std::vector<std::size_t>{3, 1, 1, 1});
    // Composed: prompt lookup first, the draft model when it has nothing.
    const auto nl = parse({"--draft", "ngram+layers:2", "--ngram-min", "1", "-k", "6"});
    CHECK(nl.ngram_first);
    CHECK(nl.draft == l2::draft_kind::layers);
    CHECK(nl.draft_layers == 2);
    CHECK(nl.ngram.min_ngram == 1);
    CHECK(nl.ngram.max_draft == 6);
    const auto nm = parse({"--draft", "ngram+model:d.bin", "--ngram-max", "0"});
    CHECK(nm.ngram_first);
    CHECK(nm.draft == l2::draft_kind::model);
    CHECK(nm.draft_model == "d.bin");
    CHECK(nm.ngram.max_ngram == 0);
    CHECK(!parse({"--draft", "layers:2"}).ngram_first);
    CHECK(!parse({"--draft", "ngram"}).ngram_first);
    CHECK(with({"--tree", "4x2x2"}).tree == std::vector<std::size_t>{4, 2, 2});
    CHECK(with({"--tree", "4x2x2"}).k == 4);  // a fixed shape: no speed policy
    CHECK_FALSE(with({"--tree", "4x2x2"}).k_auto);
    CHECK(parse({"--replacement", "without"}).draw == specdec::candidate_draw::without_replacement);
    CHECK(parse({"--replacement", "with"}).draw == specdec::candidate_draw::iid);
    CHECK(parse({"--temp", "0"}).verification == specdec::verification_rule::token);  // greedy
    CHECK(parse({"--temp", "0.8"}).verification == specdec::verification_rule::block);
    CHECK(with({"--temp", "0.8", "--tree", "2x2"}).verification ==
          specdec::verification_rule::token);
    CHECK(parse({"--temp", "0.8", "--verification", "token"}).verification ==
          specdec::verification_rule::token);
    CHECK(parse({"--verification", "block"}).verification == specdec::verification_rule::block);
  }
  SECTION("a later flag wins, across spellings") {
    CHECK(parse({"--draft", "ngram", "-k", "2", "--draft-max", "5"}).k == 5);
    CHECK(parse({"--temperature", "1", "--temp", "0.5"}).sampling.temperature == 0.5f);
  }
}

TEST_CASE("cli: --draft heads:FILE and its options") {
  const auto c = specdec::llama2c::parse_cli(std::vector<std::string>{
      "--draft", "heads:/tmp/x.heads", "--tree", "4x4", "--heads-nodes", "12", "--heads-expand",
      "2", "--heads-candidates", "top"});
  CHECK(c.draft == specdec::llama2c::draft_kind::heads);
  CHECK(c.draft_heads == "/tmp/x.heads");
  CHECK(c.heads_nodes == 12);
  CHECK(c.heads_expand == 2);
  CHECK_FALSE(c.heads_sampled);
}

TEST_CASE("cli: --help is generated and lists every spelling") {
  for (const char* h : {"-h", "--help"}) {
    const auto c = parse({h});
    CHECK_FALSE(c.help.empty());
  }
  const std::string help = l2::cli_help();
  for (const char* name : {"--model",
                           "--tokenizer",
                           "--ctx-size",
                           "--threads",
                           "--prompt",
                           "--file",
                           "--n-predict",
                           "--quiet",
                           "--json",
                           "--compare-plain",
                           "--temp",
                           "--temperature",
                           "--top-k",
                           "--top-p",
                           "--min-p",
                           "--seed",
                           "--draft ",
                           "--model-draft",
                           "-md",
                           "--draft-max",
                           "--num-speculative-tokens",
                           "--draft-min",
                           "--draft-p-min",
                           "--ngram-min",
                           "--prompt-lookup-min",
                           "--ngram-max",
                           "--prompt-lookup-max",
                           "--ngram-candidates",
                           "--tree",
                           "--replacement",
                           "--verification",
                           "--spec-type",
                           "--n-gpu-layers",
                           "-ngl",
                           "Exit status"})
    CHECK_THAT(help, Catch::Contains(name));
}

TEST_CASE("cli: bad flags name the flag and suggest the nearest") {
  using l2::usage_error;
  CHECK_THROWS_MATCHES(parse({"--bogus"}), usage_error, Catch::Message("unknown option '--bogus'"));
  CHECK_THROWS_WITH(parse({"--tempreature", "1"}),
                    "unknown option '--tempreature' (did you mean --temperature?)");
  CHECK_THROWS_WITH(parse({"--top_p", "0.9"}), "unknown option '--top_p' (did you mean --top-p?)");
  CHECK_THROWS_WITH(parse({"--draft-mx", "3"}),
                    "unknown option '--draft-mx' (did you mean --draft-max?)");
  CHECK_THROWS_WITH(parse({"--ctx-sze=3"}),
                    "unknown option '--ctx-sze=3' (did you mean --ctx-size?)");
  CHECK_THROWS_WITH(parse({"-ngx", "99"}), "unknown option '-ngx' (did you mean -ngl?)");
  CHECK_THROWS_WITH(parse({"-x"}), "unknown option '-x'");
  CHECK_THROWS_WITH(parse({"hello"}),
                    "unexpected argument 'hello' (a prompt goes after -p/--prompt)");
  CHECK_THROWS_WITH(parse({"--model"}), "--model: 1 required PATH missing");
  CHECK_THROWS_WITH(parse({"-n"}), "--n-predict: 1 required N missing");
}

TEST_CASE("cli: bad values name the flag and the value") {
  const auto bad = [](args a, const std::string& message) {
    INFO(a.front());
    CHECK_THROWS_AS(parse(a), l2::usage_error);
    CHECK_THROWS_WITH(parse(a), message);
  };
  SECTION("numbers") {
    bad({"-n", "abc"}, "-n 'abc': is not a whole number");
    bad({"--n-predict", "0"},
        "--n-predict '0': must be >= 1 (or -1: until end of text or a full context)");
    bad({"-n", "-2"}, "-n '-2': is not a whole number");
    bad({"-n", "1.5"}, "-n '1.5': is not a whole number");
    bad({"-n", "+3"}, "-n '+3': is not a whole number");
    bad({"-n", "99999999999999999999"}, "-n '99999999999999999999': is out of range");
    bad({"-c", "x"}, "-c 'x': is not a whole number");
    bad({"--ctx-size", "-1"}, "--ctx-size '-1': is not a whole number");
    bad({"-t", "999"}, "-t '999': exceeds the largest thread count = 256");
    bad({"--threads", "two"}, "--threads 'two': is not a whole number");
    bad({"-s", "-2"}, "-s '-2': is not a whole number");
    bad({"--seed", "18446744073709551616"}, "--seed '18446744073709551616': is out of range");
    bad({"--top-k", "1e3"}, "--top-k '1e3': is not a whole number");
  }
  SECTION("sampling ranges") {
    bad({"--temp", "abc"}, "--temp 'abc': is not a number");
    bad({"--temp", "nan"}, "--temp 'nan': is not a finite number");
    bad({"--temperature", "inf"}, "--temperature 'inf': is not a finite number");
    bad({"--temp", "-0.5"}, "--temp '-0.5': must be >= 0 (0 = greedy)");
    bad({"--top-p", "0"}, "--top-p '0': must be in (0, 1]");
    bad({"--top-p", "1.5"}, "--top-p '1.5': must be in (0, 1]");
    bad({"--min-p", "1"}, "--min-p '1': must be in [0, 1)");
    bad({"--min-p", "-0.1"}, "--min-p '-0.1': must be in [0, 1)");
  }
  SECTION("draft length: bounded before anything is built (issue 10, item 1)") {
    bad({"--draft", "ngram", "--ngram-candidates", "2", "-k", "18446744073709551615"},
        "-k '18446744073709551615': exceeds the largest draft (max_draft_length) = 1024");
    bad({"--draft", "ngram", "--draft-max", "2000000000"},
        "--draft-max '2000000000': exceeds the largest draft (max_draft_length) = 1024");
    bad({"--draft", "ngram", "--num-speculative-tokens", "99999999999999999999"},
        "--num-speculative-tokens '99999999999999999999': exceeds the largest draft "
        "(max_draft_length) = 1024");
    bad({"-k", "1025"}, "-k '1025': exceeds the largest draft (max_draft_length) = 1024");
    bad({"-k", "-1"}, "-k '-1': is not a whole number");
    bad({"--draft", "layers:3", "--draft-min", "9"},
        "--draft-min '9': exceeds the largest draft (-k auto: 8)");
    bad({"--draft", "ngram", "-k", "3", "--draft-min", "4"},
        "--draft-min '4': exceeds the largest draft (-k 3)");
    bad({"--draft-min", "x"}, "--draft-min 'x': is not a whole number");
    // Without a drafter nothing is drafted: a K, a minimum or a tree is refused, not ignored.
    bad({"--draft", "none", "-k", "auto"},
        "-k 'auto': needs a drafter (--draft, -md or --spec-type): without one nothing is drafted");
    bad({"-k", "4"},
        "-k '4': needs a drafter (--draft, -md or --spec-type): without one nothing is drafted");
    bad({"--draft-min", "2"},
        "--draft-min: needs a drafter (--draft layers:L, model:PATH, ngram or heads:FILE, or -md)");
    bad({"--draft", "layers:3", "-k", "auto", "--tree", "2x2"},
        "-k auto: plans its own shapes; --tree fixes one");
    bad({"--spec-type", "eagle3"}, "--spec-type 'eagle3': is not none, draft-simple or ngram-*");
    bad({"--spec-type", "draft-simple"},
        "--spec-type 'draft-simple': needs a draft model (-md PATH)");
    bad({"--spec-type", "ngram-simple", "--draft", "layers:3"},
        "--spec-type and --draft: give one of them");
    bad({"--spec-type"}, "--spec-type: 1 required TYPE missing");
    bad({"--draft-temp", "-1"}, "--draft-temp '-1': must be >= 0 (0 = the drafter's top tokens)");
    bad({"--repeat-penalty", "0"}, "--repeat-penalty '0': must be > 0 (1 = off)");
    bad({"--repeat-last-n", "-3"}, "--repeat-last-n '-3': is not a whole number");
    bad({"--draft-p-min", "1.5"}, "--draft-p-min '1.5': must be in [0, 1]");
    bad({"--draft-p-min", "-0.1"}, "--draft-p-min '-0.1': must be in [0, 1]");
    bad({"--draft", "ngram", "--draft-p-min", "0.5"},
        "--draft-p-min: needs --draft layers:L or model:PATH (a draft model)");
    bad({"--draft", "layers:3", "--tree", "2x2", "--draft-p-min", "0.5"},
        "--draft-p-min: applies to chains of drafts, not to --tree");
    bad({"--draft", "ngram", "--ngram-candidates", "1025", "-k", "1024"},
        "--ngram-candidates '1025': times the draft length 1024 exceeds the tree bound "
        "max_tree_nodes = 1048576");
  }
  SECTION("drafters") {
    bad({"--draft", "big"},
        "--draft 'big': is not none, layers:L, model:PATH, ngram or heads:FILE");
    bad({"--draft", "heads:"}, "--draft 'heads:': the path in heads:FILE is empty");
    bad({"--heads-nodes", "4"}, "--heads-nodes: needs --draft heads:FILE");
    bad({"--draft", "heads:x", "--heads-candidates", "all"},
        "--heads-candidates 'all': is not sampled or top");
    bad({"--draft", "heads:x", "--heads-expand", "x"},
        "--heads-expand 'x': is not a whole number");
    bad({"--draft", "layers:"}, "--draft 'layers:': L in layers:L is not a whole number");
    bad({"--draft", "layers:x"}, "--draft 'layers:x': L in layers:L is not a whole number");
    bad({"--draft", "layers:0"}, "--draft 'layers:0': L in layers:L must be >= 1");
    bad({"--draft", "model:"}, "--draft 'model:': the path in model:PATH is empty");
    bad({"-md", ""}, "-md '': the path is empty");
    bad({"--draft", "ngram+ngram"},
        "--draft 'ngram+ngram': ngram+ takes layers:L or model:PATH after it");
    bad({"--draft", "ngram+none"},
        "--draft 'ngram+none': ngram+ takes layers:L or model:PATH after it");
    bad({"--draft", "ngram+layers:0"}, "--draft 'ngram+layers:0': L in layers:L must be >= 1");
    bad({"--draft", "ngram+model:"}, "--draft 'ngram+model:': the path in model:PATH is empty");
    bad({"--draft", "ngram+layers:2", "-k", "4", "--tree", "2x2"},
        "--draft ngram+layers:2: drafts chains, not --tree or --ngram-candidates");
    bad({"--draft", "ngram+layers:2", "--ngram-candidates", "2"},
        "--draft ngram+layers:2: drafts chains, not --tree or --ngram-candidates");
    bad({"-md", "d.bin", "--draft", "none"}, "--draft and -md: give one of them");
    bad({"--tree", "4y2"},
        "--tree '4y2': parse_branching: \"4y2\": 'y' at position 1 is not a digit or 'x'");
    bad({"--tree", "4x2", "--draft", "none"},
        "--tree: needs a drafter (--draft layers:L, model:PATH, ngram or heads:FILE, or -md)");
    bad({"--replacement", "maybe"}, "--replacement 'maybe': is not with or without");
    bad({"--verification", "joint"},
        "--verification 'joint': is not token, block, coupled or sample-match");
    bad({"--draft", "layers:3", "--verification", "block", "--tree", "2x2"},
        "--verification block: applies to chains of drafts, not to --tree or --ngram-candidates");
  }
  SECTION("n-gram options are checked here, not after loading (issue 10, item 5)") {
    bad({"--ngram-min", "2"}, "--ngram-min: needs --draft ngram (prompt lookup)");
    bad({"--prompt-lookup-max", "3"}, "--prompt-lookup-max: needs --draft ngram (prompt lookup)");
    bad({"--ngram-candidates", "2"}, "--ngram-candidates: needs --draft ngram (prompt lookup)");
    bad({"--draft", "ngram", "--ngram-min", "0"},
        "--ngram-min '0': ngram_options.min_ngram: must be >= 1, got 0");
    bad({"--draft", "ngram", "--prompt-lookup-min", "5"},
        "--prompt-lookup-min '5': ngram_options.min_ngram: must be <= max_ngram (4), got 5");
    bad({"--draft", "ngram", "--ngram-max", "1000"},
        "--ngram-max '1000': ngram_options.max_ngram: must be <= 64, got 1000");
    bad({"--draft", "ngram", "--ngram-candidates", "0"}, "--ngram-candidates '0': must be >= 1");
    bad({"--draft", "ngram", "--ngram-candidates", "2", "--tree", "2x2"},
        "--ngram-candidates and --tree: give one of them");
    bad({"--draft", "ngram", "--ngram-candidates", "2", "--draft-min", "2"},
        "--draft-min: applies to chains of drafts, not to --tree or --ngram-candidates");
  }
  SECTION("prompt and output") {
    bad({"-p", ""}, "-p '': the prompt is empty");
    bad({"-f", ""}, "-f '': the path is empty");
    bad({"-p", "x", "--file", "y"}, "-p and --file: give one of them");
    bad({"-m", ""}, "-m '': the path is empty");
    bad({"--tokenizer", ""}, "--tokenizer '': the path is empty");
    bad({"--quiet", "--json"}, "--quiet and --json: give one of them");
    bad({"--quiet", "--compare-plain"},
        "--quiet and --compare-plain: --quiet prints only the text, so the comparison would not "
        "be shown (use --json for both)");
  }
}

TEST_CASE("cli: progress only on a terminal, never over streamed text") {
  CHECK(l2::show_progress(true, false, false));        // text piped, stderr on a terminal
  CHECK(l2::show_progress(true, true, true));          // --json: stdout holds nothing until the end
  CHECK_FALSE(l2::show_progress(true, true, false));   // the text streams to the same terminal
  CHECK_FALSE(l2::show_progress(false, false, true));  // stderr is a pipe or file
  CHECK(l2::progress_line(50, 2.0) == "\r50 tokens, 25.0 tokens/s ");
}

TEST_CASE("cli: --json holds the options in force and every statistic") {
  const auto c = parse({"--draft", "ngram", "--prompt-lookup-max", "3", "-k", "6", "-n", "-1",
                        "--temp", "0.5", "--top-k", "9", "-s", "7"});
  const auto o = l2::options_json(c);
  CHECK(o["n_predict"].is_null());
  CHECK(o["sampling"]["temperature"] == 0.5f);
  CHECK(o["sampling"]["top_k"] == 9);
  CHECK(o["sampling"]["seed"] == 7);
  CHECK(o["draft"]["kind"] == "ngram");
  CHECK(o["draft"]["draft_max"] == 6);
  CHECK(o["draft"]["ngram"]["max"] == 3);
  CHECK(o["draft"]["tree"].empty());

  specdec::decode_stats s;
  s.generated_tokens = 10;
  s.target_calls = 4;
  s.draft_calls = 4;
  s.drafted_tokens = 8;
  s.drafted_nodes = 8;
  s.accepted_tokens = 6;
  s.drafted_at = {4, 4};
  s.accepted_at = {4, 2};
  s.prefill_seconds = 1.0;
  s.draft_seconds = 0.5;
  s.target_seconds = 2.0;
  s.verify_seconds = 0.25;
  s.total_seconds = 5.0;
  const auto j = l2::stats_json(s);
  CHECK(j["tokens_per_target_call"] == 2.5);
  CHECK(j["acceptance_rate"] == 0.75);
  REQUIRE(j["acceptance_by_position"].size() == 2);
  CHECK(j["acceptance_by_position"][1]["position"] == 2);
  CHECK(j["acceptance_by_position"][1]["rate"] == 0.5);
  CHECK(j["seconds"]["decode"] == 4.0);
  CHECK(j["seconds"]["other"] == 1.25);
  CHECK(j["tokens_per_second"] == 2.5);
  CHECK(std::string(l2::stop_reason_name(specdec::stop_reason::context_full)) == "context_full");
}

TEST_CASE("cli: --draft-min drops short drafts and forwards the rest") {
  specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 2, .max_draft = 8});
  const std::vector<specdec::token_id> history{1, 2, 3, 1, 2, 3, 9, 1, 2};  // "1 2" -> 3 9 1 2
  specdec::rng g(0);
  specdec::draft out;
  lookup.propose(history, 8, {}, g, out);
  REQUIRE(out.size() == 4);
  specdec::min_length_drafter<specdec::ngram_drafter> keep(lookup, 4), drop(lookup, 5);
  keep.propose(history, 8, {}, g, out);
  CHECK(out.size() == 4);
  CHECK(keep.dropped() == 0);
  drop.propose(history, 8, {}, g, out);
  CHECK(out.size() == 0);
  CHECK(drop.dropped() == 1);
  static_assert(specdec::TreeDrafter<specdec::min_length_drafter<specdec::ngram_drafter>>);
}

TEST_CASE("cli: the seed is drawn unless given, and printed") {
  CHECK(parse({"-s", "7"}).seed_given);
  CHECK(parse({"-s", "7"}).sampling.seed == 7);
  CHECK_FALSE(parse({"-s", "-1"}).seed_given);  // llama.cpp's "random"
  auto a = parse({}), b = parse({});
  specdec::cli::shared_flags::draw_seed(a);
  specdec::cli::shared_flags::draw_seed(b);
  CHECK(a.sampling.seed != b.sampling.seed);  // 2^-64 to fail
  auto given = parse({"--seed", "42"});
  specdec::cli::shared_flags::draw_seed(given);
  CHECK(given.sampling.seed == 42);
  CHECK(l2::sampling_line(given) ==
        "sampling: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, seed 42");
  const auto greedy = parse({"--temp", "0", "-s", "3"});
  CHECK(l2::sampling_line(greedy) == "sampling: greedy, seed 3");
  auto drawn = parse({"--temp", "0"});
  drawn.sampling.seed = 9;
  CHECK(l2::sampling_line(drawn) == "sampling: greedy, seed 9 (drawn; -s 9 repeats this run)");
  CHECK(l2::options_json(given)["sampling"]["seed_drawn"] == false);
  CHECK(l2::options_json(drawn)["sampling"]["seed_drawn"] == true);
}

TEST_CASE("cli: -ngl is accepted (nothing to offload here)") {
  CHECK(*parse({"-ngl", "99"}).n_gpu_layers == 99);
  CHECK(*parse({"--n-gpu-layers", "0"}).n_gpu_layers == 0);
  CHECK(*parse({"--gpu-layers", "all"}).n_gpu_layers == -2);
  CHECK(*parse({"-ngl", "auto"}).n_gpu_layers == -1);
  CHECK(l2::options_json(parse({"-ngl", "99"}))["n_gpu_layers"] == 99);
  CHECK_THROWS_WITH(parse({"-ngl", "many"}), "-ngl 'many': is not a whole number, auto or all");
}

TEST_CASE("cli: a drafter only when asked for, and then K is the speed policy unless -k") {
  CHECK(parse({"--draft", "layers:3"}).k_auto);
  CHECK(parse({"-md", "d.bin"}).k_auto);
  CHECK(parse({"--spec-type", "ngram-simple"}).k_auto);
  CHECK(parse({"-md", "d.bin", "--draft-max", "5"}).k == 5);
  CHECK_FALSE(parse({"-md", "d.bin", "--draft-max", "5"}).k_auto);
  CHECK(parse({"--draft", "ngram", "--ngram-candidates", "2"}).tree ==
        std::vector<std::size_t>{2, 1, 1, 1});  // a fixed shape of 4 without -k
}

TEST_CASE("cli: the tokenizer is found beside the model") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "specdec_find_tokenizer_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto touch = [&](const char* name) { std::ofstream(dir / name) << "x"; };
  const std::string model = (dir / "tiny.bin").string();
  touch("tiny.bin");
  CHECK_THROWS_WITH(l2::find_tokenizer(model),
                    "--tokenizer: no tokenizer found for the model '" + model + "'; tried " +
                        (dir / "tiny.tok*.bin").string() + " and " +
                        (dir / "tokenizer.bin").string() + ": give one with --tokenizer PATH");
  touch("tokenizer.bin");
  CHECK(l2::find_tokenizer(model) == (dir / "tokenizer.bin").string());
  touch("other.tok512.bin");  // another model's
  CHECK(l2::find_tokenizer(model) == (dir / "tokenizer.bin").string());
  touch("tiny.tok512.bin");  // the stem's own comes first
  CHECK(l2::find_tokenizer(model) == (dir / "tiny.tok512.bin").string());
  touch("tiny.tok32000.bin");
  CHECK_THROWS_WITH(l2::find_tokenizer(model),
                    Catch::Contains("several tokenizers beside the model") &&
                        Catch::Contains("tiny.tok32000.bin, "));
  fs::remove_all(dir);

  // The real models, when they are here: each has its .tok512.bin beside it.
  for (const char* name : {"aidreams260K", "stories260K"}) {
    const std::string m = std::string(SPECDEC_MODELS_DIR) + "/" + name + ".bin";
    if (!fs::exists(m)) {
      WARN("skipped: " << m << " not found");
      continue;
    }
    CHECK(l2::find_tokenizer(m) == std::string(SPECDEC_MODELS_DIR) + "/" + name + ".tok512.bin");
  }
}

TEST_CASE("cli: the statistics put decoding seconds beside tokens/s, counts beside rates") {
  specdec::decode_stats s;
  s.generated_tokens = 10;
  s.target_calls = 4;
  s.drafted_tokens = 9;
  s.accepted_tokens = 6;
  s.drafted_at = {4, 4, 1, 0};
  s.accepted_at = {4, 2, 0, 0};
  s.prefill_seconds = 1.0;
  s.total_seconds = 5.0;
  const std::string text = s.summary();
  // 10 tokens over the 4 decoding seconds (the prompt's 1 s apart), not over all 5.
  CHECK_THAT(text, Catch::StartsWith("generated 10 tokens in 4.000 s (2.5 tokens/s), prompt "
                                     "1.000 s, 4 target calls, 2.50 tokens per target call\n"));
  // Never drafted: "-"; drafted once and rejected: 0.00 with its count, not like 0 of 4.
  CHECK_THAT(text, Catch::Contains("acceptance by draft position (accepted/drafted): 1.00 (4/4) "
                                   "0.50 (2/4) 0.00 (0/1) -\n"));
  const auto j = l2::stats_json(s);
  CHECK(j["acceptance_by_position"][2]["rate"] == 0.0);
  CHECK(j["acceptance_by_position"][3]["rate"].is_null());
  CHECK(j["acceptance_by_position"][3]["drafted"] == 0);
}
