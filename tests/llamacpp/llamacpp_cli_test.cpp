// tests/llamacpp/llamacpp_cli_test.cpp - specdec-llama's command line (llamacpp/cli/llama_cli.hpp):
// the tree flag's bounds (a sequence per leaf, at most llama.cpp's 256), --grammar-file and
// --grammar, -fa, --draft heads:FILE, -np, --verification; llama.cpp's defaults (shared with
// specdec-generate, common/cli/shared_flags.hpp), -ngl, --spec-type, --rpc and -ngld.
// Parsing loads nothing, so this runs without the GGUF models.
#include <catch2/catch.hpp>

#include <llamacpp/cli/llama_cli.hpp>

using namespace specdec::llamacpp;

TEST_CASE("specdec-llama cli: --tree counts its leaves against llama.cpp's 256 sequences") {
  const std::vector<std::string> base{"-m", "t.gguf", "-md", "d.gguf", "--tree"};
  auto with = [&](const char* shape) {
    auto a = base;
    a.emplace_back(shape);
    return parse_llama_cli(a);
  };
  CHECK(with("9x9").tree == std::vector<std::size_t>{9, 9});
  CHECK(tree_leaves(with("9x9").tree) == 81);
  CHECK(tree_leaves(with("4x4x4x4").tree) == 256);
  REQUIRE_THROWS_WITH(with("9x9x9"),
                      "--tree 9x9x9: more than 256 leaves; a tree is scored in one llama_decode with a "
                      "sequence per leaf, and llama.cpp takes at most 256 sequences (LLAMA_MAX_SEQ)");
  CHECK(tree_leaves(std::vector<std::size_t>{1000, 1000, 1000}) == max_tree_leaves + 1);
}

TEST_CASE("specdec-llama cli: --grammar-file names a GBNF file, --grammar gives the text") {
  CHECK(parse_llama_cli({"-m", "t.gguf", "--grammar-file", "g.gbnf"}).grammar_file == "g.gbnf");
  const auto c = parse_llama_cli({"-m", "t.gguf", "--grammar", "root ::= [0-9]+"});
  CHECK(c.grammar == "root ::= [0-9]+");
  CHECK(c.grammar_file.empty());
  REQUIRE_THROWS_WITH(
      parse_llama_cli({"-m", "t.gguf", "--grammar", "root ::= \"a\"", "--grammar-file", "g"}),
      "--grammar and --grammar-file: give one of them, not both");
}

TEST_CASE("specdec-llama cli: -fa takes llama.cpp's on | off | auto, auto by default") {
  CHECK(parse_llama_cli({"-m", "t.gguf"}).flash_attn == flash_attention::automatic);
  CHECK(parse_llama_cli({"-m", "t.gguf", "-fa", "off"}).flash_attn == flash_attention::off);
  CHECK(parse_llama_cli({"-m", "t.gguf", "-fa", "on"}).flash_attn == flash_attention::on);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--flash-attn", "auto"}).flash_attn ==
        flash_attention::automatic);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-fa", "yes"}),
                      "-fa 'yes': is not on, off or auto");
}

TEST_CASE("specdec-llama cli: --draft heads:FILE names a heads file") {
  const auto c = parse_llama_cli({"-m", "t.gguf", "--draft", "heads:eagle.heads", "--tree", "2x2"});
  CHECK(c.draft == llama_draft::heads);
  CHECK(c.heads_file == "eagle.heads");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--draft", "heads:"}),
                      "--draft 'heads:': the path in heads:FILE is empty");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--draft", "medusa"}),
                      "--draft 'medusa': is not none, model, ngram or heads:FILE");
}

TEST_CASE("specdec-llama cli: -np N serves N requests, chains without heads or grammars") {
  CHECK(parse_llama_cli({"-m", "t.gguf"}).parallel == 0);
  CHECK(parse_llama_cli({"-m", "t.gguf", "-np", "4", "-f", "p.txt"}).parallel == 4);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--parallel", "2", "--draft", "ngram"}).parallel == 2);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-np", "300"}),
                      "-np: at most 256 requests (a sequence each; llama.cpp's LLAMA_MAX_SEQ), "
                      "got 300");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "-np", "2", "--tree", "2x2"}),
                      "-np: --tree is not supported with --parallel (chains only)");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-np", "2", "--draft", "heads:h"}),
                      "-np: --draft heads:FILE is not supported with --parallel");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-np", "2", "--grammar", "root ::= \"a\""}),
                      "-np: --grammar is not supported with --parallel");
}

TEST_CASE("specdec-llama cli: --spec-draft-n-min and -p-min act on a draft model only") {
  CHECK(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "--spec-draft-n-min", "2",
                         "--spec-draft-p-min", "0.5"}).draft_min == 2);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--draft", "heads:h", "--spec-draft-p-min",
                                       "0.5"}),
                      "--spec-draft-p-min: applies to a draft model (-md), not to --draft heads:FILE");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--draft", "ngram", "--spec-draft-n-min", "2"}),
                      "--spec-draft-n-min: applies to a draft model (-md), not to --draft ngram");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--spec-draft-n-min", "2"}),
                      "--spec-draft-n-min: applies to a draft model (-md), not to no drafter");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "-np", "2",
                                       "--spec-draft-n-min", "2"}),
                      "-np: --spec-draft-n-min is not supported with --parallel");
}

