// The backward form `chunk_tf32_intra` with a scalar gate (precond_gated_delta_rule;
// reference/family/delta_chunk_backward.hpp, scalar_products_backward_tf32): the chunk
// backward with the score pairs formed as flash-linear-attention's chunk_bwd_kernel_dqkwg
// forms them — dS = dP ⊙ e^{b_t − b_s} read once as a TF32 operand, dq = dS k and
// dk = dSᵀ q from two tl.dot on fp32 operands, dg = q · dq − k · dk — so that each side of
// dg's identity rounds on its own. FLA's chunk_precond_gated_delta_rule in fp32 on the
// H200 left −4.3e-4 at token 0 of stress.long, where the exact dg is 0, and the plain
// chunk model failed it as tf32 at 159 (docs/validating-fla/failures.md).
//  * One chunk, directly: in double the form equals masked_decayed_products_backward
//    (which forms each pair's term once); with the operands rounded to TF32 for real
//    (the 16-bit policies' tf32_operand) the gate gradient's sum over the chunk — what
//    dg's reverse sum leaves at the chunk's first row, 0 in exact arithmetic — is a
//    TF32-sized residue, where the shared-term form leaves only fp32's rounding.
//  * On stress.chunk_boundary of gated_delta_rule and precond_gated_delta_rule (T = 65,
//    K = V = 8, no initial state): in MPFR-256 the form
//    is the exact adjoint; a residue at t = 0 of a TF32 pair sum's size passes the form's
//    tf32 model and fails the plain chunk's and the native fp32 model; 64 times it (every
//    pair's rounding aligned) fails the form's tf32 model; a planted error in one dg row
//    and one dq row fails the form's model; its own bf16 tier passes it.
// (tests/backward/fla_kda_tf32_intra_test.cpp is the per-key form's counterpart; there the
// operands carry e^{b} factors and are not bf16 values, so its bf16 tier shows the residue.
// Here the operands are q and k themselves, bf16 values in the bf16 tier, which TF32
// holds exactly: the residue is an fp32 kernel's, planted.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/family/delta_chunk_backward.hpp"
#include "tests/support/form_adjoint.hpp"
#include "tests/support/suite_case.hpp"

