// The exact backward pass (adjoint recurrence) of the delta-rule core in delta.hpp,
// shared by delta_rule, gated_delta_rule, kda, kaczmarz_delta_rule and the
// preconditioned layers. Generic over the scalar type, like the forward.
//
// Forward step t (delta.hpp; d_t = 1, e^{g_t} 1 or e^{g_t} per key row):
//   S̄_t = D_t S_{t-1},  u_t = S̄_tᵀ k_t,  δ_t = β_t (v_t − u_t),
//   S_t = S̄_t + w_t δ_tᵀ,  o_t = S_tᵀ q̂_t,  q̂_t = scale·q_t.
// Loss L with cotangents do_t = ∂L/∂o_t and dht = ∂L/∂S_T (absent: 0). With
// dS = ∂L/∂S_t (everything after step t folded in), the adjoint step, t = T..1:
//   dq_t  = scale · S_t do_t
//   dS   += q̂_t do_tᵀ                     (the read o_t = S_tᵀ q̂_t)
//   dw_t  = dS δ_t,   dδ_t = dSᵀ w_t      (the write w_t δ_tᵀ)
//   dβ_t  = ⟨dδ_t, v_t − u_t⟩,  dv_t = β_t dδ_t,  du_t = −β_t dδ_t
//   dS̄   = dS + k_t du_tᵀ,  dk_t = S̄_t du_t   (the read-back u_t = S̄_tᵀ k_t)
//   dg_t  = Σ_ij dS̄_ij S̄_ij  (scalar decay: ∂S̄/∂g = S̄),  dg_{t,i} = Σ_j dS̄_ij S̄_ij  (per key)
//   dS    ← D_t dS̄                          (= ∂L/∂S_{t-1}),   dh0 = dS after t = 1.
// The read key k_t and the write key w_t get separate gradients dk, dw (w = k
// except for the preconditioned layers, PDN eq. (9); the callers add them).
// This is the order of FLA's naive recurrent backward: one sweep from T down to 1
// carrying dS (PDN App. D, Fig. 9 (a), steps 1-3, run token by token).
//
// Stored vs recomputed (checkpointing). One forward sweep (the forward's own
// operations on the state: decay, read-back, write; so the states are bit for bit
// the forward's) stores S before every C-th token (C = checkpoint_every, default
// ⌈√T⌉) and, per token, the V-vectors r_t = v_t − u_t and δ_t = β_t r_t; since
// dq_t = scale·S_t do_t needs nothing of the adjoint, it is taken there too, from
// S_t as the write leaves it. The adjoint sweep then takes the segments last to
// first: it re-steps each from its checkpoint with the stored δ (decay and write
// only: no read-back, no readout), keeping S̄_t = D_t S_{t-1} for its C tokens, and
// runs the remaining adjoint lines over the state in two sweeps (the write; the
// read-back and the decay). The last segment is not re-stepped: the forward sweep
// keeps its S̄_t directly. Memory (⌈T/C⌉ + C)·K·V + 2·T·V per sequence instead of
// T·K·V (4096·128² values: 0.5 GB in float64, several in MPFR). Every value is
// computed by the same rounded operations in the same order as in the derivation's
// line-by-line order (each accumulator summed j or i ascending), so the gradients
// are bit for bit those of C = T and of the former layout that kept every state and
// recomputed S̄_t, u_t, S_t in the adjoint (tests/backward/delta_backward_bitwise_test).
// Operation count per state element and token: forward 4 (decay, read-back, write,
// read); backward 4 (forward sweep: decay, read-back, write, dq) + 2 (re-step: decay,
// write, on T − C tokens) + 7 (the adjoint: dS += q̂ doᵀ, dw, dδ; dk, dS += k duᵀ,
// dg, dS ← D dS̄): ~3.25× the forward. The MPFR and MPFI tiers run the same adjoint
// with the decay kept out of the states (delta_backward_scaled.hpp): 10, ~2.5×.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "reference/family/delta.hpp"
#include "reference/family/delta_backward_scaled.hpp"
#include "reference/family/delta_grads.hpp"

