// A report of a varlen check names the sequence of its worst row and the token's
// index in it (gate/judge.cpp locate_sequences, docs/reports.md): a planted error
// at a known packed token is reported at the (sequence, token) computed by hand
// from the offsets; a state row names its sequence; the JSON carries both fields,
// and fixed-length inputs get none.
#include <gtest/gtest.h>

#include "gate/judge.hpp"
#include "gate/report.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr::test {
namespace {

// Offsets {0, 16, 16, 40, 77}: sequence 1 is empty, so packed token 16 belongs to
// sequence 2 (token 0) and token 57 to sequence 3 (token 17).
VectorCase location_case(bool varlen) {
  Regime r;
  r.optional_inputs = true;
  if (varlen) r.cu_seqlens = {0, 16, 16, 40, 77};
  const std::int64_t B = varlen ? 1 : 2;
  return {"varlen_location", "", {{"B", B}, {"T", 77}, {"H", 2}, {"K", 4}, {"V", 4}, {"N", 4}, {"D", 4}}, r, {}};
}

// The kernel under test: linear attention's chunk form in fp32, C = 16 (4 model runs:
// the planted errors are far beyond any model).
ModelSpec chunk_fp32() {
  ModelSpec ms;
  ms.form = Form::chunk;
  ms.dtype = Tier::fp32;
  ms.chunk_size = 16;
  ms.samples = 4;
  return ms;
}

struct Planted {
  std::int64_t t, h, sequence, token;
};

TEST(VarlenLocation, ReportNamesTheSequenceAndTokenOfTheWorstRow) {
  const LayerEntry& e = find_layer("linear_attn");
  const Config cfg = Config::make(e.spec, {});
  const TensorMap<double> in = generate_inputs(e.spec, location_case(true), 3);
  Judge judge(e, in, cfg, {Tier::mpfr, 128});
  const ModelSpec ms = chunk_fp32();
  for (const Planted p : {Planted{16, 1, 2, 0}, Planted{57, 0, 3, 17}, Planted{0, 1, 0, 0}, Planted{15, 0, 0, 15}}) {
    TensorMap<double> cand = judge.oracle();
    Tensor<double>& o = cand.at("o");
    const std::int64_t H = o.shape[2], V = o.shape[3];
    o.data[static_cast<std::size_t>((p.t * H + p.h) * V)] += 1.0;  // o[0, t, h, 0]: far beyond any model
    Tensor<double>& ht = cand.at("ht");                                // [N = 4, H, K, V]: sequence 3, head 1
    ht.data[static_cast<std::size_t>(((3 * H + 1) * ht.shape[2]) * ht.shape[3])] += 1.0;
    const CheckResult r = judge(cand, ms);
    for (const TensorVerdict& v : r.tensors) {
      SCOPED_TRACE(v.name + " planted at t " + std::to_string(p.t));
      EXPECT_FALSE(v.pass);
      if (v.name == "o") {
        EXPECT_EQ(v.worst.t, p.t);
        EXPECT_EQ(v.worst.h, p.h);
        EXPECT_EQ(v.worst.sequence, p.sequence);
        EXPECT_EQ(v.worst.token, p.token);
      } else if (v.name == "ht") {
        EXPECT_EQ(v.worst.t, -1);
        EXPECT_EQ(v.worst.b, 3);
        EXPECT_EQ(v.worst.sequence, 3);
        EXPECT_EQ(v.worst.token, -1);
      }
    }
    const nlohmann::json j = check_json("x/chunk/fp32/varlen_location", r);
    for (const auto& t : j.at("tensors")) {
      if (t.at("name") == "o") {
        EXPECT_EQ(t.at("worst").at("sequence"), p.sequence);
        EXPECT_EQ(t.at("worst").at("token"), p.token);
      } else if (t.at("name") == "ht") {
        EXPECT_EQ(t.at("worst").at("sequence"), 3);
        EXPECT_TRUE(t.at("worst").at("token").is_null());
      }
    }
  }
}

TEST(VarlenLocation, FixedLengthReportsHaveNoSequence) {
  const LayerEntry& e = find_layer("linear_attn");
  const Config cfg = Config::make(e.spec, {});
  const TensorMap<double> in = generate_inputs(e.spec, location_case(false), 3);
  Judge judge(e, in, cfg, {Tier::mpfr, 128});
  const ModelSpec ms = chunk_fp32();
  TensorMap<double> cand = judge.oracle();
  cand.at("o").data[5] += 1.0;
  const CheckResult r = judge(cand, ms);
  for (const TensorVerdict& v : r.tensors) EXPECT_EQ(v.worst.sequence, -1) << v.name;
  const auto report = check_json("x/chunk/fp32/fixed", r);  // named: a range-for over a temporary's member dangles
  for (const auto& t : report.at("tensors")) EXPECT_FALSE(t.at("worst").contains("sequence")) << t.at("name");
}

}  // namespace
}  // namespace ttr::test