namespace ttr::test {
namespace {

// The two scalar-gate layers with the form (FLA's chunk_gated_delta_rule and
// chunk_precond_gated_delta_rule share chunk_bwd_kernel_dqkwg), on stress.chunk_boundary,
// q and k L2-normalised in the kernel (use_qk_l2norm_in_kernel; the preconditioned layer's
// default): the score products' operands are then not TF32 values. (The suite's q and k are
// bf16 values, which TF32 holds exactly: a kernel fed them raw rounds nothing there.)
struct Case : SuiteCase {
  explicit Case(const char* layer) : SuiteCase(layer, "stress", "chunk_boundary") {
    auto sets = c.config;
    sets.emplace_back("use_qk_l2norm_in_kernel", "true");
    cfg = Config::make(e.spec, sets);
  }
};
constexpr const char* kLayers[] = {"gated_delta_rule", "precond_gated_delta_rule"};

TensorVerdict verdict_of(const std::vector<TensorVerdict>& ts, const std::string& name) {
  for (const TensorVerdict& t : ts)
    if (t.name == name) return t;
  ADD_FAILURE() << "no verdict for " << name;
  return TensorVerdict{};
}

TEST(FlaScalarTf32Pairs, MpfrFormIsTheExactAdjoint) {
  for (const char* layer : kLayers) {
    SCOPED_TRACE(layer);
    const Case k(layer);
    const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 3);
    ASSERT_GT(in.at("q").dim(1), 64) << "the case must span two chunks";
    expect_exact_adjoint(k, Form::chunk_tf32_intra, in);
  }
}

// One 64-token chunk, K = 16: fp32 operands with all 24 significand bits in use.
template <class A>
struct OneChunk {
  Matrix<A> X, Y, b, dP, dX, dY, db;
  explicit OneChunk(std::uint32_t seed) {
    const int c = 64, K = 16;
    std::mt19937 rng(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    X.assign(c, K, A(0)), Y.assign(c, K, A(0)), b.assign(c, 1, A(0)), dP.assign(c, c, A(0));
    double cum = 0.0;
    for (int t = 0; t < c; ++t) {
      cum -= 0.02 + 0.01 * std::fabs(n(rng));  // a scalar cumulative log decay
      b(t, 0) = static_cast<A>(static_cast<float>(cum));
      for (int i = 0; i < K; ++i)
        X(t, i) = static_cast<A>(static_cast<float>(n(rng))), Y(t, i) = static_cast<A>(static_cast<float>(n(rng)));
      for (int s = 0; s < c; ++s) dP(t, s) = static_cast<A>(static_cast<float>(n(rng)));
    }
    dX.assign(c, K, A(0)), dY.assign(c, K, A(0)), db.assign(c, 1, A(0));
  }
  double db_sum() const {
    double z = 0.0;
    for (const A& x : db.a) z += static_cast<double>(x);
    return z;
  }
  // Σ over the causal pairs and keys of |dP_ts e^{b_t − b_s} X_ti Y_si|: the terms that cancel.
  double terms() const {
    double z = 0.0;
    for (int t = 0; t < X.rows; ++t)
      for (int s = 0; s <= t; ++s)
        for (int i = 0; i < X.cols; ++i)
          z += std::fabs(double(dP(t, s)) * std::exp(double(b(t, 0)) - double(b(s, 0))) * double(X(t, i)) * double(Y(s, i)));
    return z;
  }
};

TEST(FlaScalarTf32Pairs, TwoSidesRoundApartOnTf32Operands) {
  for (std::uint32_t seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // In double the TF32 operands are the identity: the same gradients as the shared-term form.
    OneChunk<double> form(seed), shared(seed);
    scalar_products_backward_tf32<ExactPolicy<double>>(form.X, form.Y, form.b, form.dP, form.dX, form.dY, form.db);
    masked_decayed_products_backward(Decay::scalar, shared.X, shared.Y, shared.b, false, shared.dP, shared.dX, shared.dY,
                                     shared.db);
    for (const auto& [got, want] : {std::pair{&form.dX, &shared.dX}, {&form.dY, &shared.dY}, {&form.db, &shared.db}})
      for (std::size_t e = 0; e < want->a.size(); ++e)
        ASSERT_NEAR(got->a[e], want->a[e], 1e-12 * (1.0 + std::fabs(want->a[e])));
    EXPECT_LT(std::fabs(shared.db_sum()), 1e-12 * shared.terms()) << "the shared terms cancel in double";
    // In fp32 with the operands read as TF32 (the bf16 policy's tf32_operand rounds for real).
    using P = Mixed16Policy<BF16Format>;
    OneChunk<float> tf(seed), sf(seed);
    scalar_products_backward_tf32<P>(tf.X, tf.Y, tf.b, tf.dP, tf.dX, tf.dY, tf.db);
    masked_decayed_products_backward(Decay::scalar, sf.X, sf.Y, sf.b, false, sf.dP, sf.dX, sf.dY, sf.db);
    const double terms = tf.terms(), u_tf32 = std::ldexp(1.0, -11), u_fp32 = std::ldexp(1.0, -24);
    // Shared terms: only fp32's roundings of the 64 rows' running sums (~2^11 additions
    // each, below 2^-24 of their partial sums): measured 5e-10..1.3e-8 of terms on these
    // seeds, bounded by 2^-22.
    EXPECT_LT(std::fabs(sf.db_sum()), 4 * u_fp32 * terms);
    // Two sides: X rounded to TF32 on one, Y on the other, ~2^15 pair terms each off by up
    // to u_tf32 relative and independently: a random walk of about u_tf32·terms/√(2^15)·0.8
    // ≈ 2^-18.5 of terms (measured 6.9e-7..5.0e-6 = 2^-20.5..2^-17.6), above the shared
    // form's bound and below every pair's rounding aligned (u_tf32·terms).
    EXPECT_GT(std::fabs(tf.db_sum()), 4 * u_fp32 * terms) << "no TF32-sized residue";
    EXPECT_LT(std::fabs(tf.db_sum()), u_tf32 * terms);
  }
}

// A residue at t = 0 (whose exact dg is 0) of the size TF32 pairs leave: the pair sum's
// Σ|terms| is bounded here by S = Σ_{t < 64} Σ_i |q_ti dq_ti| + |k_ti dk_ti| of the raw inputs
// and exact gradients, and ~C(C+1)/2·K = 2^13 pair terms rounded at u_tf32 = 2^-11
// independently add up to about u_tf32·S/√(2^13) ≈ 2^-17.5·S: 2^-17·S is planted, into an
// otherwise exact candidate (an fp32 kernel whose products are TF32). 2^-11·S is every
// pair's rounding aligned, 64 times that.
TEST(FlaScalarTf32Pairs, Tf32ModelCoversAPairResidueAtTokenZero) {
  for (const char* layer : kLayers) {
    SCOPED_TRACE(layer);
    const Case k(layer);
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, seed);
      ASSERT_FALSE(in.count("h0"));
      const TensorMap<double> exact = k.backward(Form::sequential, Arith{Tier::mpfr, 256}, in);
      ASSERT_EQ(exact.at("dg").data[0], 0.0) << "exact dg_0 is 0 without h0";
      const std::int64_t H = in.at("q").dim(2), K = in.at("q").dim(3);
      double S = 0.0;
      for (std::int64_t t = 0; t < 64; ++t)
        for (std::int64_t i = 0; i < K; ++i) {
          const std::size_t r = static_cast<std::size_t>(t * H * K + i);
          S += std::fabs(in.at("q").data[r] * exact.at("dq").data[r]) + std::fabs(in.at("k").data[r] * exact.at("dk").data[r]);
        }
      auto with_residue = [&](double r) {
        TensorMap<double> cand = exact;
        cand.at("dg").data[0] = r;
        return cand;
      };
      Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
      ModelSpec ms;
      ms.direction = Direction::backward;
      ms.dtype = Tier::fp32;
      ms.policy = Policy::tf32;
      ms.form = Form::chunk_tf32_intra;
      const TensorVerdict as_form = verdict_of(judge(with_residue(std::ldexp(S, -17)), ms).tensors, "dg");
      EXPECT_TRUE(as_form.pass) << "ratio " << as_form.max_ratio << ": the form's tf32 model misses the pair residue";
      const TensorVerdict aligned = verdict_of(judge(with_residue(std::ldexp(S, -11)), ms).tensors, "dg");
      EXPECT_FALSE(aligned.pass) << "ratio " << aligned.max_ratio << ": 64 times the residue passed";
      EXPECT_EQ(aligned.worst.t, 0);
      ms.form = Form::chunk;
      const TensorVerdict as_chunk = verdict_of(judge(with_residue(std::ldexp(S, -17)), ms).tensors, "dg");
      EXPECT_FALSE(as_chunk.pass) << "ratio " << as_chunk.max_ratio << ": the shared-term model covered it";
      EXPECT_EQ(as_chunk.worst.t, 0);
      ms.policy = Policy::native;
      ms.form = Form::chunk_tf32_intra;
      const TensorVerdict as_fp32 = verdict_of(judge(with_residue(std::ldexp(S, -17)), ms).tensors, "dg");
      EXPECT_FALSE(as_fp32.pass) << "ratio " << as_fp32.max_ratio << ": the native fp32 model covered a TF32 residue";
      // The form's own bf16 tier passes its bf16 model.
      ms.policy = Policy::native;
      ms.dtype = Tier::bf16;
      for (const TensorVerdict& t : judge(k.backward(Form::chunk_tf32_intra, Arith{Tier::bf16, 0}, in), ms).tensors)
        EXPECT_TRUE(t.pass) << t.name << " ratio " << t.max_ratio << " under its own model";
    }
  }
}

