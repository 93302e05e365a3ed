// The delta core's adjoint (delta_backward.hpp) in fewer operations, for the
// high-precision oracle tiers (scalar.hpp: reorders_for_speed): 10 operations per
// state element and token instead of 13, the same gradients to the tier's precision.
//
// The decay is kept out of the states. The forward state is held as S = Diag(c) S′
// and the adjoint as dS = Diag(e) dS′, with one scalar per key row (c, e). A decay
// S̄ = D S then multiplies c (K operations instead of K·V), and the row factors move
// onto the K-vectors that meet the state (⊙, ⊘: elementwise):
//   read-back    u = S̄ᵀ k                → u = S̄′ᵀ (c ⊙ k)
//   write        S = S̄ + w δᵀ            → S′ += (w ⊘ c) δᵀ
//   readout      dq = scale·S do          → dq = scale·c ⊙ (S′ do)
//   adjoint read dS += q̂ doᵀ             → dS′ += (q̂ ⊘ e) doᵀ
//   write        dw = dS δ, dδ = dSᵀ w    → dw = e ⊙ (dS′ δ), dδ = dS′ᵀ (e ⊙ w)
//   read-back    dS̄ = dS + k duᵀ, dk = S̄ du → dS′ += (k ⊘ e) duᵀ, dk = c̄ ⊙ (S̄′ du)
//   decay        dg_i = Σ_j dS̄_ij S̄_ij    → dg_i = e_i c̄_i Σ_j dS′_ij S̄′_ij
//                dS ← D dS̄                → e ← d ⊙ e
// (derivation of each line: delta_backward.hpp's header). Since the decay touches
// only c, S̄′_t = S′_{t−1}: the re-step writes S′_t = S̄′_t + (w ⊘ c) δᵀ into the
// next token's slot with one fused operation (mul_add_into) instead of copying S̄_t
// and writing over the copy. Per state element and token: forward sweep 3
// (read-back, write, readout), re-step 1 (on T − C tokens), adjoint 6: 10, against
// the definition's layout 4 + 2 + 7 = 13 (the forward has 4).
//
// Range. c and e are products of up to T decays (e^{g}, g ≤ 0 drives them to 0).
// Whenever a product would leave [2^-256, 2^256] its row takes the factor back
// (S′_i ← d_i·(c_i·S′_i), c_i = 1; likewise e and dS′), so S′ and dS′ stay within
// 2^256 of the states they stand for and the vectors w ⊘ c, q̂ ⊘ e stay finite in
// any tier with at least double's exponent range. The decisions depend on c and e
// alone, so a re-step from a checkpoint (S′ and c are checkpointed together)
// repeats them, and the gradients are bit for bit the same for every spacing C
// (tests/backward/delta_backward_scaled_test.cpp).
//
// Each value is rounded differently from the definition's layout (c ⊙ k, w ⊘ c, the
// products of the decays: one or two roundings more per row, none per element), so
// the gradients agree with it to the tier's precision, not bit for bit; this layout
// therefore serves only the tiers where the order of operations is not the object
// (MPFR, MPFI): never a low-precision sequential form (the definition, rounded op by
// op), the Monte Carlo model (it mirrors a kernel's operations), or float64 and
// double-double, whose pair estimates the dd tier's error only when both run the
// same operations (docs/oracle-tiers.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/family/delta.hpp"
#include "reference/family/delta_grads.hpp"

