// The backward form `sequential_dg_sum` (reference/family/gated_linear_dg_sum.hpp): the
// sequential adjoint of gla and simple_gla with dg formed by flash-linear-attention's
// reverse running sum, the model of its fused_recurrent_gla/simple_gla backward.
// Its MPFR equivalence to the exact adjoint (≤ 1e-60) and its bf16/fp32 tiers passing
// their own model on the tiny suite are tests/backward/chunk_backward_test.cpp's, which
// cover every backward form of layers.def. Here, the gap the form closes
// (docs/validating-fla.md, "Failures"):
//  * without an initial state the exact dg at t = 0 is 0 (S̄_0 = 0); a correct fp32
//    kernel of the running sum leaves a nonzero residue there, which the direct
//    sequential model (error 0 at that row) fails at t = 0 and the running-sum model
//    passes;
//  * the running sum in exact arithmetic is the identity of the header: at 256 bits
//    it equals dg_t = Σ_j dS ⊙ S̄ summed independently here from the MPFR adjoint's dq,
//    dk and the forward's final state, token by token.
// The replay of FLA's kernel (docs/validating-fla/replay_fused_recurrent_dg.py) is
// tests/cli/fla_dg_replay_test.sh's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr::test {
namespace {

const char* const kGated[] = {"gla", "simple_gla"};

// fp32 tier of sequential_dg_sum on the tiny suite's case without a state, several seeds.
TEST(FlaDgSum, DirectModelFailsTheRunningSumAtTokenZeroItsOwnModelPasses) {
  for (const char* layer : kGated) {
    const LayerEntry& e = find_layer(layer);
    const VectorCase c = suite_cases(e.spec, "tiny").at(0);  // basic: no h0, T = 7
    ASSERT_EQ(c.name, "basic");
    int residues = 0;
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, seed);
      ASSERT_FALSE(in.count("h0"));
      const Config cfg = Config::make(e.spec, c.config);
      const TensorMap<double> exact =
          run_layer(e, Form::sequential, Arith{Tier::mpfr, 256}, in, cfg, 64, Direction::backward).values;
      const TensorMap<double> cand =
          run_layer(e, Form::sequential_dg_sum, Arith{Tier::fp32, 0}, in, cfg, 64, Direction::backward).values;
      const Tensor<double>& dg = cand.at("dg");
      const std::int64_t H = dg.dim(2), F = dg.shape.size() > 3 ? dg.dim(3) : 1;
      bool residue = false;
      for (std::int64_t i = 0; i < H * F; ++i) {  // token 0 of batch 0: the first H·F values
        EXPECT_EQ(exact.at("dg").data[static_cast<std::size_t>(i)], 0.0) << layer << ": exact dg_0 is 0 without h0";
        residue = residue || cand.at("dg").data[static_cast<std::size_t>(i)] != 0.0;
      }
      Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
      ModelSpec ms;
      ms.direction = Direction::backward;
      ms.dtype = Tier::fp32;
      ms.form = Form::sequential_dg_sum;
      const CheckResult own = judge(cand, ms);
      for (const TensorVerdict& t : own.tensors)
        EXPECT_TRUE(t.pass) << layer << " seed " << seed << ": " << t.name << " ratio " << t.max_ratio
                            << " under its own model";
      ms.form = Form::sequential;
      const CheckResult direct = judge(cand, ms);
      for (const TensorVerdict& t : direct.tensors) {
        if (t.name != "dg") {
          EXPECT_TRUE(t.pass) << layer << ": " << t.name << " is the same computation in both forms";
        } else if (residue) {
          ++residues;
          EXPECT_FALSE(t.pass) << layer << " seed " << seed << ": the direct model passed dg (ratio " << t.max_ratio
                               << ")";
          EXPECT_EQ(t.worst.t, 0) << layer << " seed " << seed << ": the failing dg row is token 0";
        }
      }
    }
    EXPECT_GE(residues, 2) << layer << ": an fp32 running sum leaves a residue at t = 0 on most seeds";
  }
}

// The running sum is the adjoint's dg in exact arithmetic: the MPFR-256 sequential_dg_sum
// equals dg recomputed here from the identity dg_t = Σ_v S_T dht + Σ_{s≥t} q_s dq_s − k_s dk_s
// with the MPFR adjoint's dq, dk and the MPFR forward's final state (all as doubles, so
// to double precision, 1e-12 relative to the terms' size), on a case with h0 and dht.
TEST(FlaDgSum, RunningSumIsTheAdjointsDgToDoublePrecision) {
  for (const char* layer : kGated) {
    const LayerEntry& e = find_layer(layer);
    const VectorCase c = suite_cases(e.spec, "tiny").at(1);  // with_state: h0 and dht given
    const TensorMap<double> in = generate_backward_inputs(e.spec, c, 11);
    ASSERT_TRUE(in.count("h0") && in.count("dht"));
    const Config cfg = Config::make(e.spec, c.config);
    const Arith mp{Tier::mpfr, 256};
    const TensorMap<double> adj = run_layer(e, Form::sequential, mp, in, cfg, 64, Direction::backward).values;
    const TensorMap<double> sum = run_layer(e, Form::sequential_dg_sum, mp, in, cfg, 64, Direction::backward).values;
    const TensorMap<double> fwd = run_layer(e, Form::sequential, mp, in, cfg).values;
    const Tensor<double>&q = in.at("q"), &k = in.at("k"), &ST = fwd.at("ht"), &dht = in.at("dht");
    const Tensor<double>&dq = adj.at("dq"), &dk = adj.at("dk");
    const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
    const bool per_key = in.at("g").shape.size() == 4;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        std::vector<double> run(K, 0.0);
        double size = 0.0;
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) {
            const double x = ST.data[((b * H + h) * K + i) * V + j] * dht.data[((b * H + h) * K + i) * V + j];
            run[i] += x;
            size += std::fabs(x);
          }
        for (std::int64_t t = T - 1; t >= 0; --t) {
          double scalar = 0.0;
          for (std::int64_t i = 0; i < K; ++i) {
            const std::size_t r = static_cast<std::size_t>(((b * T + t) * H + h) * K + i);
            run[i] += q.data[r] * dq.data[r] - k.data[r] * dk.data[r];
            size += std::fabs(q.data[r] * dq.data[r]) + std::fabs(k.data[r] * dk.data[r]);
            scalar += run[i];
          }
          for (std::int64_t i = 0; i < (per_key ? K : 1); ++i) {
            const std::size_t r = static_cast<std::size_t>(((b * T + t) * H + h) * (per_key ? K : 1) + i);
            const double want = per_key ? run[i] : scalar;
            EXPECT_NEAR(sum.at("dg").data[r], want, 1e-12 * size) << layer << " b" << b << " t" << t << " h" << h;
            EXPECT_NEAR(adj.at("dg").data[r], want, 1e-12 * size) << layer << ": the adjoint's own dg";
          }
        }
      }
    for (const char* name : {"dq", "dk", "dv", "dh0"})
      EXPECT_EQ(sum.at(name).data, adj.at(name).data) << layer << ": " << name << " is the adjoint's, unchanged";
  }
}

}  // namespace
}  // namespace ttr::test
