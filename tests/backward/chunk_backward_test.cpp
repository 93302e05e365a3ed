// The chunkwise and scan backward forms (TTR_FORM(<layer>, chunk|scan, backward) in
// layers.def; the delta family's chunk backward is reference/family/delta_chunk_backward.hpp,
// the gated linear layers' reference/family/gated_linear_{chunk,scan}_backward.hpp,
// kla_kalman's chunk and scan backward reference/kla_kalman/scan_backward.hpp, gka's chunk
// backward reference/gka/chunk_backward.hpp; and the gated layers' sequential_dg_sum,
// FLA's fused-recurrent dg, gated_linear_dg_sum.hpp):
//
//  * Backward WY/UT equivalence: in MPFR-256 every chunk and scan backward form equals the
//    exact adjoint (the layer's sequential backward, itself checked against reverse
//    mode and central differences in the other backward tests) to 1e-60, normwise
//    relative per gradient, for chunk sizes 1, 2, 3, 16, 64, T and T+5 with T = 37
//    (a multiple of none of them but T), on the forward test's random and
//    adversarial regimes, with h0, dht and every other cotangent given. Why 1e-60:
//    both sides are exact algorithms at 257 bits; they differ in the order of
//    O(T·C·K) roundings of 2^-257 ≈ 4e-78 each, amplified by at most the condition
//    of these O(1) problems; a wrong mask, a gate sum not reset at a chunk start
//    or a missing WY term shows up at 1e-3 or worse. New backward forms are
//    covered as soon as they appear in layers.def.
//  * Correct kernels pass: the bf16 and fp32 policies of every chunk backward
//    form, judged against the MPFR oracle under the gradient error model of that
//    form (gate/error_model.hpp, direction backward), pass on the tiny suite, and
//    the same judge fails a planted error in one dk, dq and (gated layers) dg row
//    and locates it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

using LayerForm = std::pair<std::string, std::string>;

class ChunkBackwardEquivalence : public ::testing::TestWithParam<LayerForm> {};

TEST_P(ChunkBackwardEquivalence, EqualsTheExactAdjointInMpfr256) {
  const auto& [layer, form] = GetParam();
  const LayerSpec& spec = find_layer(layer).spec;
  const std::int64_t T = 37;
  const Dims dims{{"B", 1}, {"T", T}, {"H", 2}, {"K", 4}, {"V", 3}, {"N", 4}, {"D", 3}};  // N, D: kla_kalman
  std::uint64_t seed = 23;
  for (const auto& r : equivalence_regimes(spec)) {
    const VectorCase c{r.name, "", dims, r.regime, {}};
    const TensorMap<double> in = generate_backward_inputs(spec, c, seed++);
    const Config cfg = Config::make(spec, {});
    const TensorMap<mp> want = mpfr_form(layer, "sequential", in, cfg, 256, 64, Direction::backward);
    ASSERT_FALSE(want.empty());
    for (int C : {1, 2, 3, 16, 64, int(T), int(T) + 5}) {
      const std::string what = layer + " " + form + " backward C=" + std::to_string(C) + " " + r.name;
      const TensorMap<mp> got = mpfr_form(layer, form, in, cfg, 256, C, Direction::backward);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (const auto& [name, w] : want) {
        ASSERT_TRUE(got.count(name)) << what << ": missing gradient " << name;
        const double e = rel_err(got.at(name), w);
        EXPECT_LT(e, 1e-60) << what << ": " << name << " relative error " << e;
      }
    }
  }
}

std::string form_name_of(const ::testing::TestParamInfo<LayerForm>& info) {
  return info.param.first + "_" + info.param.second;
}

INSTANTIATE_TEST_SUITE_P(AllBackwardForms, ChunkBackwardEquivalence,
                         ::testing::ValuesIn(mpfr_parallel_forms(Direction::backward)), form_name_of);