namespace ttr {

namespace delta_scaled {

// Whether a row factor may stay apart from its row: |x| in [2^-256, 2^256].
template <class T>
bool within_range(const T& x) {
  const double a = std::fabs(to_double(x));
  return a >= 0x1p-256 && a <= 0x1p256;
}

// Row i of the state X (V values) stands for f·X_i; apply the decay d to it: f ← f·d,
// or, out of range, fold f and d into the row (f·X_i·d, rounded as the definition
// rounds X_i·d after f) and restart f at 1.
template <class T>
void decay_row(T* Xi, int V, T& f, const T& d, const T& one) {
  T p = f * d;
  if (within_range(p)) {
    f = std::move(p);
    return;
  }
  for (int j = 0; j < V; ++j) {
    scale_by(Xi[j], f);
    scale_by(Xi[j], d);
  }
  f = one;
}

}  // namespace delta_scaled

// One (batch, head) sequence, as delta_sequence_backward (same arguments, same
// results to the tier's precision). s.decay must not be Decay::none (nothing to
// move out of the states then; the caller runs the definition's layout).
template <class T>
void delta_sequence_backward_scaled(const DeltaSequence<T>& s, std::int64_t len, int K, int V, const T& scale,
                                    const T* S0, SeqView<const T> do_, T* dS, const DeltaGradSequence<T>& gr,
                                    std::int64_t checkpoint_every = 0) {
  using delta_scaled::decay_row;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t C = checkpoint_spacing(len, checkpoint_every);
  const std::int64_t segments = (len + C - 1) / C;
  const std::int64_t last0 = (segments - 1) * C;
  const std::size_t n_ckpt = static_cast<std::size_t>(std::max<std::int64_t>(segments - 1, 0));
  std::vector<T> d(K, one), u(V), ddelta(V), du(V), kv(K);
  std::vector<T> rs(static_cast<std::size_t>(len) * V), deltas(static_cast<std::size_t>(len) * V);
  // Checkpoints: S′ and c before every C-th token. Slots: S̄′_t and c̄_t of the
  // segment at hand.
  std::vector<T> ck_S(n_ckpt * KV), ck_c(n_ckpt * static_cast<std::size_t>(K));
  std::vector<T> slots(static_cast<std::size_t>(C) * KV), cbar(static_cast<std::size_t>(C) * K);
  std::vector<T> S(S0, S0 + KV), c(K, one);
  T acc = zero, acc2 = zero;

  // Forward sweep: decay (c only), read-back, write and readout (dq) per token.
  for (std::int64_t t = 0; t < len; ++t) {
    if (t % C == 0 && t < last0) {
      std::copy(S.begin(), S.end(), ck_S.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
      std::copy(c.begin(), c.end(), ck_c.begin() + static_cast<std::ptrdiff_t>(t / C * K));
    }
    decay_factors(s.decay, s.g, t, K, d);
    for (int i = 0; i < K; ++i) decay_row(S.data() + static_cast<std::ptrdiff_t>(i) * V, V, c[i], d[i], one);
    if (t >= last0) {  // the last segment's S̄′_t and c̄_t, kept (no re-step for it)
      std::copy(S.begin(), S.end(), slots.begin() + static_cast<std::ptrdiff_t>((t - last0) * KV));
      std::copy(c.begin(), c.end(), cbar.begin() + static_cast<std::ptrdiff_t>((t - last0) * K));
    }
    const T* kt = s.k.row(t);
    const T* wt = s.w.row(t);
    const T* vt = s.v.row(t);
    const T* dot_ = do_.row(t);
    for (int i = 0; i < K; ++i) kv[i] = kt[i] * c[i];
    for (int j = 0; j < V; ++j) u[j] = zero;
    for (int i = 0; i < K; ++i) {
      const T* Si = S.data() + static_cast<std::ptrdiff_t>(i) * V;
      for (int j = 0; j < V; ++j) mul_add_to(u[j], kv[i], Si[j]);
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
      const T wc = wt[i] / c[i];
      acc = zero;
      for (int j = 0; j < V; ++j) {
        mul_add_to(Si[j], wc, delta[j]);
        mul_add_to(acc, Si[j], dot_[j]);
      }
      gr.dq.row(t)[i] = scale * (c[i] * acc);
    }
  }

  // Backward sweep, segment by segment; dS is dS′ with e = 1 on entry.
  std::vector<T> e(K, one);
  for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
    const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
    if (seg < segments - 1) {  // re-step from the checkpoint: decay c, write into the next slot
      std::copy(ck_S.begin() + static_cast<std::ptrdiff_t>(seg * KV),
                ck_S.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), slots.begin());
      std::copy(ck_c.begin() + static_cast<std::ptrdiff_t>(seg * K),
                ck_c.begin() + static_cast<std::ptrdiff_t>((seg + 1) * K), c.begin());
      for (std::int64_t t = t0; t < t1; ++t) {
        T* Sb = slots.data() + (t - t0) * KV;
        decay_factors(s.decay, s.g, t, K, d);
        for (int i = 0; i < K; ++i) decay_row(Sb + static_cast<std::ptrdiff_t>(i) * V, V, c[i], d[i], one);
        std::copy(c.begin(), c.end(), cbar.begin() + static_cast<std::ptrdiff_t>((t - t0) * K));
        if (t + 1 == t1) break;  // S′_t is needed only as the next token's S̄′
        T* Sn = Sb + KV;
        const T* wt = s.w.row(t);
        const T* delta = deltas.data() + t * V;
        for (int i = 0; i < K; ++i) {
          const T wc = wt[i] / c[i];
          const std::size_t row = static_cast<std::size_t>(i) * V;
          for (int j = 0; j < V; ++j) mul_add_into(Sn[row + j], wc, delta[j], Sb[row + j]);
        }
      }
    }
    for (std::int64_t t = t1 - 1; t >= t0; --t) {
      decay_factors(s.decay, s.g, t, K, d);
      const T* Sbar = slots.data() + (t - t0) * KV;
      const T* cb = cbar.data() + (t - t0) * K;
      const T* qt = s.q.row(t);
      const T* kt = s.k.row(t);
      const T* wt = s.w.row(t);
      const T* dot_ = do_.row(t);
      const T* r = rs.data() + t * V;
      const T* delta = deltas.data() + t * V;
      const T& b = s.beta.at(t);
      for (int j = 0; j < V; ++j) ddelta[j] = zero;
      // Sweep 1: the read dS′ += (q̂ ⊘ e) doᵀ; the write dw = e ⊙ (dS′ δ), dδ = dS′ᵀ (e ⊙ w).
      for (int i = 0; i < K; ++i) {
        const T qe = (scale * qt[i]) / e[i];
        const T we = wt[i] * e[i];
        acc2 = zero;
        for (int j = 0; j < V; ++j) {
          T& gij = dS[static_cast<std::size_t>(i) * V + j];
          mul_add_to(gij, qe, dot_[j]);
          mul_add_to(acc2, gij, delta[j]);
          mul_add_to(ddelta[j], we, gij);
        }
        gr.dw.row(t)[i] = e[i] * acc2;
      }
      T db = zero;
      for (int j = 0; j < V; ++j) {
        mul_add_to(db, ddelta[j], r[j]);
        gr.dv.row(t)[j] = b * ddelta[j];
        du[j] = -(b * ddelta[j]);
      }
      gr.dbeta.at(t) = db;
      // Sweep 2: the read-back (dS′ += (k ⊘ e) duᵀ, dk = c̄ ⊙ (S̄′ du)) and the decay
      // (dg_i = e_i c̄_i Σ_j dS′_ij S̄′_ij, e ← d ⊙ e).
      T dg_scalar = zero;
      for (int i = 0; i < K; ++i) {
        const T ke = kt[i] / e[i];
        acc = zero;
        acc2 = zero;
        const std::size_t row = static_cast<std::size_t>(i) * V;
        for (int j = 0; j < V; ++j) {
          mul_add_to(acc, Sbar[row + j], du[j]);
          mul_add_to(dS[row + j], ke, du[j]);
          mul_add_to(acc2, dS[row + j], Sbar[row + j]);
        }
        gr.dk.row(t)[i] = cb[i] * acc;
        const T dgi = (e[i] * cb[i]) * acc2;
        if (s.decay == Decay::per_key) gr.dg.row(t)[i] = dgi;
        else dg_scalar += dgi;
        decay_row(dS + row, V, e[i], d[i], one);
      }
      if (s.decay == Decay::scalar) gr.dg.at(t) = dg_scalar;
    }
  }
  for (int i = 0; i < K; ++i)  // dh0 = Diag(e) dS′
    for (int j = 0; j < V; ++j) scale_by(dS[static_cast<std::size_t>(i) * V + j], e[i]);
}

}  // namespace ttr
