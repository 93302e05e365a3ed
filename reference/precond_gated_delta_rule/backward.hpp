// precond_gated_delta_rule (PGDN) and precond_kda (PKDA), backward of the
// sequential form: PDN App. D,
// Fig. 9 (b) run token by token.
//   1. k̃ = B ⊙ k from the preconditioner's forward (family/atk.hpp);
//   2. the delta core's adjoint with read key k and write key k̃
//      (family/delta_backward.hpp): dq, dv, dg, dbeta, dh0, the read-key part dk
//      and the write-key gradient dk̃;
//   3. the preconditioner's adjoint (family/atk_backward.hpp) from dk̃ and the
//      optional cotangent dAt of final_A_state: dk_atk, dg_atk, dbeta_atk, dA0
//      (FLA's initial_A_state) and dlog_atk_scale [H] (the centre c per head;
//      meaningful when log_atk_scale is a tensor input);
//   4. dk = dk (read) + dk_atk.
// Around the chunk core (the kernels' form) step 1 is the chunk form of the
// preconditioner (atk_chunk.hpp), as in the forward chunk form: a kernel's backward
// reads the k̃ its forward made, and under decays near 0 (g_atk ≈ −69) that k̃ carries
// the rounding of the chunk's cumulative log gates, e^{b_t − b_s} formed from two
// running sums of size |b| (docs/validating-fla/failures.md, "The preconditioned ops, fp32 stress").
// Around the chunk core (the kernels' form) dg_atk is the reverse running sum of the
// log-gate gradients, as FLA's chunk_atk_bwd forms it; around the sequential adjoint
// (the oracle's) it is formed directly (atk_backward.hpp says why it matters at t = 0).
#pragma once

#include <utility>

#include "reference/family/atk_backward.hpp"
#include "reference/family/atk_chunk.hpp"
#include "reference/family/delta_backward_core.hpp"
#include "reference/family/precond_delta.hpp"

namespace ttr {

// The cotangents of the three outputs: o (required), the final state S_T and the
// final accumulator A_T (optional: absent means zero).
template <class T>
struct PrecondDeltaCotangents {
  const Tensor<T>& o;
  const Tensor<T>* ht = nullptr;
  const Tensor<T>* A_final = nullptr;
};

// The gradients of every input of PrecondDelta (dh0 and dA0 meaningful when h0
// and A0 are given; dlog_atk_scale [H] when the centre is a tensor input).
template <class T>
struct PrecondDeltaGrads {
  Tensor<T> dq, dk, dv, dg, dbeta, dg_atk, dbeta_atk, dh0, dA0, dlog_atk_scale;
};

// a.decay: Decay::scalar (PGDN, g [B,T,H]) or Decay::per_key (PKDA, g [B,T,H,K];
// PDN App. D: "the PKDA backward pass is analogously adapted").
template <class T, class Core = SequentialDeltaCore>
void precond_delta_backward(const PrecondDelta<T>& a, const PrecondDeltaCotangents<T>& cot, PrecondDeltaGrads<T>& g,
                            const Core& core = {}) {
  Tensor<T> k_tilde, A_final, dk_atk;
  if constexpr (is_chunk_delta_core<Core>::value)
    atk_write_keys_chunk<typename is_chunk_delta_core<Core>::policy>(a.k, a.g_atk, a.beta_atk, a.center, a.A0,
                                                                      a.log_x, a.eps, core.chunk, k_tilde, A_final);
  else
    atk_write_keys(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, k_tilde, A_final);
  DeltaGrads<T> gr;
  core(a.decay, a.q, a.k, k_tilde, a.v, a.beta, &a.g, a.h0, a.scale, cot.o, cot.ht, gr);
  constexpr DgAtk route = is_chunk_delta_core<Core>::value ? DgAtk::reverse_sum : DgAtk::direct;
  atk_write_keys_backward(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, gr.dw, cot.A_final, dk_atk,
                          g.dg_atk, g.dbeta_atk, g.dA0, g.dlog_atk_scale, route);
  add_into(gr.dk, dk_atk);
  g.dq = std::move(gr.dq), g.dk = std::move(gr.dk), g.dv = std::move(gr.dv), g.dg = std::move(gr.dg);
  g.dbeta = std::move(gr.dbeta), g.dh0 = std::move(gr.dh0);
}

}  // namespace ttr