// Every delta-family layer has its chunk backward, every gated linear layer and
// kla_kalman its chunk and scan backward, gka its chunk backward: a layer that loses
// one fails here.
TEST(ChunkBackwardEquivalence, CoversTheDeltaFamilyGatedLinearAttentionKlaAndGka) {
  const auto& forms = mpfr_parallel_forms(Direction::backward);
  const auto has = [&](const std::string& layer, const char* form) {
    return std::find(forms.begin(), forms.end(), LayerForm{layer, form}) != forms.end();
  };
  int gated_linear = 0;
  for (const LayerEntry& e : registry()) {
    if (e.spec.family == "delta") {
      EXPECT_TRUE(has(e.spec.name, "chunk")) << e.spec.name;
    }
    if (e.spec.family == "gated_linear") {
      ++gated_linear;
      EXPECT_TRUE(has(e.spec.name, "chunk")) << e.spec.name;
      EXPECT_TRUE(has(e.spec.name, "scan")) << e.spec.name;
    }
  }
  EXPECT_EQ(gated_linear, 3);  // linear_attn, simple_gla, gla
  EXPECT_TRUE(has("kla_kalman", "chunk"));
  EXPECT_TRUE(has("kla_kalman", "scan"));
  EXPECT_TRUE(has("gka", "chunk"));
}

// Multiplies row (b, t, h) = (0, t, 0) of a [B,T,H,F] or [B,T,H] gradient by `factor`
// and adds `shift` (an error of known place and size).
void plant_row_error(Tensor<double>& x, std::int64_t t, double factor, double shift) {
  const std::int64_t H = x.dim(2), F = x.shape.size() > 3 ? x.dim(3) : 1;
  for (std::int64_t i = 0; i < F; ++i) {
    double& e = x.data[static_cast<std::size_t>((t * H) * F + i)];
    e = e * factor + shift;
  }
}

// The bf16 and fp32 chunk backward forms are correct kernels of their arithmetic:
// judged under their own gradient error model against the MPFR oracle, every
// gradient row's ratio stays under the threshold on the tiny suite (the
// calibration over many seeds is the slow test's business).
TEST(ChunkBackward, CorrectBf16AndFp32KernelsPassTheirModel) {
  int judged = 0, planted_checks = 0, expected = 0;
  for (const auto& [layer, form] : mpfr_parallel_forms(Direction::backward)) {
    const LayerEntry& e = find_layer(layer);
    expected += 2 * static_cast<int>(suite_cases(e.spec, "tiny").size());
    for (const VectorCase& c : suite_cases(e.spec, "tiny")) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, 5);
      const Config cfg = Config::make(e.spec, c.config);
      Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
      for (Tier dtype : {Tier::bf16, Tier::fp32}) {
        ModelSpec ms;
        ms.form = parse_form(form);
        ms.direction = Direction::backward;
        ms.dtype = dtype;
        ms.chunk_size = 4;  // T = 7 and 5: two chunks, the last one partial
        const TensorMap<double> cand =
            run_layer(e, ms.form, Arith{dtype, 0}, in, cfg, ms.chunk_size, Direction::backward).values;
        const CheckResult r = judge(cand, ms);
        double worst = 0.0;
        for (const TensorVerdict& t : r.tensors) {
          EXPECT_TRUE(t.pass) << layer << " " << form << " backward " << tier_name(dtype) << " " << c.name << ": "
                              << t.name << " ratio " << t.max_ratio;
          worst = std::max(worst, t.max_ratio);
        }
        EXPECT_GT(worst, 0.0) << layer << " " << tier_name(dtype) << " " << c.name << ": a rounding kernel cannot be exact";
        ++judged;
        // The same judge fails a planted error and locates it: one token's dk row and
        // dq row doubled; one token's dg row moved by the largest |dg| of the tensor
        // plus 1 (the first token's dg is 0 without h0, so doubling could leave it).
        const auto planted = [&](const char* name, std::int64_t t, double factor, double shift) {
          if (!cand.count(name)) return;
          TensorMap<double> bad = cand;
          plant_row_error(bad.at(name), t, factor, shift);
          const CheckResult f = judge(bad, ms);
          EXPECT_FALSE(f.pass) << layer << " " << form << " " << tier_name(dtype) << " " << c.name << ": planted "
                               << name << " row passed";
          for (const TensorVerdict& t_ : f.tensors)
            if (t_.name == name) {
              EXPECT_FALSE(t_.pass) << layer << " " << form << ": " << name;
              EXPECT_EQ(t_.worst.t, t) << layer << " " << form << ": the worst " << name << " row is the planted one";
              EXPECT_EQ(t_.worst.b, 0) << layer << " " << form << ": " << name;
              EXPECT_EQ(t_.worst.h, 0) << layer << " " << form << ": " << name;
            }
          ++planted_checks;
        };
        planted("dk", 1, 2.0, 0.0);
        planted("dq", 2, 2.0, 0.0);
        if (cand.count("dg")) {
          double top = 0.0;
          for (double x : cand.at("dg").data) top = std::max(top, std::fabs(x));
          planted("dg", 3, 1.0, top + 1.0);
        }
      }
    }
  }
  // 6 delta-family chunk forms + 3 gated linear layers x {chunk, scan} + kla_kalman {chunk, scan}
  // + gla, simple_gla sequential_dg_sum (FLA's fused-recurrent dg) + gka chunk
  // + kda, precond_kda, gated_delta_rule, precond_gated_delta_rule chunk_tf32_intra (FLA's
  // intra-chunk products on TF32 operands), x 2 tiny cases x {bf16, fp32}
  EXPECT_EQ(static_cast<int>(mpfr_parallel_forms(Direction::backward).size()), 6 + 3 * 2 + 2 + 2 + 1 + 4);
  EXPECT_EQ(judged, expected);
  EXPECT_GE(planted_checks, 2 * judged);
}

