// The heads trainer's hand-written gradients (llama2c/training/heads_train.hpp) against central finite
// differences, in double, for Medusa heads (own and shared classifier) and the EAGLE-style
// predictor, with and without its attention layer (eagle_attn_train.hpp); and the heads file
// format's refusals on made-up files (no checkpoint needed).
#include <catch2/catch.hpp>
#include <llama2c/training/eagle_attn_train.hpp>
#include <llama2c/engine/heads_file.hpp>
#include <llama2c/training/heads_train.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

namespace {

namespace tr = specdec::llama2c::train;
using dmat = tr::mat<double>;

dmat random(Eigen::Index r, Eigen::Index c, std::uint64_t seed, double scale = 1.0) {
  specdec::rng g(seed);
  dmat m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = scale * (2.0 * g.uniform_open() - 1.0);
  return m;
}

// Largest |analytic - numeric| / max(1, |numeric|) over every entry of `p`.
double worst(dmat& p, const dmat& analytic, const std::function<double()>& loss) {
  double w = 0.0;
  const double h = 1e-6;
  for (Eigen::Index i = 0; i < p.size(); ++i) {
    const double keep = p.data()[i];
    p.data()[i] = keep + h;
    const double up = loss();
    p.data()[i] = keep - h;
    const double down = loss();
    p.data()[i] = keep;
    const double numeric = (up - down) / (2 * h);
    w = std::max(w, std::abs(analytic.data()[i] - numeric) / std::max(1.0, std::abs(numeric)));
  }
  return w;
}

}  // namespace

TEST_CASE("heads_train: Medusa gradients match finite differences") {
  const Eigen::Index d = 5, v = 7, n = 6;
  const dmat x = random(n, d, 1), shared = random(v, d, 2);
  const std::vector<int> labels{0, 3, -1, 6, 2, 3};
  for (bool own : {true, false}) {
    tr::medusa_params<double> p{random(d, d, 3, 0.5), random(1, d, 4, 0.5),
                                own ? random(v, d, 5) : dmat()};
    tr::medusa_params<double> g{dmat::Zero(d, d), dmat::Zero(1, d),
                                own ? dmat::Zero(v, d) : dmat()};
    tr::medusa_loss<double>(p, x, labels, shared, &g);
    const auto loss = [&] { return tr::medusa_loss<double>(p, x, labels, shared, nullptr); };
    INFO((own ? "own classifier" : "shared classifier"));
    CHECK(worst(p.w, g.w, loss) < 1e-6);
    CHECK(worst(p.b, g.b, loss) < 1e-6);
    if (own) CHECK(worst(p.c, g.c, loss) < 1e-6);
  }
}

TEST_CASE("heads_train: EAGLE-style gradients match finite differences") {
  const Eigen::Index d = 4, v = 6, n = 5, m = 7;
  const dmat f = random(n, d, 11), e = random(n, d, 12), target = random(n, d, 13),
             classifier = random(v, d, 14);
  const std::vector<int> labels{1, 5, 0, 2, 2};
  tr::eagle_params<double> p{random(m, 2 * d, 15, 0.5), random(1, m, 16, 0.5),
                             random(d, m, 17, 0.5), random(1, d, 18, 0.5)};
  tr::eagle_params<double> g{dmat::Zero(m, 2 * d), dmat::Zero(1, m), dmat::Zero(d, m),
                             dmat::Zero(1, d)};
  tr::eagle_loss<double>(p, f, e, target, labels, classifier, 0.3, &g);
  const auto loss = [&] {
    return tr::eagle_loss<double>(p, f, e, target, labels, classifier, 0.3, nullptr);
  };
  CHECK(worst(p.w1, g.w1, loss) < 1e-6);
  CHECK(worst(p.b1, g.b1, loss) < 1e-6);
  CHECK(worst(p.w2, g.w2, loss) < 1e-6);
  CHECK(worst(p.b2, g.b2, loss) < 1e-6);
  SECTION("with distillation (a share of the cross-entropy on the target's distribution)") {
    for (const tr::distill_options<double> distill :
         {tr::distill_options<double>{0.6, 0.8}, tr::distill_options<double>{1.0, 1.3}}) {
      tr::eagle_params<double> gd{dmat::Zero(m, 2 * d), dmat::Zero(1, m), dmat::Zero(d, m),
                                  dmat::Zero(1, d)};
      tr::eagle_loss<double>(p, f, e, target, labels, classifier, 0.3, &gd, distill);
      const auto dloss = [&] {
        return tr::eagle_loss<double>(p, f, e, target, labels, classifier, 0.3, nullptr, distill);
      };
      CHECK(worst(p.w1, gd.w1, dloss) < 1e-6);
      CHECK(worst(p.b1, gd.b1, dloss) < 1e-6);
      CHECK(worst(p.w2, gd.w2, dloss) < 1e-6);
      CHECK(worst(p.b2, gd.b2, dloss) < 1e-6);
    }
  }
}

