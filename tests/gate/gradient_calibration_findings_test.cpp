// The gradient calibration's two failures of correct CPU backward forms
// (bench/gradient-calibration, seeds from 1000; docs/error-model-gradients.md),
// each a gap of the error model, not of the form:
//
//  * simple_gla/chunk/fp32/edges seed 1117: dk 13.2, dq 12.6 at (b=0, t=73, h=1).
//    Token 73 has g = −69, so dq_73 = scale·(do_73·v_73)·k_73 and dk_73 =
//    scale·(do_73·v_73)·q_73: one dot product of 16 products of bf16 numbers,
//    cancelling 98-fold (Σ|do_j v_j| = 6.86, Σ = −0.0698). Every partial sum in the
//    model's (sequential) order is representable in fp32, so the model, which left
//    representable results alone, perturbed none of them; the kernel's float
//    product (Eigen's order) rounds one partial sum, 28.7u relative to the result,
//    as a correct fp32 kernel with another summation order does. Fix: a sum of
//    nonzero terms is perturbed wherever it is representable (reference/core/mca.hpp).
//  * gated_delta_rule/chunk/fp32/near_duplicate_keys seed 1112: dg 9.22 at
//    (0, 75, 1), a scalar row. Its model rms from 8 runs was 3.8× below the
//    rms of 64 runs (3.6e-7 against 1.4e-6; the runs' deviations are Gaussian,
//    kurtosis 3.0): with 32 runs the ratio is 2.57, with 128 runs 2.40. Fix: a check
//    that fails on its ratios within 16× the threshold is judged again with 64 runs
//    (gate/judge.cpp). (Since the sums draw too, its first 8 runs are other runs
//    and give 2.36 on their own.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gate/gate.hpp"
#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/matrix.hpp"
#include "reference/core/mca.hpp"

namespace ttr::test {
namespace {

struct Finding {
  const char* layer;
  const char* gate_case;
  std::uint64_t seed;
};
constexpr Finding kSimpleGlaEdges{"simple_gla", "edges", 1117};
constexpr Finding kGdnNearDuplicateKeys{"gated_delta_rule", "near_duplicate_keys", 1112};

GateCase case_named(const std::string& name) {
  for (const GateCase& c : gate_cases("default"))
    if (c.name == name) return c;
  throw std::runtime_error("no gate case " + name);
}

// A finding's check as the gate sets it up: its backward inputs, the judge (oracle
// MPFR-128), the correct fp32 chunk backward's gradients, and the kernel's model.
struct FindingCheck {
  const LayerEntry& entry;
  GateCase gate_case;
  VectorCase vector_case;
  TensorMap<double> inputs;
  Config cfg;
  Judge judge;
  TensorMap<double> candidate;

  explicit FindingCheck(const Finding& f)
      : entry(find_layer(f.layer)),
        gate_case(case_named(f.gate_case)),
        vector_case(gate_vector_case(entry.spec, gate_case)),
        inputs(generate_backward_inputs(entry.spec, vector_case, f.seed)),
        cfg(Config::make(entry.spec, vector_case.config)),
        judge(entry, inputs, cfg, Arith{Tier::mpfr, 128}, Direction::backward),
        candidate(run_layer(entry, Form::chunk, {Tier::fp32, 0}, inputs, cfg, gate_case.chunk_size,
                            Direction::backward)
                      .values) {}