TEST_CASE("specdec-llama cli: --verification token | block | coupled | sample-match") {
  using specdec::verification_rule;
  CHECK(parse_llama_cli({"-m", "t.gguf"}).verification == verification_rule::token);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--verification", "coupled"}).verification ==
        verification_rule::coupled);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--verification", "sample-match"}).verification ==
        verification_rule::sample_match);
  // coupled verifies trees too; block does not.
  CHECK(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "--tree", "2x2", "--verification",
                         "coupled"})
            .tree.size() == 2);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--verification", "gumbel"}),
                      "--verification 'gumbel': is not token, block, coupled or sample-match");
}

TEST_CASE("specdec-llama cli: llama.cpp's defaults, the same as specdec-generate's") {
  const auto c = parse_llama_cli({"-m", "t.gguf"});
  CHECK(c.sampling.temperature == 0.8f);
  CHECK(c.sampling.top_k == 40);
  CHECK(c.sampling.top_p == 0.95f);
  CHECK(c.sampling.min_p == 0.05f);
  CHECK_FALSE(c.seed_given);  // drawn by the program, printed with the statistics
  CHECK(c.n_predict == specdec::cli::unlimited);  // -n -1
  CHECK(c.draft == llama_draft::none);
  CHECK_FALSE(c.k);
  CHECK_FALSE(c.n_gpu_layers);  // llama.cpp's own default
  CHECK(parse_llama_cli({"-m", "t.gguf", "-s", "5"}).seed_given);
  // A drafter: K from the speed policy unless -k; a --tree is a fixed shape.
  CHECK_FALSE(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf"}).k);
  CHECK(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf"}).k_auto);
  CHECK(*parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "--draft-max", "6"}).k == 6);
  CHECK(*parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "--tree", "2x2"}).k == 4);
  CHECK_FALSE(parse_llama_cli({"-m", "t.gguf", "-md", "d.gguf", "-k", "auto"}).k);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--spec-draft-n-max", "4"}),
                      "--spec-draft-n-max '4': needs a drafter (--draft, -md or --spec-type): "
                      "without one nothing is drafted");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-p", "x"}), "-m: the target model is required");
}

TEST_CASE("specdec-llama cli: -ngl reaches llama.cpp's model parameters; --spec-type") {
  CHECK(*parse_llama_cli({"-m", "t.gguf", "-ngl", "99"}).n_gpu_layers == 99);
  CHECK(*parse_llama_cli({"-m", "t.gguf", "--n-gpu-layers", "all"}).n_gpu_layers == -2);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-ngl", "x"}),
                      "-ngl 'x': is not a whole number, auto or all");
  CHECK(parse_llama_cli({"-m", "t.gguf", "--spec-type", "ngram-simple"}).draft ==
        llama_draft::ngram);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--spec-type", "none", "-md", "d.gguf"}).draft ==
        llama_draft::none);
  CHECK(parse_llama_cli({"-m", "t.gguf", "--spec-type", "draft-simple", "-md", "d.gguf"}).draft ==
        llama_draft::model);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--spec-type", "draft-simple"}),
                      "--spec-type 'draft-simple': needs a draft model (-md PATH)");
  const std::string help = parse_llama_cli({"--help"}).help;
  for (const char* name : {"--spec-type", "--n-gpu-layers", "-ngl", "--flash-attn", "-fa",
                           "--draft-max", "--temp", "--seed", "-md"})
    CHECK_THAT(help, Catch::Contains(name));
}

TEST_CASE("specdec-llama cli: --rpc lists HOST:PORT servers, -ngld the draft model's layers") {
  const auto c = parse_llama_cli(
      {"-m", "t.gguf", "-md", "d.gguf", "--rpc", "127.0.0.1:50052,box:7", "-ngl", "99", "-ngld", "0"});
  CHECK(c.rpc_servers == "127.0.0.1:50052,box:7");
  CHECK(*c.n_gpu_layers_draft == 0);
  CHECK_FALSE(parse_llama_cli({"-m", "t.gguf"}).n_gpu_layers_draft);
  CHECK(*parse_llama_cli({"-m", "t.gguf", "--gpu-layers-draft", "all"}).n_gpu_layers_draft == -2);
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--rpc", "127.0.0.1"}),
                      "--rpc: '127.0.0.1' is not HOST:PORT (in '127.0.0.1')");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--rpc", "a:1,,b:2"}),
                      "--rpc: '' is not HOST:PORT (in 'a:1,,b:2')");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "--rpc", "a:70000"}),
                      "--rpc: 'a:70000': the port is not in 1..65535");
  REQUIRE_THROWS_WITH(parse_llama_cli({"-m", "t.gguf", "-ngld", "-3"}),
                      "-ngld '-3': is not a whole number, auto or all");
  const auto servers = parse_rpc_servers("[::1]:50052,h:1");
  REQUIRE(servers.size() == 2);
  CHECK(servers[0].host == "[::1]");
  CHECK(servers[0].port == "50052");
  const std::string help = parse_llama_cli({"--help"}).help;
  for (const char* name : {"--rpc", "-ngld", "--gpu-layers-draft"})
    CHECK_THAT(help, Catch::Contains(name));
}