namespace {
namespace l2 = specdec::llama2c;

l2::heads_record small_medusa() {
  l2::heads_record r;
  r.kind = l2::heads_kind::medusa;
  r.hidden = 3;
  r.vocab = 4;
  r.accuracy = specdec::row_matrix::Constant(2, 2, 0.25f);
  for (int k = 0; k < 2; ++k)
    r.medusa.heads.push_back({specdec::row_matrix::Constant(3, 3, 0.1f * static_cast<float>(k)),
                              specdec::prob_row::Constant(3, 0.5f),
                              specdec::row_matrix::Constant(4, 3, 1.0f)});
  return r;
}

// An EAGLE-style record with an attention layer of 2 heads of width 2 (hidden 3, vocab 4).
l2::heads_record small_eagle_attn() {
  l2::heads_record r;
  r.kind = l2::heads_kind::eagle;
  r.hidden = 3;
  r.vocab = 4;
  r.accuracy = specdec::row_matrix::Constant(1, 3, 0.5f);
  specdec::eagle_weights& e = r.eagle;
  e.w1 = specdec::row_matrix::Constant(5, 6, 0.1f);
  e.b1 = specdec::prob_row::Constant(5, 0.2f);
  e.w2 = specdec::row_matrix::Constant(3, 5, 0.3f);
  e.b2 = specdec::prob_row::Constant(3, 0.4f);
  e.attention.wq = specdec::row_matrix::Constant(4, 6, 0.5f);
  e.attention.wk = specdec::row_matrix::Constant(4, 6, 0.6f);
  e.attention.wv = specdec::row_matrix::Constant(4, 6, 0.7f);
  e.attention.wo = specdec::row_matrix::Constant(3, 4, 0.8f);
  e.attention.heads = 2;
  return r;
}

// The header's u32 field at byte `at` set to `value`.
std::vector<char> with_field(std::vector<char> b, std::size_t at, std::uint32_t value) {
  std::memcpy(b.data() + at, &value, 4);
  return b;
}
}  // namespace

TEST_CASE("heads_file: an attention layer round-trips - version 1 files still load") {
  const auto bytes = l2::heads_bytes(small_eagle_attn());
  const auto back = l2::parse_heads(bytes, "x");
  CHECK(back.eagle.attention.heads == 2);
  CHECK(back.eagle.attention.width() == 2);
  CHECK(back.eagle.attention.rope);
  CHECK(back.eagle.attention.wo(2, 3) == Approx(0.8f));
  CHECK(l2::heads_bytes(back) == bytes);
  // Header: magic 8, then u32 fields from byte 8 (version) to 44 (training tokens), f32 seconds
  // at 48, then version 2's attention heads (52), width (56), rotary (60).
  SECTION("without rotary positions") {
    CHECK_FALSE(l2::parse_heads(with_field(bytes, 60, 0), "x").eagle.attention.rope);
  }
  SECTION("refusals") {
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(bytes, 60, 2), "x"),
                        "heads file 'x': rotary = 2 outside [0, 1]");
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(bytes, 56, 3), "x"),
                        "heads file 'x': attention width = 3 must be even with rotary");
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(bytes, 52, 0), "x"),
                        "heads file 'x': attention width and rotary must be 0 without attention "
                        "heads");
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(bytes, 52, 65), "x"),
                        "heads file 'x': attention heads = 65 outside [0, 64]");
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(bytes, 52, 1), "x"),
                        Catch::Contains("inner 5, attention 1 x 2) need 456 bytes, the file "
                                        "has 624"));
    const auto medusa_bytes = l2::heads_bytes(small_medusa());
    REQUIRE_THROWS_WITH(l2::parse_heads(with_field(with_field(medusa_bytes, 52, 1), 56, 2), "x"),
                        "heads file 'x': attention heads must be 0 for medusa heads");
    auto b = bytes;
    const float nan = std::nanf("");
    std::memcpy(b.data() + b.size() - 4, &nan, 4);
    REQUIRE_THROWS_WITH(l2::parse_heads(b, "x"), "heads file 'x': wo holds NaN or infinity");
  }
  SECTION("a version 1 file (no attention fields) reads as before") {
    auto mlp = small_eagle_attn();
    mlp.eagle.attention = {};
    const auto v2 = l2::heads_bytes(mlp);
    std::vector<char> v1(v2.begin(), v2.begin() + 52);
    v1.insert(v1.end(), v2.begin() + 64, v2.end());
    v1 = with_field(v1, 8, 1);
    const auto r = l2::parse_heads(v1, "x");
    CHECK_FALSE(r.eagle.attention.enabled());
    CHECK(l2::heads_bytes(r) == v2);
  }
}

