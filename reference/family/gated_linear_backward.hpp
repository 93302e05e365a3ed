// The exact backward pass (adjoint recurrence) of the gated linear-attention core
// in gated_linear.hpp: linear_attn, simple_gla and gla. Generic over the scalar type.
//
// Forward step t (d_t = 1, e^{g_t} 1 or e^{g_t} per key row; PDN §2.1, §3.4):
//   S̄_t = D_t S_{t-1},  S_t = S̄_t + k_t v_tᵀ,  o_t = S_tᵀ q̂_t,  q̂_t = scale·q_t.
// With cotangents do_t = ∂L/∂o_t, dht = ∂L/∂S_T (absent: 0) and dS = ∂L/∂S_t
// carried from the future, the adjoint step, t = T..1:
//   dq_t = scale · S_t do_t,   dS += q̂_t do_tᵀ
//   dk_t = dS v_t,             dv_t = dSᵀ k_t
//   dg_t = Σ_ij dS_ij S̄_ij (scalar),  dg_{t,i} = Σ_j dS_ij S̄_ij (per key)   (∂S̄/∂g = S̄)
//   dS  ← D_t dS   (= ∂L/∂S_{t-1}),   dh0 = dS after t = 1.
// Unrolled: dS_0 = Σ_t (Π_{s≤t} D_s) q̂_t do_tᵀ + (Π_s D_s) dht; decay-free, the
// plain sum Σ_t q̂_t do_tᵀ + dht. FLA's naive recurrent backward runs the same
// sweep (its fused kernels form dq in a forward sweep and dk, dv in the backward
// one; the values are the same).
//
// Stored vs recomputed (checkpointing, as the delta core's adjoint): a forward sweep
// of the forward's own state update stores S before every C-th token (C =
// checkpoint_every, default ⌈√T⌉) and keeps the last segment's states; the adjoint
// takes the segments last to first, re-stepping each earlier one from its checkpoint
// to get its S_{t-1}, and recomputes S̄_t and S_t from them. Memory (⌈T/C⌉ − 1 + C)·K·V
// values per sequence instead of T·K·V (16384·128² in MPFR did not fit 24 GB: the
// long_t16384 production case). The same rounded operations on every value as keeping
// every state (C ≥ T: one segment, nothing re-stepped, the layout before), so the
// same gradients bit for bit (tests/backward/gated_linear_backward_bitwise_test.cpp);
// the re-steps add 2 operations per state element on T − C tokens.
#pragma once

#include <algorithm>
#include <vector>

#include "reference/family/checkpoint_spacing.hpp"
#include "reference/family/gated_linear.hpp"

