// The backward form `chunk_tf32_intra` of kda (oracles/layers/delta_tf32_intra_form.hpp;
// reference/family/delta_chunk_backward.hpp, sub_chunk_products_backward_tf32): the chunk
// backward with the intra-chunk products across 16-token sub-chunks formed as
// flash-linear-attention's chunk_kda_bwd_intra forms them — each side of the identity
// dg = q ⊙ dq − k ⊙ dk from its own tl.dot on fp32 operands, which Hopper reads as TF32.
// tests/backward/chunk_backward_test.cpp covers every backward form on the tiny suite,
// where T < 16 leaves no pair across sub-chunks; here, on stress.chunk_boundary (T = 65,
// K = V = 8, no initial state: two chunks, five sub-chunks):
//  * in MPFR-256 the form is the exact adjoint (≤ 1e-60 of each tensor's largest value):
//    the sub-chunk reference points e^{b_t − b_n} e^{b_n − b_s} are the pair's decay;
//  * without h0 the exact dg at t = 0 is 0; the form's bf16 tier (TF32 operands, real
//    rounding) leaves a residue there of the size TF32 rounding of the two sides gives,
//    ~2^-11 Σ|terms| (docs/validating-fla.md, "Failures": FLA's own chunk_kda left
//    1e-4..1e-3 of Σ|terms| on the H200); the plain chunk model, whose pair terms cancel
//    exactly, fails that residue at t = 0 and the form's own model passes it;
//  * the form's model still fails a planted error in one dg row and one dq row;
//  * an fp32 kernel whose products are TF32 (the foreign `tf32` policy, FLA's fp32
//    chunk_kda on Hopper) leaves the same residue at t = 0: the form's model under
//    that policy covers it (its sub-chunk operands are TF32 operands there too) and
//    the native fp32 model does not; 64 times the residue fails the tf32 model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/form_adjoint.hpp"
#include "tests/support/suite_case.hpp"

namespace ttr::test {
namespace {

struct Case : SuiteCase {
  Case() : SuiteCase("kda", "stress", "chunk_boundary") {}
};

TEST(FlaKdaTf32Intra, MpfrFormIsTheExactAdjointAcrossSubChunks) {
  const Case k;
  ASSERT_EQ(k.c.name, "chunk_boundary");
  const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 3);
  ASSERT_GT(in.at("q").dim(1), 32) << "the case must have pairs across 16-token sub-chunks";
  expect_exact_adjoint(k, Form::chunk_tf32_intra, in);
}

TEST(FlaKdaTf32Intra, ChunkModelFailsTheTf32ResidueAtTokenZeroItsOwnModelPasses) {
  const Case k;
  int failed_by_chunk = 0;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, seed);
    ASSERT_FALSE(in.count("h0"));
    const TensorMap<double> exact =
        run_layer(k.e, Form::sequential, Arith{Tier::mpfr, 256}, in, k.cfg, 64, Direction::backward).values;
    const TensorMap<double> cand =
        run_layer(k.e, Form::chunk_tf32_intra, Arith{Tier::bf16, 0}, in, k.cfg, 64, Direction::backward).values;
    // Token 0 (batch 0, head 0: the first K values of dg): exact 0, a residue in the
    // candidate of at most a few u_tf32 of Σ_{s in the chunk} |q_s dq_s| + |k_s dk_s|.
    const Tensor<double>& dg = cand.at("dg");
    const std::int64_t K = dg.dim(3);
    double residue = 0.0, terms = 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      EXPECT_EQ(exact.at("dg").data[static_cast<std::size_t>(i)], 0.0) << "exact dg_0 is 0 without h0";
      residue = std::max(residue, std::fabs(dg.data[static_cast<std::size_t>(i)]));
    }
    for (std::int64_t t = 0; t < 64; ++t)
      for (std::int64_t i = 0; i < K; ++i) {
        const std::size_t r = static_cast<std::size_t>(t * K + i);
        terms += std::fabs(in.at("q").data[r] * exact.at("dq").data[r]) +
                 std::fabs(in.at("k").data[r] * exact.at("dk").data[r]);
      }
    EXPECT_GT(residue, 0.0) << "seed " << seed << ": the two sides rounded apart leave a residue";
    EXPECT_LT(residue, 8 * std::ldexp(1.0, -11) * terms) << "seed " << seed << ": a residue beyond TF32's size";
    Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
    ModelSpec ms;
    ms.direction = Direction::backward;
    ms.dtype = Tier::bf16;
    ms.form = Form::chunk_tf32_intra;
    for (const TensorVerdict& t : judge(cand, ms).tensors)
      EXPECT_TRUE(t.pass) << "seed " << seed << ": " << t.name << " ratio " << t.max_ratio << " under its own model";
    ms.form = Form::chunk;
    for (const TensorVerdict& t : judge(cand, ms).tensors)
      if (t.name == "dg" && !t.pass) {
        ++failed_by_chunk;
        EXPECT_EQ(t.worst.t, 0) << "seed " << seed << ": the chunk model's failing dg row is token 0";
      }
  }
  EXPECT_GE(failed_by_chunk, 3) << "the plain chunk model should fail the TF32 residue at t = 0 on most seeds";
}