TEST_CASE("heads_file: round trip and refusals") {
  const auto bytes = l2::heads_bytes(small_medusa());
  const auto back = l2::parse_heads(bytes, "x");
  CHECK(back.medusa.size() == 2);
  CHECK(back.medusa.heads[1].w(0, 0) == Approx(0.1f));
  CHECK(l2::heads_bytes(back) == bytes);
  SECTION("truncated") {
    const std::vector<char> cut(bytes.begin(), bytes.end() - 4);
    REQUIRE_THROWS_WITH(l2::parse_heads(cut, "x"),
                        Catch::Contains("need " + std::to_string(bytes.size()) +
                                        " bytes, the file has " + std::to_string(cut.size()) +
                                        " (truncated)"));
  }
  SECTION("trailing bytes") {
    auto longer = bytes;
    longer.push_back(0);
    REQUIRE_THROWS_WITH(l2::parse_heads(longer, "x"), Catch::Contains("the file has"));
  }
  SECTION("bad magic, version, kind") {
    auto b = bytes;
    b[0] = 'X';
    REQUIRE_THROWS_WITH(l2::parse_heads(b, "x"),
                        "heads file 'x': not a heads file (the magic \"SDHEADS1\" is missing)");
    b = bytes;
    b[8] = 9;
    REQUIRE_THROWS_WITH(l2::parse_heads(b, "x"),
                        "heads file 'x': version 9, this loader reads versions 1 and 2");
    b = bytes;
    b[12] = 3;
    REQUIRE_THROWS_WITH(l2::parse_heads(b, "x"),
                        "heads file 'x': kind 3 is not 1 (medusa) or 2 (eagle)");
  }
  SECTION("an accuracy table that is not one row per head; an empty one") {
    auto r = small_medusa();
    r.accuracy = specdec::row_matrix::Constant(1, 2, 0.5f);
    REQUIRE_THROWS_WITH(l2::parse_heads(l2::heads_bytes(r), "x"),
                        "heads file 'x': accuracy rows = 1 must be 0 or one per head (2)");
    r.accuracy.resize(0, 0);  // found by heads_fuzz: no memcpy of an empty matrix's null data
    CHECK(l2::parse_heads(l2::heads_bytes(r), "x").accuracy.size() == 0);
  }
  SECTION("NaN weight") {
    auto b = bytes;
    const float nan = std::nanf("");
    std::memcpy(b.data() + b.size() - 4, &nan, 4);
    REQUIRE_THROWS_WITH(l2::parse_heads(b, "x"),
                        "heads file 'x': a head's classifier holds NaN or infinity");
  }
  SECTION("another vocabulary or a narrower target") {
    l2::config c{.dim = 3, .hidden_dim = 8, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1,
                 .vocab_size = 5, .seq_len = 8};
    auto r = back;
    REQUIRE_THROWS_WITH(l2::fit_heads(r, c, "x"),
                        "heads file 'x': trained for a vocabulary of 4 tokens, the model has 5");
    c.vocab_size = 4;
    c.dim = 2;
    REQUIRE_THROWS_WITH(l2::fit_heads(r, c, "x"),
                        "heads file 'x': trained for hidden width 3, the model's is 2 (narrower: "
                        "heads are widened, never narrowed)");
  }
}