TEST(FlaScalarTf32Pairs, ItsModelStillFailsPlantedRows) {
  for (const char* layer : kLayers) {
    SCOPED_TRACE(layer);
    const Case k(layer);
    const TensorMap<double> in = generate_backward_inputs(k.e.spec, k.c, 5);
    const TensorMap<double> good = k.backward(Form::chunk_tf32_intra, Arith{Tier::bf16, 0}, in);
    Judge judge(k.e, in, k.cfg, Arith{Tier::mpfr, 256}, Direction::backward);
    ModelSpec ms;
    ms.direction = Direction::backward;
    ms.dtype = Tier::bf16;
    ms.form = Form::chunk_tf32_intra;
    for (const char* name : {"dg", "dq"}) {
      TensorMap<double> bad = good;
      // Row t = 40, every channel: × 1.5, and dg, whose row may be near 0, also shifted
      // by 5 % of its largest value.
      const Tensor<double>& g = good.at(name);
      const std::int64_t per_row = static_cast<std::int64_t>(g.data.size()) / g.dim(1);  // B = 1
      const double shift = std::string(name) == "dg" ? 0.05 * largest(g) : 0.0;
      for (std::int64_t i = 0; i < per_row; ++i) {
        double& x = bad.at(name).data[static_cast<std::size_t>(40 * per_row + i)];
        x = 1.5 * x + shift;
      }
      const TensorVerdict t = verdict_of(judge(bad, ms).tensors, name);
      EXPECT_FALSE(t.pass) << "a planted error in " << name << " row 40 passed the form's model";
      EXPECT_EQ(t.worst.t, 40) << name;
    }
  }
}

}  // namespace
}  // namespace ttr::test