namespace ttr {

// One token of the forward's state update (gated_linear_sequence without its
// readout): S ← Diag(d) S + k vᵀ, the same rounded operations on each element.
template <class T>
void gated_linear_step(Decay kind, const std::vector<T>& d, const T* kt, const T* vt, int K, int V, T* S) {
  for (int i = 0; i < K; ++i) {
    T* Si = S + static_cast<std::ptrdiff_t>(i) * V;
    for (int j = 0; j < V; ++j) {
      if (kind != Decay::none) scale_by(Si[j], d[i]);
      mul_add_to(Si[j], kt[i], vt[j]);
    }
  }
}

// One (batch, head) sequence. dS: ∂L/∂S_T on entry, ∂L/∂S_0 on exit.
// checkpoint_every: C (0: ⌈√len⌉).
template <class T>
void gated_linear_sequence_backward(Decay kind, SeqView<const T> q, SeqView<const T> k, SeqView<const T> v,
                                    SeqView<const T> g, std::int64_t len, int K, int V, const T& scale, const T* S0,
                                    SeqView<const T> do_, T* dS, SeqView<T> dq, SeqView<T> dk, SeqView<T> dv,
                                    SeqView<T> dg, std::int64_t checkpoint_every = 0) {
  const T zero = from_double<T>(0.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t C = checkpoint_spacing(len, checkpoint_every);
  const std::int64_t segments = (len + C - 1) / C;
  const std::int64_t last0 = (segments - 1) * C;  // first token of the last segment
  std::vector<T> d(K, from_double<T>(1.0)), S(S0, S0 + KV);
  // S before the first token of every segment but the last; S_{t-1} of the segment at hand.
  std::vector<T> checkpoints(static_cast<std::size_t>(std::max<std::int64_t>(segments - 1, 0)) * KV);
  std::vector<T> states(static_cast<std::size_t>(C) * KV);
  for (std::int64_t t = 0; t < len; ++t) {
    if (t % C == 0 && t < last0)
      std::copy(S.begin(), S.end(), checkpoints.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
    if (t >= last0)  // the last segment's states are kept as the sweep makes them
      std::copy(S.begin(), S.end(), states.begin() + static_cast<std::ptrdiff_t>((t - last0) * KV));
    if (t + 1 < len) {  // S_t: the next token's S_{t-1}
      decay_factors(kind, g, t, K, d);
      gated_linear_step(kind, d, k.row(t), v.row(t), K, V, S.data());
    }
  }
  std::vector<T> Sbar(KV), St(KV);
  for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
    const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
    if (seg < segments - 1) {  // re-step the segment from its checkpoint, keeping S_{t-1}
      std::copy(checkpoints.begin() + static_cast<std::ptrdiff_t>(seg * KV),
                checkpoints.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), S.begin());
      for (std::int64_t t = t0; t < t1; ++t) {
        std::copy(S.begin(), S.end(), states.begin() + static_cast<std::ptrdiff_t>((t - t0) * KV));
        if (t + 1 < t1) {
          decay_factors(kind, g, t, K, d);
          gated_linear_step(kind, d, k.row(t), v.row(t), K, V, S.data());
        }
      }
    }
    for (std::int64_t t = t1 - 1; t >= t0; --t) {
      decay_factors(kind, g, t, K, d);
      const T* Sp = states.data() + (t - t0) * KV;
      const T* qt = q.row(t);
      const T* kt = k.row(t);
      const T* vt = v.row(t);
      const T* dot_ = do_.row(t);
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          Sbar[e] = kind == Decay::none ? Sp[e] : Sp[e] * d[i];
          St[e] = Sbar[e];
          mul_add_to(St[e], kt[i], vt[j]);
        }
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) mul_add_to(acc, St[static_cast<std::size_t>(i) * V + j], dot_[j]);
        dq.row(t)[i] = scale * acc;
        const T qh = scale * qt[i];
        for (int j = 0; j < V; ++j) mul_add_to(dS[static_cast<std::size_t>(i) * V + j], qh, dot_[j]);
      }
      T* dvt = dv.row(t);
      for (int j = 0; j < V; ++j) dvt[j] = zero;
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) {
          const T& e = dS[static_cast<std::size_t>(i) * V + j];
          mul_add_to(acc, e, vt[j]);
          mul_add_to(dvt[j], kt[i], e);
        }
        dk.row(t)[i] = acc;
      }
      if (kind == Decay::none) continue;
      T dg_scalar = zero;
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          mul_add_to(acc, dS[e], Sbar[e]);
          scale_by(dS[e], d[i]);
        }
        if (kind == Decay::per_key) dg.row(t)[i] = acc;
        else dg_scalar += acc;
      }
      if (kind == Decay::scalar) dg.at(t) = dg_scalar;
    }
  }
}

// Whole-tensor driver, the backward of gated_linear_forward: same inputs, then the
// cotangents do_ [B,T,H,V] and dht (optional [B,H,K,V]). dg gets g's shape (left
// empty for Decay::none); dh0 [B,H,K,V] is ∂L/∂h0 (of the zero state when h0 is absent).
// checkpoint_every: the states' checkpoint spacing (0: ⌈√T⌉; the gradients do not depend on it).
template <class T>
void gated_linear_backward(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                           const Tensor<T>* g, const Tensor<T>* h0, const T& scale, const Tensor<T>& do_,
                           const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg,
                           Tensor<T>& dh0, std::int64_t checkpoint_every = 0) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const T zero = from_double<T>(0.0);
  dq = Tensor<T>(q.shape, zero);
  dk = Tensor<T>(k.shape, zero);
  dv = Tensor<T>(v.shape, zero);
  dg = g ? Tensor<T>(g->shape, zero) : Tensor<T>();
  dh0 = dht ? *dht : Tensor<T>({B, H, K, V}, zero);
  const std::vector<T> zeros(static_cast<std::size_t>(K) * V, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_sequence_backward<T>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                                        g ? seq(*g, b, h) : SeqView<const T>{nullptr, 0, 0}, len, K, V, scale,
                                        h0 ? state_block(*h0, b, h) : zeros.data(), seq(do_, b, h),
                                        state_block(dh0, b, h), seq(dq, b, h), seq(dk, b, h), seq(dv, b, h),
                                        g ? seq(dg, b, h) : SeqView<T>{nullptr, 0, 0}, checkpoint_every);
}

}  // namespace ttr