namespace ttr {

// Which layout of the adjoint runs: the definition's operations (this file), the
// decay kept out of the states (delta_backward_scaled.hpp: 10 operations per state
// element and token instead of 13, for the tiers that allow it), or the tier's choice.
enum class DeltaLayout { automatic, definition, scaled };

// One (batch, head) sequence, the definition's operations. S0: the initial K×V
// state. dS: on entry ∂L/∂S_T (zeros when dht is absent), on exit ∂L/∂S_0.
template <class T>
void delta_sequence_backward_definition(const DeltaSequence<T>& s, std::int64_t len, int K, int V, const T& scale, const T* S0,
                             SeqView<const T> do_, T* dS, const DeltaGradSequence<T>& gr,
                             std::int64_t checkpoint_every = 0) {
  const T zero = from_double<T>(0.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t C = checkpoint_spacing(len, checkpoint_every);
  const std::int64_t segments = (len + C - 1) / C;
  const std::int64_t last0 = (segments - 1) * C;  // first token of the last segment
  std::vector<T> d(K, from_double<T>(1.0)), u(V), ddelta(V), du(V);
  // r_t = v_t − u_t and δ_t = β_t r_t of every token; S̄_t of the segment at hand.
  std::vector<T> rs(static_cast<std::size_t>(len) * V), deltas(static_cast<std::size_t>(len) * V);
  std::vector<T> checkpoints(static_cast<std::size_t>(std::max<std::int64_t>(segments - 1, 0)) * KV);
  std::vector<T> Sbars(static_cast<std::size_t>(C) * KV), S(S0, S0 + KV);
  T acc = zero, acc2 = zero;
  // Forward sweep: the forward's decay, read-back and write (delta.hpp); the
  // checkpoints; dq_t = scale·S_t do_t.
  for (std::int64_t t = 0; t < len; ++t) {
    if (t % C == 0 && t < last0)
      std::copy(S.begin(), S.end(), checkpoints.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
    decay_factors(s.decay, s.g, t, K, d);
    const T* kt = s.k.row(t);
    const T* wt = s.w.row(t);
    const T* vt = s.v.row(t);
    const T* dot_ = do_.row(t);
    T* keep = t >= last0 ? Sbars.data() + (t - last0) * KV : nullptr;  // the last segment's S̄_t
    for (int j = 0; j < V; ++j) u[j] = zero;
    for (int i = 0; i < K; ++i) {
      T* Si = S.data() + static_cast<std::ptrdiff_t>(i) * V;
      for (int j = 0; j < V; ++j) {
        if (s.decay != Decay::none) scale_by(Si[j], d[i]);
        mul_add_to(u[j], kt[i], Si[j]);
        if (keep) keep[static_cast<std::size_t>(i) * V + j] = Si[j];
      }
    }
    T* r = rs.data() + t * V;
    T* delta = deltas.data() + t * V;
    const T& b = s.beta.at(t);
    for (int j = 0; j < V; ++j) {
      r[j] = vt[j] - u[j];
      delta[j] = b * r[j];
    }
    for (int i = 0; i < K; ++i) {
      T* Si = S.data() + static_cast<std::ptrdiff_t>(i) * V;
      acc = zero;
      for (int j = 0; j < V; ++j) {
        mul_add_to(Si[j], wt[i], delta[j]);
        mul_add_to(acc, Si[j], dot_[j]);
      }
      gr.dq.row(t)[i] = scale * acc;
    }
  }
  // Backward sweep, segment by segment.
  for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
    const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
    if (seg < segments - 1) {  // re-step: S̄_t = D S_{t-1}, S_t = S̄_t + w δᵀ with the stored δ
      std::copy(checkpoints.begin() + static_cast<std::ptrdiff_t>(seg * KV),
                checkpoints.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), S.begin());
      for (std::int64_t t = t0; t < t1; ++t) {  // one pass over the state per token
        decay_factors(s.decay, s.g, t, K, d);
        T* Sbar = Sbars.data() + (t - t0) * KV;
        const T* wt = s.w.row(t);
        const T* delta = deltas.data() + t * V;
        const bool write = t + 1 < t1;  // S_t is needed only as the next token's S_{t-1}
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) {
            const std::size_t e = static_cast<std::size_t>(i) * V + j;
            if (s.decay != Decay::none) scale_by(S[e], d[i]);
            Sbar[e] = S[e];
            if (write) mul_add_to(S[e], wt[i], delta[j]);
          }
      }
    }
    for (std::int64_t t = t1 - 1; t >= t0; --t) {
      decay_factors(s.decay, s.g, t, K, d);
      const T* Sbar = Sbars.data() + (t - t0) * KV;
      const T* qt = s.q.row(t);
      const T* kt = s.k.row(t);
      const T* wt = s.w.row(t);
      const T* dot_ = do_.row(t);
      const T* r = rs.data() + t * V;
      const T* delta = deltas.data() + t * V;
      const T& b = s.beta.at(t);
      for (int j = 0; j < V; ++j) ddelta[j] = zero;
      // Sweep 1, per element: the read dS += q̂ doᵀ; the write dw = dS δ, dδ = dSᵀ w.
      for (int i = 0; i < K; ++i) {
        const T qh = scale * qt[i];
        acc2 = zero;
        for (int j = 0; j < V; ++j) {
          T& g = dS[static_cast<std::size_t>(i) * V + j];
          mul_add_to(g, qh, dot_[j]);
          mul_add_to(acc2, g, delta[j]);
          mul_add_to(ddelta[j], wt[i], g);
        }
        gr.dw.row(t)[i] = acc2;
      }
      // δ = β (v − u).
      T db = zero;
      for (int j = 0; j < V; ++j) {
        mul_add_to(db, ddelta[j], r[j]);
        gr.dv.row(t)[j] = b * ddelta[j];
        du[j] = -(b * ddelta[j]);
      }
      gr.dbeta.at(t) = db;
      // Sweep 2, per element: the read-back u = S̄ᵀ k (dS̄ = dS + k duᵀ, dk = S̄ du),
      // then the decay S̄ = D S_{t-1} (dg = Σ dS̄ ∘ S̄ per key row, dS ← D dS̄).
      T dg_scalar = zero;
      for (int i = 0; i < K; ++i) {
        acc = zero;
        acc2 = zero;
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          mul_add_to(acc, Sbar[e], du[j]);
          mul_add_to(dS[e], kt[i], du[j]);
          if (s.decay != Decay::none) {
            mul_add_to(acc2, dS[e], Sbar[e]);
            scale_by(dS[e], d[i]);
          }
        }
        gr.dk.row(t)[i] = acc;
        if (s.decay == Decay::per_key) gr.dg.row(t)[i] = acc2;
        else if (s.decay == Decay::scalar) dg_scalar += acc2;
      }
      if (s.decay == Decay::scalar) gr.dg.at(t) = dg_scalar;
    }
  }
}

