// specdec-train-heads: trains Medusa heads or an EAGLE-style predictor for a llama2.c checkpoint
// on text the model generates itself, and writes them as a heads file (heads_file.hpp) for
// specdec-generate --draft heads:FILE. `--kind eagle` trains the predictor's MLP alone,
// `--kind eagle-attn` the MLP with one causal attention layer over the features
// (eagle_attn_train.hpp).
//
//   specdec-train-heads --model aidreams260K.bin --tokenizer aidreams260K.tok512.bin
//                       --out medusa.heads --kind medusa --seconds 300
//
// Exit status: 0 written; 2 for a bad flag or value; 1 when a file cannot be read or written.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama2c/training/eagle_attn_train.hpp"
#include "llama2c/engine/heads_file.hpp"
#include "llama2c/training/heads_train.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;

struct options {
  std::string model = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.bin";
  std::string tokenizer = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.tok512.bin";
  std::string out, kind = "medusa", classifier = "own";
  l2::train::corpus_options corpus;
  l2::train::train_options train;
  l2::train::attn_options attn;
  std::size_t threads = 1;
};

int run(const options& o) {
  const bool tty = isatty(STDERR_FILENO) == 1;
  const auto started = std::chrono::steady_clock::now();
  auto weights = l2::load_checkpoint(o.model);
  l2::model target(weights, {.threads = o.threads});
  const l2::tokenizer tok(o.tokenizer, target.vocab_size());  // refuses another vocabulary
  const auto corpus = l2::train::generate_corpus(target, o.corpus, [&](std::size_t s) {
    if (tty && s % 50 == 0)
      std::fprintf(stderr, "\rgenerating text: %zu / %zu sequences", s, o.corpus.sequences);
  });
  if (tty) std::fputs("\r\033[K", stderr);
  const double gen_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  l2::train::train_report report;
  const auto show = [&](std::size_t step, float loss) {
    if (tty) std::fprintf(stderr, "\rstep %zu / %zu, loss %.4f", step, o.train.steps, loss);
  };
  const auto rec =
      o.kind == "eagle-attn"
          ? l2::train::attn_record(
                l2::train::train_eagle_attn(target, corpus, o.train, o.attn, report, show), target,
                report)
          : l2::train::train_heads(target, corpus, o.train, report, show);
  l2::save_heads(o.out, rec);
  std::printf("wrote %s: %s\n", o.out.c_str(), l2::heads_summary(rec).c_str());
  if (tty) std::fputs("\r\033[K", stderr);
  std::size_t tokens = 0;
  for (const auto& s : corpus) tokens += s.tokens.size();
  std::printf("text: %zu sequences, %zu tokens generated in %.1f s; %zu training positions, %zu "
              "held out\n",
              corpus.size(), tokens, gen_seconds, report.train_positions,
              report.held_out_positions);
  std::printf("training: %zu steps in %.1f s, loss %.4f\n", report.steps, report.seconds,
              report.last_loss);
  const char* what = o.train.kind == l2::heads_kind::medusa ? "head" : "depth";
  for (std::size_t k = 0; k < report.top1.size(); ++k)
    std::printf("%s %zu: top-1 %.3f, top-5 %.3f (held out)\n", what, k + 1, report.top1[k],
                report.top5[k]);
  if (report.greedy_chains)
    std::printf("greedy chains of %zu: %.3f drafts accepted per chain (%zu held-out positions of "
                "greedy text)\n",
                report.top1.size(), report.greedy_accepted, report.greedy_chains);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"Trains draft heads (Medusa or EAGLE-style) for a llama2.c checkpoint on text it "
               "generates itself; writes a heads file for specdec-generate --draft heads:FILE"};
  app.add_option("-m,--model", o.model, "the checkpoint (default: aidreams260K.bin)");
  app.add_option("--tokenizer", o.tokenizer, "its tokenizer (checked against the vocabulary)");
  app.add_option("-o,--out", o.out, "the heads file to write (required)");
  app.add_option("--kind", o.kind,
                 "medusa, eagle (the MLP), or eagle-attn (the MLP and one attention layer) "
                 "(default medusa)")
      ->check(CLI::IsMember({"medusa", "eagle", "eagle-attn"}));
  app.add_option("--seconds", o.train.seconds, "cap on the training time (default 540)")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.train.steps, "Adam steps (default 10000): with the seed, this "
                                           "decides the result when --seconds does not cut it")
      ->check(CLI::PositiveNumber);
  app.add_option("--heads", o.train.heads, "medusa heads (default 4, at most 16)")
      ->check(CLI::Range(1, 16));
  app.add_option("--classifier", o.classifier,
                 "medusa: own (each head its own, from the model's) or shared (default own)")
      ->check(CLI::IsMember({"own", "shared"}));
  app.add_option("--inner", o.train.inner, "eagle: the MLP's width (default 1024)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--regression", o.train.regression,
                 "eagle: weight of the hidden-state error (default 0.1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--distill", o.train.distill,
                 "eagle: share in [0, 1] of the cross-entropy taken against the target's own "
                 "distribution (at --distill-temp) instead of the sampled token (default 0)")
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--distill-temp", o.train.distill_temperature,
                 "eagle: the temperature of that distribution and of the heads' (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--noise", o.train.noise, "eagle: uniform noise on the input rows (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--attn-heads", o.attn.heads,
                 "eagle-attn: attention heads (default 4; 0: none, the MLP trained the same way)")
      ->check(CLI::Range(0, 64));
  app.add_option("--attn-width", o.attn.width, "eagle-attn: width of a head (default 16)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("!--no-rope", o.attn.rope, "eagle-attn: no rotary position encoding");
  app.add_option("--sequences", o.corpus.sequences, "generated sequences (default 3000)")
      ->check(CLI::Range(2, 1000000));
  app.add_option("--temperatures", o.corpus.temperatures,
                 "generation temperatures, cycled per sequence (default 0 0.5 1)");
  app.add_option("--lr", o.train.lr, "Adam's learning rate (default 0.002)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.train.batch, "positions per step (default 256)")
      ->check(CLI::Range(1, 65536));
  app.add_option("-s,--seed", o.train.seed, "seed of the text and the training (default 1)");
  app.add_option("-t,--threads", o.threads, "threads of the model (default 1)")
      ->check(CLI::Range(1, 256));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.out.empty()) {
    std::fprintf(stderr, "specdec-train-heads: --out is required\n");
    return 2;
  }
  if (o.kind == "eagle-attn") {
    try {
      l2::train::check_attn_options(o.attn);  // before the corpus is generated
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "specdec-train-heads: --attn-width: %s\n", e.what());
      return 2;
    }
  }
  o.corpus.seed = o.train.seed;
  o.train.kind = o.kind == "medusa" ? l2::heads_kind::medusa : l2::heads_kind::eagle;
  o.train.own_classifier = o.classifier == "own";
  for (float t : o.corpus.temperatures)
    if (!(t >= 0.0f && t <= 100.0f)) {
      std::fprintf(stderr, "specdec-train-heads: --temperatures: %g is not in [0, 100]\n", t);
      return 2;
    }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-train-heads: %s\n", e.what());
  }
  return 1;
}