TEST_CASE("eagle_attn_train: attention predictor gradients match finite differences") {
  const Eigen::Index d = 4, v = 6, n = 7, m = 5;
  const dmat f = random(n, d, 21), e = random(n, d, 22), target = random(n, d, 23),
             classifier = random(v, d, 24);
  // Two sequences: rows 0-3 (row 0 context only) and rows 4-6.
  const std::vector<int> labels{-1, 5, 0, 2, 3, 1, 4};
  const std::vector<tr::segment> segs{{0, 4}, {4, 3}};
  for (bool rope : {true, false}) {
    INFO((rope ? "rotary positions" : "no positions"));
    tr::eagle_attn_params<double> p;
    p.heads = 2;
    p.rope = rope;
    p.mlp = {random(m, 2 * d, 25, 0.5), random(1, m, 26, 0.5), random(d, m, 27, 0.5),
             random(1, d, 28, 0.5)};
    p.wq = random(4, 2 * d, 29);
    p.wk = random(4, 2 * d, 30);
    p.wv = random(4, 2 * d, 31);
    p.wo = random(d, 4, 32, 0.5);
    tr::eagle_attn_params<double> g;
    g.mlp = {dmat::Zero(m, 2 * d), dmat::Zero(1, m), dmat::Zero(d, m), dmat::Zero(1, d)};
    g.wq = g.wk = g.wv = dmat::Zero(4, 2 * d);
    g.wo = dmat::Zero(d, 4);
    tr::eagle_attn_loss<double>(p, f, e, target, labels, segs, classifier, 0.3, &g);
    const auto loss = [&] {
      return tr::eagle_attn_loss<double>(p, f, e, target, labels, segs, classifier, 0.3,
                                         nullptr);
    };
    CHECK(worst(p.mlp.w1, g.mlp.w1, loss) < 1e-6);
    CHECK(worst(p.mlp.b1, g.mlp.b1, loss) < 1e-6);
    CHECK(worst(p.mlp.w2, g.mlp.w2, loss) < 1e-6);
    CHECK(worst(p.mlp.b2, g.mlp.b2, loss) < 1e-6);
    CHECK(worst(p.wq, g.wq, loss) < 1e-6);
    CHECK(worst(p.wk, g.wk, loss) < 1e-6);
    CHECK(worst(p.wv, g.wv, loss) < 1e-6);
    CHECK(worst(p.wo, g.wo, loss) < 1e-6);
    CHECK(g.wq.norm() > 1e-3);  // the attention part is exercised, not zero by construction
    CHECK(g.wk.norm() > 1e-3);

    {  // one step at a time equals the batch forward, and a segment sees no other
      dmat batch;
      tr::eagle_attn_loss<double>(p, f, e, target, labels, segs, classifier, 0.3, nullptr,
                                  &batch);
      for (const auto& sg : segs) {
        dmat keys(static_cast<Eigen::Index>(sg.length), 4), values(keys.rows(), 4);
        for (std::size_t j = 0; j < sg.length; ++j) {
          const auto r = static_cast<Eigen::Index>(sg.begin + j);
          const Eigen::RowVectorXd fr = f.row(r), er = e.row(r);
          const Eigen::RowVectorXd one = tr::eagle_attn_step<double>(p, fr, er, j, keys, values);
          CHECK((one - batch.row(r)).cwiseAbs().maxCoeff() < 1e-12);
        }
      }
    }
  }
}

TEST_CASE("eagle_attn_train: without heads the loss is the MLP's") {
  const Eigen::Index d = 4, v = 6, n = 5, m = 7;
  const dmat f = random(n, d, 41), e = random(n, d, 42), target = random(n, d, 43),
             classifier = random(v, d, 44);
  const std::vector<int> labels{1, 5, 0, 2, 2};
  const std::vector<tr::segment> segs{{0, 2}, {2, 3}};
  tr::eagle_attn_params<double> p;
  p.heads = 0;
  p.mlp = {random(m, 2 * d, 45, 0.5), random(1, m, 46, 0.5), random(d, m, 47, 0.5),
           random(1, d, 48, 0.5)};
  p.wq = p.wk = p.wv = dmat::Zero(0, 2 * d);
  p.wo = dmat::Zero(d, 0);
  tr::eagle_params<double> g{dmat::Zero(m, 2 * d), dmat::Zero(1, m), dmat::Zero(d, m),
                             dmat::Zero(1, d)};
  tr::eagle_attn_params<double> ga = p;
  ga.mlp = g;
  const double with = tr::eagle_attn_loss<double>(p, f, e, target, labels, segs, classifier, 0.3,
                                                  &ga);
  const double without = tr::eagle_loss<double>(p.mlp, f, e, target, labels, classifier, 0.3, &g);
  CHECK(with == Approx(without).epsilon(1e-12));
  CHECK((ga.mlp.w1 - g.w1).cwiseAbs().maxCoeff() < 1e-12);
  CHECK((ga.mlp.w2 - g.w2).cwiseAbs().maxCoeff() < 1e-12);
}
