// Chunkwise backward of linear attention with decay (linear_attn, simple_gla,
// gla), in the structure of flash-linear-attention's chunk_simple_gla /
// chunk_gla backward: the adjoint of the chunk form's own equations
// (gated_linear_chunk.hpp), chunk by chunk from the last, so that in exact
// arithmetic it equals the sequential adjoint (gated_linear_backward.hpp) and
// under a 16-bit policy it is a realistic backward kernel. Generic over the
// arithmetic policy P, like the forward.
//
// Forward of a chunk (c tokens, chunk-initial state S_0, cumulative log decay
// b_t = Σ_{i ≤ t, i in chunk} g_i, Γ_ts = e^{b_t − b_s}, per key d for gla):
//   Q̃ = Q ⊙ e^{b},  K̃ = K ⊙ e^{b_last − b},  M = [Q Kᵀ ⊙ Γ]_{s ≤ t}
//   O = scale·(Q̃ S_0 + M V),   S_end = Diag(e^{b_last}) S_0 + K̃ᵀ V
// Adjoint, with dO = ∂L/∂O and dS_end = ∂L/∂S_end (dht for the last chunk):
//   dV   = scale·Mᵀ dO + K̃ dS_end                                 (FLA's chunk_bwd_dv)
//   dS_0 = Diag(e^{b_last}) dS_end + scale·Q̃ᵀ dO                  (FLA's chunk_bwd_dh: the backward state pass)
//   dQ   = scale·(dO S_0ᵀ) ⊙ e^{b} + dP K,     dP = scale·[dO Vᵀ ⊙ Γ]_{s ≤ t}
//   dK   = (V dS_endᵀ) ⊙ e^{b_last − b} + dPᵀ Q                   (FLA's chunk_bwd_dqkwg)
// (per-key gates: dQ_td = Σ_s dA_ts K_sd e^{b_td − b_sd}, dK_sd = Σ_t dA_ts Q_td e^{b_td − b_sd}
// with dA = scale·[dO Vᵀ]_{s ≤ t}, pair by pair: the decay cannot be factored without e^{+b}).
// The gate gradient: every b_td (t < last) enters only as q_td e^{+b_td} or k_td e^{−b_td},
// so ∂L/∂b_td = q_td dq_td − k_td dk_td, and b_last also decays the state:
//   db_t = q_t ⊙ dq_t − k_t ⊙ dk_t  (+ at t = last: e^{b_last} ⊙ rowsum(dS_end ⊙ S_0) + colsum(K̃ ⊙ dK̃)),
// dK̃ = V dS_endᵀ; dg is the chunk-local reverse cumulative sum of db (dg_i = Σ_{t ≥ i} db_t, reset at
// every chunk start: FLA's chunk_local_cumsum(reverse=True)); scalar gates sum over d.
//
// Stored vs recomputed (FLA's structure): a forward pass over the chunks stores
// the chunk-initial states S_0 (FLA's h; stepped by the forward's own
// gated_linear_chunk_sequence, so bit for bit the forward's); each chunk's Q̃, K̃
// and M are recomputed in the backward sweep.
//
// Arithmetic policy P: what the forward narrows is narrowed the same way when
// recomputed (q, k, v, Q̃, K̃, M, S_0 as an operand). In addition narrowed: the
// cotangents do and dht (16-bit inputs, as in the delta family's chunk backward);
// dS_end when read as an operand (FLA stores dh per chunk as q.dtype); the state
// pass's operand scale·q and its decayed rows (FLA scales q before that product); the decayed,
// masked dP before it multiplies K and Q (scalar and no decay: FLA casts ds to
// the operand dtype for tl.dot); dq, dk, dv as written. fp32: the running dS
// carried between chunks, the per-key dA (FLA's chunk_gla stores dA in fp32), the
// accumulators of dq, dk before they are written, db and its reverse sum dg, dh0.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/family/gated_linear_chunk.hpp"

