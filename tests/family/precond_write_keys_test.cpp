// The preconditioned layers' backward reads the write keys k̃ = B ⊙ k that its own
// forward form made (reference/precond_gated_delta_rule/backward.hpp): around the
// chunk core the chunk form of the preconditioner (atk_chunk.hpp, e^{b_t − b_s} from
// the chunk's running sums of g_atk), around the sequential core the token-by-token
// one (atk.hpp). A kernel's backward recomputes k̃ as its forward did
// (flash-linear-attention's recompute_atk_fwd), and with decays near 0 (g_atk = −69,
// ttrcheck's decay edges) the two forms differ in fp32 by the rounding of running
// sums of size |b| ≈ 10²: FLA's fp32 chunk_precond_kda then failed dv at 11.1 against
// a model that read the sequential k̃ (docs/validating-fla/failures.md).
//
// Checked in fp32 (ExactPolicy<float>, deterministic), both decays: the delta core's
// gradients that see only k̃ (dq, dv, dbeta, dg) of the layer's chunk backward are bit
// for bit the chunk core's given the chunk form's k̃; the sequential backward's, the
// sequential core's given the sequential k̃. It can fail: the two k̃ differ on these
// inputs, and so do the core's dv from them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/family/atk.hpp"
#include "reference/family/atk_chunk.hpp"
#include "reference/precond_gated_delta_rule/backward.hpp"
#include "tests/support/make_inputs.hpp"

namespace {

using P = ttr::ExactPolicy<float>;
using ttr::Decay;
using ttr::Tensor;

Tensor<float> as_float(const Tensor<double>& t) {
  Tensor<float> f(t.shape, 0.0f);
  for (std::size_t i = 0; i < t.data.size(); ++i) f.data[i] = static_cast<float>(t.data[i]);
  return f;
}

struct Problem {
  Tensor<float> q, k, v, g, beta, g_atk, beta_atk, do_, dht, dAt;
  std::vector<float> center;
};

// Two chunks and a partial third (T = 150, chunk 64); every seventh token of g_atk is
// −69 (a decay of 1e-30), so the chunk's running sums reach a few hundred.
Problem make_problem(Decay decay, std::uint64_t seed) {
  const std::int64_t B = 1, T = 150, H = 2, K = 8, V = 4;
  auto in = ttr::test::gated_inputs(B, T, H, K, V, seed,
                                    {.k_lo = -0.6, .k_hi = 0.6, .per_key_gate = decay == Decay::per_key, .atk = true});
  for (std::size_t i = 0; i < in["g_atk"].data.size(); i += 7) in["g_atk"].data[i] = -69.0;
  Problem p{as_float(in.at("q")),        as_float(in.at("k")),
            as_float(in.at("v")),        as_float(in.at("g")),
            as_float(in.at("beta")),     as_float(in.at("g_atk")),
            as_float(in.at("beta_atk")), ttr::test::uniform_as<float>({B, T, H, V}, seed + 100, -1, 1),
            ttr::test::uniform_as<float>({B, H, K, V}, seed + 101, -1, 1),
            ttr::test::uniform_as<float>({B, H, K}, seed + 102, -1, 1),
            {-0.2f, 0.1f}};
  return p;
}

ttr::PrecondDelta<float> args(Decay decay, const Problem& p) {
  return {decay, p.q, p.k, p.v, p.g, p.beta, nullptr, 0.35f, p.g_atk, p.beta_atk, p.center, nullptr,
          std::log(1.5f), 1e-6f};
}

template <class Core>
ttr::DeltaGrads<float> core_grads(const Core& core, Decay decay, const Problem& p, const Tensor<float>& k_tilde) {
  ttr::DeltaGrads<float> gr;
  const Tensor<float>* no_h0 = nullptr;
  core(decay, p.q, p.k, k_tilde, p.v, p.beta, &p.g, no_h0, 0.35f, p.do_, &p.dht, gr);
  return gr;
}

template <class Core>
void expect_reads(const Core& core, Decay decay, const Problem& p, const Tensor<float>& k_tilde) {
  const ttr::PrecondDelta<float> a = args(decay, p);
  ttr::PrecondDeltaGrads<float> g;
  ttr::precond_delta_backward<float>(a, {p.do_, &p.dht, &p.dAt}, g, core);
  const ttr::DeltaGrads<float> want = core_grads(core, decay, p, k_tilde);
  EXPECT_EQ(g.dq.data, want.dq.data);
  EXPECT_EQ(g.dv.data, want.dv.data);
  EXPECT_EQ(g.dbeta.data, want.dbeta.data);
  EXPECT_EQ(g.dg.data, want.dg.data);
}

void check(Decay decay) {
  const Problem p = make_problem(decay, 7201);
  const ttr::PrecondDelta<float> a = args(decay, p);
  Tensor<float> kt_chunk, kt_seq, A_chunk, A_seq;
  ttr::atk_write_keys_chunk<P>(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, 64, kt_chunk, A_chunk);
  ttr::atk_write_keys(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, kt_seq, A_seq);
  // The two forms are the same map in exact arithmetic; here they must differ, or the
  // comparisons below could not tell them apart.
  ASSERT_NE(kt_chunk.data, kt_seq.data);
  const ttr::ChunkDeltaCore<P> chunk{64};
  EXPECT_NE(core_grads(chunk, decay, p, kt_chunk).dv.data, core_grads(chunk, decay, p, kt_seq).dv.data);
  {
    SCOPED_TRACE("chunk core");
    expect_reads(chunk, decay, p, kt_chunk);
  }
  {
    SCOPED_TRACE("sequential core");
    expect_reads(ttr::SequentialDeltaCore{}, decay, p, kt_seq);
  }
}

TEST(PrecondWriteKeys, BackwardReadsTheWriteKeysOfItsOwnForwardForm_PrecondGatedDeltaRule) { check(Decay::scalar); }

TEST(PrecondWriteKeys, BackwardReadsTheWriteKeysOfItsOwnForwardForm_PrecondKda) { check(Decay::per_key); }

}  // namespace