  ModelSpec model(std::uint64_t seed, int samples = ModelSpec{}.samples) const {
    ModelSpec ms;
    ms.form = Form::chunk;
    ms.direction = Direction::backward;
    ms.dtype = Tier::fp32;
    ms.chunk_size = gate_case.chunk_size;
    ms.seed = seed;
    ms.samples = samples;
    return ms;
  }
};

// The sum is perturbed where the model's order happens to make it exact.
TEST(McaSums, SumOfNonzeroTermsIsPerturbedEvenWhereRepresentable) {
  const double u = 0x1p-24;
  mca_seed(5, u, McaFormat::fp32, 0.0, McaFormat::any);
  int moved = 0;
  for (int i = 1; i <= 200; ++i) {
    const double a = 0.5 + i * 0x1p-10, b = 0.25;  // a + b is an fp32 number
    const double s = (McaReal(a) + McaReal(b)).value();
    EXPECT_LE(std::fabs(s / (a + b) - 1.0), u);
    moved += s != a + b;
    EXPECT_EQ((McaReal(a) + McaReal(0.0)).value(), a);  // x + 0 is exact in any order
    EXPECT_EQ((McaReal(a) - McaReal(0.0)).value(), a);
    EXPECT_EQ((McaReal(a) - McaReal(a)).value(), 0.0);
  }
  EXPECT_GT(moved, 190);
  EXPECT_EQ((McaReal(1.5) * McaReal(2.0)).value(), 3.0);  // a product's exactness does not depend on order
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// The finding's dot product: do_73·v_73 of head 1 in the simple_gla edges case,
// seed 1117. (1) Its sequential fp32 sum is exact at every partial sum, (2) the
// kernel's product (Eigen's order, as a vectorised or tensor-core reduction adds) rounds, and
// (3) the model's spread of the sequential sum is the first-order one, u/√3 ·
// (Σ_{i≥2} s_i²)^½ over the partial sums s_i (s_1 = 0 + p_1 is exact), not 0.
TEST(McaSums, FindingsDotProductIsModelledWhateverTheOrder) {
  const LayerEntry& e = find_layer(kSimpleGlaEdges.layer);
  const GateCase gc = case_named(kSimpleGlaEdges.gate_case);
  const TensorMap<double> in = generate_backward_inputs(e.spec, gate_vector_case(e.spec, gc), kSimpleGlaEdges.seed);
  const Tensor<double>& dO = in.at("do");
  const Tensor<double>& v = in.at("v");
  const std::int64_t H = v.dim(2), F = v.dim(3), t = 73, h = 1;
  std::vector<double> p(F);
  for (std::int64_t j = 0; j < F; ++j) p[j] = dO.data[(t * H + h) * F + j] * v.data[(t * H + h) * F + j];
  double exact = 0, abs_sum = 0, sum_sq_partials = 0;
  float sequential = 0;
  for (std::int64_t j = 0; j < F; ++j) {
    exact += p[j];  // exact in double: 16 products of 8-bit significands
    abs_sum += std::fabs(p[j]);
    if (j > 0) sum_sq_partials += exact * exact;
    sequential += static_cast<float>(p[j]);
    EXPECT_EQ(static_cast<double>(sequential), exact) << "partial sum " << j;
  }
  EXPECT_GT(abs_sum / std::fabs(exact), 50.0);  // the row is cancellation-dominated
  // The kernel's own product: dO Vᵀ of the chunk (tokens 64..76, head 1) in float,
  // as the fp32 chunk backward forms it (chunk_gemm_nt → Eigen); element (9, 9) is
  // do_73·v_73, summed in Eigen's order.
  const int c = 13;
  Matrix<float> dOc, Vc, dP;
  dOc.assign(c, static_cast<int>(F), 0.f);
  Vc.assign(c, static_cast<int>(F), 0.f);
  for (int r = 0; r < c; ++r)
    for (std::int64_t j = 0; j < F; ++j) {
      dOc(r, static_cast<int>(j)) = static_cast<float>(dO.data[((64 + r) * H + h) * F + j]);
      Vc(r, static_cast<int>(j)) = static_cast<float>(v.data[((64 + r) * H + h) * F + j]);
    }
  gemm_nt(dOc, Vc, dP);
  const double kernel_error = std::fabs(static_cast<double>(dP(9, 9)) - exact);
  const double u = 0x1p-24;
  EXPECT_GT(kernel_error, 10 * u * std::fabs(exact));  // measured: 28.7u relative
  EXPECT_LE(kernel_error, u * abs_sum);
  double sumsq = 0;
  const int runs = 4000;
  for (int r = 0; r < runs; ++r) {
    mca_seed(100 + r, u, McaFormat::fp32, 0.0, McaFormat::any);
    McaReal acc(0.0);
    for (double x : p) mul_add_to(acc, McaReal(x), McaReal(1.0));
    sumsq += std::pow(acc.value() - exact, 2);
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
  const double rms = std::sqrt(sumsq / runs), first_order = u / std::sqrt(3.0) * std::sqrt(sum_sq_partials);
  EXPECT_GT(rms, 0.9 * first_order);
  EXPECT_LT(rms, 1.1 * first_order);
  EXPECT_LE(kernel_error, 8 * rms);  // the kernel's rounding is one the model describes
  std::printf("do·v = %.6g, Σ|terms| = %.4g, kernel's fp32 error %.3g (%.1fu relative), model rms %.3g (first order %.3g)\n",
              exact, abs_sum, kernel_error, kernel_error / std::fabs(exact) / u, rms, first_order);
}

// The two findings, judged as the gate judges them (oracle MPFR-128, the kernel's
// own model, 8 runs, the check's seed): every gradient's ratio ≤ 8 now (13.2 and
// 9.22 before).
TEST(GradientCalibrationFindings, CorrectFp32ChunkBackwardsPass) {
  for (const Finding f : {kSimpleGlaEdges, kGdnNearDuplicateKeys}) {
    FindingCheck fc(f);
    const CheckResult r = fc.judge(fc.candidate, fc.model(f.seed));
    EXPECT_TRUE(r.pass) << f.layer;
    for (const TensorVerdict& t : r.tensors) {
      EXPECT_LE(t.max_ratio, kRatioThreshold) << f.layer << " " << t.name;
      std::printf("%s/%s/%llu %s: %.3g\n", f.layer, f.gate_case, static_cast<unsigned long long>(f.seed),
                  t.name.c_str(), t.max_ratio);
    }
  }
}

// The second mechanism, the re-judging of a failing check with 64 runs. (The
// finding's own 8 runs are other runs under today's model — its 8-run dg ratio
// is 2.32 — so the mechanism is shown with the estimate it protects against.)
// With 2 runs the estimate of a scalar row is a χ²₂ draw, below half of its limit
// with probability ~0.2: among the 154 dg rows of the finding's case the row the
// 2-run model underestimates most has its bound at q ≤ 1/2 of the 64-run one (0.24
// under today's model). An error of m = 10q times its 64-run bound there (≤ 5; the
// finding's was 2.6 of the converged rms) judges at 10 with the 2-run model alone
// and at m ≤ 5 with the 64-run one; the judge, asked for 2 runs, re-judges and
// passes it. The re-judging does not pass a real error: 8.5× the 64-run bound fails
// re-judged (its 2-run ratio, 1/q times higher, is inside the band while q > 1/15),
// and 20× and 1000× fail, re-judged where their 2-run ratio lies inside the band and
// as judged beyond it (under today's model 20× is inside, 1000× beyond).
TEST(GradientCalibrationFindings, FailingCheckIsRejudgedWithMoreRuns) {
  const Finding f = kGdnNearDuplicateKeys;
  FindingCheck fc(f);
  Judge& judge = fc.judge;
  const TensorMap<double>& cand = fc.candidate;
  const ModelSpec two = fc.model(f.seed, 2);
  ModelSpec more = two;
  more.samples = 64;
  const auto dg_ratio = [&](const CheckResult& r) {
    for (const TensorVerdict& t : r.tensors)
      if (t.name == "dg") return t.max_ratio;
    return -1.0;
  };
  ASSERT_TRUE(compare(judge.spec(), judge.oracle(), judge.model(more), cand).pass);
  const Tensor<double>& rms2 = judge.model(two).rms.at("dg");
  const Tensor<double>& rms64 = judge.model(more).rms.at("dg");
  const Tensor<double>& o = judge.oracle().at("dg");
  const auto bound = [&](const Tensor<double>& rms, std::size_t i) { return rms.data[i] + 0x1p-24 * std::fabs(o.data[i]); };
  std::size_t row = 0;
  for (std::size_t i = 1; i < o.data.size(); ++i)
    if (bound(rms2, i) / bound(rms64, i) < bound(rms2, row) / bound(rms64, row)) row = i;
  const double q = bound(rms2, row) / bound(rms64, row), m = 10.0 * q;
  ASSERT_LE(q, 0.5);
  TensorMap<double> plausible = cand;
  plausible.at("dg").data[row] = o.data[row] + m * bound(rms64, row);
  EXPECT_GT(dg_ratio(compare(judge.spec(), judge.oracle(), judge.model(two), plausible)), kRatioThreshold);
  EXPECT_TRUE(compare(judge.spec(), judge.oracle(), judge.model(more), plausible).pass);
  const CheckResult rejudged = judge(plausible, two);
  EXPECT_TRUE(rejudged.pass);
  EXPECT_EQ(rejudged.model_samples, 64);  // the report says the verdict is the 64-run model's
  EXPECT_GE(dg_ratio(rejudged), 0.995 * m);  // the planted row, at m times its 64-run bound
  for (const double k : {8.5, 20.0, 1000.0}) {
    TensorMap<double> bad = cand;
    bad.at("dg").data[row] = o.data[row] + k * bound(rms64, row);
    const CheckResult r = judge(bad, two);
    EXPECT_FALSE(r.pass) << k;
    EXPECT_GT(dg_ratio(r), 0.9 * k) << k;
    // Re-judged where the 2-run ratio lies within the band (16× the threshold),
    // judged as asked beyond it; the report says which.
    const double two_run = dg_ratio(compare(judge.spec(), judge.oracle(), judge.model(two), bad));
    EXPECT_EQ(r.model_samples, two_run <= 16 * kRatioThreshold ? 64 : 2) << k << ": 2-run ratio " << two_run;
    std::printf("%g x the 64-run bound: 2-run ratio %.3g, verdict from %d runs, ratio %.3g\n", k, two_run,
                r.model_samples, dg_ratio(r));
    if (k == 8.5) {
      EXPECT_EQ(r.model_samples, 64);  // within the band: re-judged, and still failing
    }
  }
}

}  // namespace
}  // namespace ttr::test