// A TF32-sized residue at the row where the exact dg is 0, in an otherwise exact fp32
// candidate: the residue is the bf16-tier form's own (TF32 rounding of the two sides,
// real rounding, as above), the rest the MPFR adjoint rounded to double.
TEST(FlaKdaTf32Intra, Tf32PolicyModelsTheResidueOfAnFp32Kernel) {
  const Case k;
  int fp32_failures = 0;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, seed);
    const TensorMap<double> exact =
        run_layer(k.e, Form::sequential, Arith{Tier::mpfr, 256}, in, k.cfg, 64, Direction::backward).values;
    const TensorMap<double> bf16 =
        run_layer(k.e, Form::chunk_tf32_intra, Arith{Tier::bf16, 0}, in, k.cfg, 64, Direction::backward).values;
    const std::int64_t K = exact.at("dg").dim(3);
    auto with_residue = [&](double times) {
      TensorMap<double> cand = exact;
      for (std::int64_t i = 0; i < K; ++i)
        cand.at("dg").data[static_cast<std::size_t>(i)] = times * bf16.at("dg").data[static_cast<std::size_t>(i)];
      return cand;
    };
    double residue = 0.0;
    for (std::int64_t i = 0; i < K; ++i) residue = std::max(residue, std::fabs(bf16.at("dg").data[static_cast<std::size_t>(i)]));
    ASSERT_GT(residue, 0.0);
    Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
    ModelSpec ms;
    ms.direction = Direction::backward;
    ms.dtype = Tier::fp32;
    ms.form = Form::chunk_tf32_intra;
    auto dg_verdict = [&](const TensorMap<double>& cand) {
      for (const TensorVerdict& t : judge(cand, ms).tensors)
        if (t.name == "dg") return t;
      ADD_FAILURE() << "no dg verdict";
      return TensorVerdict{};
    };
    ms.policy = Policy::tf32;
    const TensorVerdict as_tf32 = dg_verdict(with_residue(1.0));
    EXPECT_TRUE(as_tf32.pass) << "ratio " << as_tf32.max_ratio << ": the tf32 model misses TF32 operands";
    const TensorVerdict big = dg_verdict(with_residue(64.0));
    EXPECT_FALSE(big.pass) << "ratio " << big.max_ratio << ": 64 times the residue passed the tf32 model";
    EXPECT_EQ(big.worst.t, 0);
    ms.policy = Policy::native;
    const TensorVerdict as_fp32 = dg_verdict(with_residue(1.0));
    if (!as_fp32.pass) {
      ++fp32_failures;
      EXPECT_EQ(as_fp32.worst.t, 0);
    }
  }
  EXPECT_GE(fp32_failures, 3) << "the native fp32 model should fail a TF32-sized residue on most seeds";
}

TEST(FlaKdaTf32Intra, ItsModelStillFailsPlantedRows) {
  const Case k;
  const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 5);
  const TensorMap<double> good =
      run_layer(k.e, Form::chunk_tf32_intra, Arith{Tier::bf16, 0}, in, k.cfg, 64, Direction::backward).values;
  Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
  ModelSpec ms;
  ms.direction = Direction::backward;
  ms.dtype = Tier::bf16;
  ms.form = Form::chunk_tf32_intra;
  const std::int64_t K = good.at("dg").dim(3);
  for (const char* name : {"dg", "dq"}) {
    TensorMap<double> bad = good;
    // Row t = 40 (the first chunk's third sub-chunk), every channel: × 1.5, and dg, whose
    // row may be near 0, also shifted by 5 % of its largest value.
    const double shift = std::string(name) == "dg" ? 0.05 * largest(good.at(name)) : 0.0;
    for (std::int64_t i = 0; i < K; ++i) {
      double& x = bad.at(name).data[static_cast<std::size_t>(40 * K + i)];
      x = 1.5 * x + shift;
    }
    bool failed = false;
    for (const TensorVerdict& t : judge(bad, ms).tensors)
      if (t.name == name) {
        failed = !t.pass;
        EXPECT_EQ(t.worst.t, 40) << name;
      }
    EXPECT_TRUE(failed) << "a planted error in " << name << " row 40 passed the form's model";
  }
}

}  // namespace
}  // namespace ttr::test