// The gate term db_last += e^{b_last} Σ dS_end ⊙ S_0 reads S_0 as stored, narrowed
// (FLA stores h per chunk in k.dtype and forms the term from it; the GPU kernel stores
// one copy): a hand-derived case where only that rounding differs. q = k = 0 and
// g = 0: the state never moves from h0, no output depends on it, dS = dht throughout,
// and every token's dg is Σ_ij dht_ij S_0,ij (each chunk's db_last, summed backwards
// over the chunk by the reverse cumulative sum: one term per chunk at its last token,
// which every earlier token of the chunk also collects). h0 = 1 + 2^-10 everywhere
// (fp32, as FLA takes it), dht = 1: bf16 rounds h0 to 1, so the bf16 tier's dg is
// exactly K·V, the fp32 tier's exactly K·V·(1 + 2^-10) (every sum exact in fp32).
TEST(ChunkBackward, GateTermReadsTheStoredNarrowedState) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const VectorCase c = suite_cases(e.spec, "tiny").front();
  TensorMap<double> in = generate_backward_inputs(e.spec, c, 5);
  for (const char* name : {"q", "k", "g"}) {
    ASSERT_TRUE(in.count(name)) << name;
    std::fill(in.at(name).data.begin(), in.at(name).data.end(), 0.0);
  }
  const Shape hs = {in.at("q").dim(0), in.at("q").dim(2), in.at("q").dim(3), in.at("v").dim(3)};
  const double h0 = 1.0 + std::ldexp(1.0, -10);
  in["h0"] = Tensor<double>(hs, h0);
  in["dht"] = Tensor<double>(hs, 1.0);
  const Config cfg = Config::make(e.spec, c.config);
  const double KV = static_cast<double>(hs[2] * hs[3]);
  for (const auto& [dtype, want] : {std::pair{Tier::bf16, KV}, std::pair{Tier::fp32, KV * h0}})
    for (int C : {4, 64}) {
      const TensorMap<double> got = run_layer(e, Form::chunk, Arith{dtype, 0}, in, cfg, C, Direction::backward).values;
      ASSERT_TRUE(got.count("dg"));
      for (std::size_t i = 0; i < got.at("dg").data.size(); ++i)
        ASSERT_EQ(got.at("dg").data[i], want) << tier_name(dtype) << " C=" << C << " dg[" << i << "]";
    }
}

}  // namespace
}  // namespace ttr::test