namespace ttr {

template <class P>
struct GatedLinearChunkBackwardWork {
  using A = typename P::acc;
  GatedLinearChunkWork<P> fwd;
  Matrix<A> q, k, v, b, qs, qd, kd, s0, scores, dO, dse, dq, dk, dv, dp, dkd, tmp, db;
  std::vector<std::vector<A>> states;
};

// One (batch, head) sequence. S0: the initial state. dS: on entry ∂L/∂S_T (zeros
// when dht is absent), on exit ∂L/∂S_0. dg is unused for Decay::none.
template <class P>
void gated_linear_chunk_sequence_backward(Decay kind, SeqView<const typename P::acc> q,
                                          SeqView<const typename P::acc> k, SeqView<const typename P::acc> v,
                                          SeqView<const typename P::acc> g, std::int64_t len, int K, int V,
                                          const typename P::acc& scale, int chunk, const typename P::acc* S0,
                                          SeqView<const typename P::acc> do_, typename P::acc* dS,
                                          SeqView<typename P::acc> dq, SeqView<typename P::acc> dk,
                                          SeqView<typename P::acc> dv, SeqView<typename P::acc> dg,
                                          GatedLinearChunkBackwardWork<P>& w) {
  using A = typename P::acc;
  using std::exp;
  const A zero = from_double<A>(0.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t chunks = (len + chunk - 1) / chunk;
  // Forward over the chunks: S_0 of every chunk, by the forward's own code.
  w.states.assign(static_cast<std::size_t>(std::max<std::int64_t>(chunks, 1)), std::vector<A>(S0, S0 + KV));
  std::vector<A> S(S0, S0 + KV), o_scratch(static_cast<std::size_t>(chunk) * V);
  const auto from = [](const SeqView<const A>& x, std::int64_t t0) {
    return SeqView<const A>{x.base ? x.row(t0) : nullptr, x.stride, x.features};
  };
  for (std::int64_t n = 0; n + 1 < chunks; ++n) {
    const std::int64_t t0 = n * chunk;
    gated_linear_chunk_sequence<P>(kind, from(q, t0), from(k, t0), from(v, t0), from(g, t0), chunk, K, V, scale,
                                   chunk, S.data(), SeqView<A>{o_scratch.data(), V, V}, w.fwd);
    std::copy(S.begin(), S.end(), w.states[static_cast<std::size_t>(n + 1)].begin());
  }
  for (std::size_t e = 0; e < KV; ++e) dS[e] = P::narrow(dS[e]);  // dht: a 16-bit input
  const bool decays = kind != Decay::none;
  // Backward over the chunks, last first.
  for (std::int64_t n = chunks - 1; n >= 0; --n) {
    const std::int64_t t0 = n * chunk;
    const int c = static_cast<int>(std::min<std::int64_t>(chunk, len - t0));
    const int last = c - 1;
    // Recompute the chunk's forward operands exactly as gated_linear_chunk_sequence does.
    gather_rows<P>(q, t0, c, K, w.q);
    gather_rows<P>(k, t0, c, K, w.k);
    gather_rows<P>(v, t0, c, V, w.v);
    cumulative_gates(kind, g, t0, c, K, w.b);
    decay_rows<P>(kind, w.k, w.b, true, w.kd);
    masked_decayed_products<P>(kind, w.q, w.k, w.b, false, w.scores);
    narrow_all<P>(w.scores.a);
    state_operand<P>(w.states[static_cast<std::size_t>(n)].data(), K, V, w.s0);
    // The cotangents of the chunk's outputs.
    gather_rows<P>(do_, t0, c, V, w.dO);
    state_operand<P>(dS, K, V, w.dse);

    // dV = scale·Mᵀ dO + K̃ dS_end.
    chunk_gemm_tn<P>(w.scores, w.dO, w.dv);
    for (auto& x : w.dv.a) x *= scale;
    chunk_gemm_nn<P>(w.kd, w.dse, w.dv, true);
    // The inter-chunk reads: dQ = scale·(dO S_0ᵀ) ⊙ e^{b}, dK = (V dS_endᵀ) ⊙ e^{b_last − b}.
    chunk_gemm_nt<P>(w.dO, w.s0, w.dq);
    chunk_gemm_nt<P>(w.v, w.dse, w.dkd);
    w.dk.assign(c, K, zero);
    for (int t = 0; t < c; ++t)
      for (int d = 0; d < K; ++d) {
        const int col = w.b.cols == 1 ? 0 : d;
        w.dq(t, d) *= scale;
        if (!decays) {
          w.dk(t, d) = w.dkd(t, d);
          continue;
        }
        w.dq(t, d) *= exp(w.b(t, col));
        w.dk(t, d) = w.dkd(t, d) * exp(w.b(last, col) - w.b(t, col));
      }
    // The intra-chunk reads through M.
    chunk_gemm_nt<P>(w.dO, w.v, w.dp);
    if (kind != Decay::per_key) {
      // dP = scale·[dO Vᵀ ⊙ Γ]_{s ≤ t}, an operand: dQ += dP K, dK += dPᵀ Q.
      for (int t = 0; t < c; ++t)
        for (int s = 0; s < c; ++s) {
          if (s > t) {
            w.dp(t, s) = zero;
            continue;
          }
          A x = scale * w.dp(t, s);
          if (decays) x *= decay_between(w.b, t, s, 0);
          w.dp(t, s) = P::narrow(x);
        }
      chunk_gemm_nn<P>(w.dp, w.k, w.dq, true);
      chunk_gemm_tn<P>(w.dp, w.q, w.dk, true);
    } else {
      // dA = scale·[dO Vᵀ]_{s ≤ t} in fp32; the per-key decay pair by pair.
      for (int t = 0; t < c; ++t)
        for (int s = 0; s <= t; ++s) {
          const A da = scale * w.dp(t, s);
          for (int d = 0; d < K; ++d) {
            const A e = da * decay_between(w.b, t, s, d);
            mul_add_to(w.dq(t, d), e, w.k(s, d));
            mul_add_to(w.dk(s, d), e, w.q(t, d));
          }
        }
    }

    // The gate gradient: db_t = q_t ⊙ dq_t − k_t ⊙ dk_t, and at t = last the state's decay
    // e^{b_last} ⊙ rowsum(dS_end ⊙ S_0) and the keys' K̃ ⊙ dK̃ (read before dS is overwritten).
    if (decays) {
      w.db.assign(c, w.b.cols, zero);
      for (int t = 0; t < c; ++t)
        for (int d = 0; d < K; ++d) {
          const int col = w.b.cols == 1 ? 0 : d;
          w.db(t, col) += w.q(t, d) * w.dq(t, d) - w.k(t, d) * w.dk(t, d);
        }
      for (int d = 0; d < K; ++d) {
        const int col = w.b.cols == 1 ? 0 : d;
        A state = zero, keys = zero;
        for (int j = 0; j < V; ++j) mul_add_to(state, w.dse(d, j), w.s0(d, j));
        for (int s = 0; s < c; ++s) mul_add_to(keys, w.kd(s, d), w.dkd(s, d));
        w.db(last, col) += state * exp(w.b(last, col)) + keys;
      }
    }

    // The backward state pass: dS_0 = Diag(e^{b_last}) dS_end + Q̂ᵀ dO (fp32), whose
    // operand Q̂ = narrow(narrow(scale·q) ⊙ e^{b}) is FLA's chunk_bwd_kernel_dh's: it
    // scales q before the product and stores each step in q's dtype. Scaling after the
    // product instead leaves scale·q unrounded, which only a power-of-two scale makes
    // exact: FLA's fp32 chunk_linear_attn at K = 8 (scale 8^-1/2) has TF32-sized error
    // in dh0 (1.5e-4 relative on one-token sequences) that such a model judged at
    // 1.6e3 as tf32, at K = 16 (scale 1/4) none (docs/validating-fla.md, "Failures").
    w.qs = w.q;
    for (auto& x : w.qs.a) x = P::narrow(scale * x);
    decay_rows<P>(kind, w.qs, w.b, false, w.qd);
    decay_state(kind, w.b, dS, K, V);
    chunk_gemm_tn<P>(w.qd, w.dO, w.tmp);
    for (std::size_t e = 0; e < KV; ++e) dS[e] += w.tmp.a[e];

    // Write the chunk's gradients; dg is the chunk-local reverse cumulative sum of db.
    for (int t = 0; t < c; ++t) {
      for (int d = 0; d < K; ++d) {
        dq.row(t0 + t)[d] = P::narrow(w.dq(t, d));
        dk.row(t0 + t)[d] = P::narrow(w.dk(t, d));
      }
      for (int j = 0; j < V; ++j) dv.row(t0 + t)[j] = P::narrow(w.dv(t, j));
    }
    if (!decays) continue;
    for (int col = 0; col < w.b.cols; ++col) {
      A run = zero;
      for (int t = last; t >= 0; --t) {
        run += w.db(t, col);
        if (kind == Decay::per_key) dg.row(t0 + t)[col] = run;
        else dg.at(t0 + t) = run;
      }
    }
  }
}

// Whole-tensor driver, the chunk counterpart of gated_linear_backward (same
// arguments plus the chunk size).
template <class P>
void gated_linear_chunk_backward(Decay kind, const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                                 const Tensor<typename P::acc>& v, const Tensor<typename P::acc>* g,
                                 const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                                 const Tensor<typename P::acc>& do_, const Tensor<typename P::acc>* dht,
                                 Tensor<typename P::acc>& dq, Tensor<typename P::acc>& dk, Tensor<typename P::acc>& dv,
                                 Tensor<typename P::acc>& dg, Tensor<typename P::acc>& dh0) {
  using A = typename P::acc;
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const A zero = from_double<A>(0.0);
  dq = Tensor<A>(q.shape, zero);
  dk = Tensor<A>(k.shape, zero);
  dv = Tensor<A>(v.shape, zero);
  dg = g ? Tensor<A>(g->shape, zero) : Tensor<A>();
  dh0 = dht ? *dht : Tensor<A>({B, H, K, V}, zero);
  const std::vector<A> zeros(static_cast<std::size_t>(K) * V, zero);
  GatedLinearChunkBackwardWork<P> work;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_chunk_sequence_backward<P>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                                              g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, len, K, V, scale,
                                              chunk, h0 ? state_block(*h0, b, h) : zeros.data(), seq(do_, b, h),
                                              state_block(dh0, b, h), seq(dq, b, h), seq(dk, b, h), seq(dv, b, h),
                                              g ? seq(dg, b, h) : SeqView<A>{nullptr, 0, 0}, work);
}

}  // namespace ttr
