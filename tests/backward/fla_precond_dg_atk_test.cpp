// dg_atk of the preconditioned layers (reference/family/atk_backward.hpp): the oracle
// forms it directly, dga_t = D_t · e^{ga_t} A_{t-1}, exactly 0 at token 0 without an
// initial A state; the chunk form forms it as flash-linear-attention's chunk_atk_bwd
// does, as the reverse running sum of the gradients of the cumulative log-gate
// G_s = Σ_{τ≤s} ga_τ, whose rounding leaves a residue at token 0 (on the H200 FLA's
// chunk_precond_* left 2e-9..4e-8 of Σ_s |∂L/∂G_s| there: docs/validating-fla.md,
// "Failures"). On precond_gated_delta_rule's stress.chunk_boundary (T = 65: two chunks,
// no initial state):
//  * in MPFR-256 the chunk form's dg_atk is the oracle's (≤ 1e-60 of its largest value);
//  * the chunk form run in bf16 (fp32 accumulation, real rounding) leaves a residue at
//    token 0; the chunk model passes it, and the sequential model (direct dg_atk,
//    exactly 0 there) fails it at token 0 — the gap the chunk form closes;
//  * the chunk model still fails a residue 2^-10 of Σ_s |∂L/∂G_s|, far beyond fp32
//    rounding, at token 0.
// Σ_s |∂L/∂G_s| is taken from the oracle alone: ∂L/∂G_s = dg_atk_s − dg_atk_{s+1}.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/suite_case.hpp"

namespace ttr::test {
namespace {

struct Case : SuiteCase {
  Case() : SuiteCase("precond_gated_delta_rule", "stress", "chunk_boundary") {}
};

// Σ_s |∂L/∂G_s| of sequence (b = 0, h = 0) from the oracle's dg_atk [B, T, H].
double log_gate_terms(const Tensor<double>& dg_atk) {
  const std::int64_t T = dg_atk.dim(1), H = dg_atk.dim(2);
  double s = 0.0;
  for (std::int64_t t = 0; t < T; ++t) {
    const double next = t + 1 < T ? dg_atk.data[static_cast<std::size_t>((t + 1) * H)] : 0.0;
    s += std::fabs(dg_atk.data[static_cast<std::size_t>(t * H)] - next);
  }
  return s;
}

ModelSpec model(Form f) {
  ModelSpec ms;
  ms.direction = Direction::backward;
  ms.dtype = Tier::bf16;
  ms.form = f;
  return ms;
}

// By value: the callers pass the tensors of a temporary report, which is gone by the
// time a returned reference would be read (ASan: heap-use-after-free).
TensorVerdict verdict_of(const std::vector<TensorVerdict>& v, const std::string& name) {
  for (const TensorVerdict& t : v)
    if (t.name == name) return t;
  throw std::logic_error("no verdict for " + name);
}

TEST(FlaPrecondDgAtk, MpfrChunkFormIsTheOracle) {
  const Case k;
  ASSERT_EQ(k.c.name, "chunk_boundary");
  const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 3);
  ASSERT_FALSE(in.count("initial_A_state"));
  const Arith mp{Tier::mpfr, 256};
  const Tensor<double> want = k.backward(Form::sequential, mp, in).at("dg_atk");
  const Tensor<double> got = k.backward(Form::chunk, mp, in).at("dg_atk");
  double scale = 0.0;
  for (double x : want.data) scale = std::max(scale, std::fabs(x));
  ASSERT_GT(scale, 0.0);
  for (std::int64_t h = 0; h < want.dim(2); ++h) EXPECT_EQ(want.data[static_cast<std::size_t>(h)], 0.0) << "head " << h;
  for (std::size_t i = 0; i < want.data.size(); ++i) ASSERT_NEAR(got.data[i], want.data[i], 1e-60 * scale) << i;
}

TEST(FlaPrecondDgAtk, Fp32ResidueAtTokenZeroPassesTheChunkModelNotTheSequentialOne) {
  const Case k;
  int residues = 0, failed_by_sequential = 0;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, seed);
    const TensorMap<double> exact = k.backward(Form::sequential, Arith{Tier::mpfr, 256}, in);
    const TensorMap<double> cand = k.backward(Form::chunk, Arith{Tier::bf16, 0}, in);
    const double terms = log_gate_terms(exact.at("dg_atk"));
    const double residue = std::fabs(cand.at("dg_atk").data[0]);
    ASSERT_GT(terms, 0.0);
    residues += residue > 0.0;
    // Recursive summation of 65 fp32 terms, each itself rounded: |residue| ≤ γ_65 Σ|terms|
    // ≈ 65 u Σ|terms| (Higham, Accuracy and Stability, §4.2) if the terms were exact; 2^-14
    // leaves 4× for the rounding of the terms and of D_s, A_s they are made of.
    EXPECT_LT(residue, 0x1p-14 * terms) << "seed " << seed;
    std::printf("seed %llu: dg_atk_0 residue %.3g = %.3g of sum |dL/dG_s| %.3g\n",
                static_cast<unsigned long long>(seed), residue, residue / terms, terms);
    Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
    for (const TensorVerdict& t : judge(cand, model(Form::chunk)).tensors)
      EXPECT_TRUE(t.pass) << "seed " << seed << ": " << t.name << " ratio " << t.max_ratio << " under the chunk model";
    if (residue > 0.0) {
      const TensorVerdict v = verdict_of(judge(cand, model(Form::sequential)).tensors, "dg_atk");
      if (!v.pass) {
        ++failed_by_sequential;
        EXPECT_EQ(v.worst.t, 0) << "seed " << seed;
      }
    }
  }
  EXPECT_GE(residues, 3) << "the reverse sum in fp32 should leave a residue at token 0 on most seeds";
  EXPECT_EQ(failed_by_sequential, residues) << "the direct form's model is exactly 0 at token 0";
}

TEST(FlaPrecondDgAtk, ChunkModelFailsAResidueBeyondFp32) {
  const Case k;
  const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 7);
  TensorMap<double> bad = k.backward(Form::sequential, Arith{Tier::mpfr, 256}, in);
  const double terms = log_gate_terms(bad.at("dg_atk"));
  for (std::int64_t h = 0; h < bad.at("dg_atk").dim(2); ++h)
    bad.at("dg_atk").data[static_cast<std::size_t>(h)] = 0x1p-10 * terms;
  Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
  const TensorVerdict v = verdict_of(judge(bad, model(Form::chunk)).tensors, "dg_atk");
  EXPECT_FALSE(v.pass) << "ratio " << v.max_ratio;
  EXPECT_EQ(v.worst.t, 0);
}

}  // namespace
}  // namespace ttr::test