// One (batch, head) sequence in the layout asked for. automatic: the scaled layout
// where the tier allows reordering (scalar.hpp: reorders_for_speed) and there is a
// decay to keep out of the states, else the definition's.
template <class T>
void delta_sequence_backward(const DeltaSequence<T>& s, std::int64_t len, int K, int V, const T& scale, const T* S0,
                             SeqView<const T> do_, T* dS, const DeltaGradSequence<T>& gr,
                             std::int64_t checkpoint_every = 0, DeltaLayout layout = DeltaLayout::automatic) {
  if (layout == DeltaLayout::automatic)
    layout = reorders_for_speed<T>::value && s.decay != Decay::none ? DeltaLayout::scaled : DeltaLayout::definition;
  if (layout == DeltaLayout::scaled && s.decay != Decay::none)
    delta_sequence_backward_scaled(s, len, K, V, scale, S0, do_, dS, gr, checkpoint_every);
  else
    delta_sequence_backward_definition(s, len, K, V, scale, S0, do_, dS, gr, checkpoint_every);
}

// Whole-tensor driver, the backward of delta_forward: same inputs, then the
// cotangents do_ [B,T,H,V] and dht (optional [B,H,K,V]).
template <class T>
void delta_backward(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& w, const Tensor<T>& v,
                    const Tensor<T>& beta, const Tensor<T>* g, const Tensor<T>* h0, const T& scale,
                    const Tensor<T>& do_, const Tensor<T>* dht, DeltaGrads<T>& out,
                    std::int64_t checkpoint_every = 0, DeltaLayout layout = DeltaLayout::automatic) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const T zero = from_double<T>(0.0);
  out.dq = Tensor<T>(q.shape, zero);
  out.dk = Tensor<T>(k.shape, zero);
  out.dw = Tensor<T>(w.shape, zero);
  out.dv = Tensor<T>(v.shape, zero);
  out.dbeta = Tensor<T>(beta.shape, zero);
  out.dg = g ? Tensor<T>(g->shape, zero) : Tensor<T>();
  out.dh0 = dht ? *dht : Tensor<T>({B, H, K, V}, zero);
  const std::vector<T> zeros(static_cast<std::size_t>(K) * V, zero);
  const SeqView<T> no_dg{nullptr, 0, 0};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const DeltaSequence<T> s{seq(q, b, h), seq(k, b, h), seq(v, b, h), seq(w, b, h), seq(beta, b, h),
                               g ? seq(*g, b, h) : SeqView<const T>{nullptr, 0, 0}, kind};
      const DeltaGradSequence<T> gr{seq(out.dq, b, h), seq(out.dk, b, h), seq(out.dw, b, h), seq(out.dv, b, h),
                                    seq(out.dbeta, b, h), g ? seq(out.dg, b, h) : no_dg};
      delta_sequence_backward(s, len, K, V, scale, h0 ? state_block(*h0, b, h) : zeros.data(), seq(do_, b, h),
                              state_block(out.dh0, b, h), gr, checkpoint_every, layout);
    }
}

// Adds b into a (same shape): the read-key and write-key gradients of a key used for both.
template <class T>
void add_into(Tensor<T>& a, const Tensor<T>& b) {
  for (std::size_t e = 0; e < a.data.size(); ++e) a.data[e] += b.data[e];
}

}  // namespace ttr
