// kla_kalman backward on the GPU: reverse mode of the scaled chunked scans
// (scan.cu), the algorithm of the CPU `chunk` backward form,
// reference/kla_kalman/scan_backward.hpp, whose header derives every line below
// (KLA-K Thm 1/2, eqs. (16)-(20), Cor. 1.1/2.1; moment coordinates P = 1/Λ,
// μ = η/Λ, reference/kla_kalman/backward.hpp). Chunks of 64 tokens, a thread per
// state slot (n, d) in every scan stage, as the forward:
//
//   1–4. forward_carries (scan_stages.cuh): the forward's Möbius and affine chunk
//        carries.
//   5.  states          (chunks × B·H × slot tiles): the forward walk over the
//        chunk (Λ_t, η_t from the carries, as the forward kernel), then per token
//        r_t = (Λ_{t−1}/c_t)/Λ_t, P_t = 1/Λ_t, P_{t−1}, μ_t, μ_{t−1} and the
//        innovation ν_t = v − k ā μ_{t−1}; at t = T the terminal values
//        G^μ_{T+} = Λ_T dη_T, G^P_{T+} = −Λ_T(Λ_T dΛ_T + η_T dη_T).
//   6.  mean_aggregates (chunks × B·H × slot tiles): the chunk's reversed
//        composition of the mean-adjoint pairs (ā r_{t+1}, scale·do_t q_t).
//   7.  carries<Affine> over the reversed chunk order (the workspace holds the
//        adjoint's chunks reversed, so scan_stages.cuh's left-to-right carry scan
//        serves): chunk c's carry-in is the composition of chunks T/C−1 … c+1.
//   8.  mean_adjoint    G^μ_t = (carry ∘ local_t)(G^μ_{T+}) for every token.
//   9.  prec_aggregates the precision-adjoint pairs (ā² r_{t+1}², ā² r²_{t+1} k λv
//        ν_{t+1} G^μ_{t+1} + scale²·do_var_t q_t²), reversed, per chunk.
//   10. carries<Affine> as 7.
//   11. prec_adjoint    G^P_t for every token; then, t ascending, the chunk's
//        partial sums of dā and dp̄ per slot, and at t = 0 dlambda_init, deta_init.
//   12. grads_qk        (chunks × B·H × (token, n) tiles): dq_n, dk_n summed over d
//        ascending (dq in fp32, dk scaled).
//   13. grads_v         (chunks × B·H × (token, d) tiles): dv_d, dλv_d over n ascending.
//   14. reduce_params   (H × slot tiles): dā, dp̄ summed over the batch rows and
//        chunks in order, scaled, rounded into fp32 once.
//
// Arithmetic: the CPU form's policy. q, k, v, do, do_var in the dtype; λv, ā, p̄,
// the states and final-state cotangents fp32; every quantity of both adjoint scans
// and every gradient term a scaled number (scaled.cuh: fp32 mantissa, int32
// exponent), so that nothing overflows where the gradients are finite (with
// p̄ = 0 the terminal values Λ_T η_T dη_T, Λ_T² dΛ_T exceed fp32 while the
// gradients do not; scan_backward.hpp "Why the backward is scaled too");
// narrowed to the dtype: the additive part's mantissa of every stored adjoint
// aggregate and carry, dq, dk, dv. The per-token quantities live in a workspace
// (~52 bytes per token and slot): the stages read them instead of re-walking
// the forward. Bracketings that differ from the CPU form (the carries left to
// right instead of Blelloch's tree; a chunk's first Λ_{t−1}, η_{t−1} from the
// carry, as the forward kernel takes them; dā, dp̄ summed per chunk, then over
// chunks and batch rows) are rounding differences the form's error model covers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/kla_kalman/mobius.cuh"
#include "gpu/kla_kalman/scan_stages.cuh"

namespace ttr::gpu {
namespace {

using kla::Affine;
using kla::kChunk;
using kla::kSlots;
using kla::lift;
using kla::load_slot;
using kla::Mobius;
using kla::Sf;
using kla::Shape;
using kla::Slot;
using kla::SlotWalk;
using kla::tiles;

// The per-token workspace, [b·H + h][t][n·D + d] each, and the per-slot terminal values.
struct Tokens {
  Sf *r, *Pt, *Pp, *Gmu, *GP;
  float *mu, *mu_p, *nu;
  Sf *GmuT, *GPT;  // [b·H + h][n·D + d]
  __device__ std::int64_t at(const Shape& s, int bh, int t, int slot) const {
    return (static_cast<std::int64_t>(bh) * s.T + t) * (s.N * s.D) + slot;
  }
};

__device__ inline Sf negated(Sf x) { return {-x.m, x.e}; }
__device__ inline Sf one() { return kla::normalised(1.0f); }
__device__ inline Sf zero() { return {0.0f, 0}; }

// fp32 products rounded one at a time (the CPU form's scale_by chains; no contraction).
__device__ inline float mul(float x, float y) { return __fmul_rn(x, y); }

// Stage 5.
template <class E>
__global__ void __launch_bounds__(kSlots) states(Shape s, KlaBackwardArgs a, const Mobius<Sf>* __restrict__ cm_all,
                                                 const Affine<Sf>* __restrict__ ca_all, Tokens w) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const KlaArgs& f = a.fwd;
  const int n = slot / s.D, d = slot % s.D, b = bh / s.H, h = bh % s.H, len = s.len(b);
  const int t0 = c * kChunk, t1 = min(len, t0 + kChunk);
  if (t0 >= t1) return;  // past this sequence's end (varlen)
  const auto* k = static_cast<const E*>(f.k);
  const auto* v = static_cast<const E*>(f.v);
  const Mobius<Sf> cm = cm_all[s.ws(bh, c, n, d)];
  const Affine<Sf> ca = ca_all[s.ws(bh, c, n, d)];
  const Slot<Sf> x = load_slot<Sf>(s, f.a_bar, f.p_bar, f.lambda_init, f.eta_init, f.lambda0, bh, n, d);
  SlotWalk<Sf> walk(x, c > 0 ? &cm : nullptr, c > 0 ? &ca : nullptr);
  Sf lam_prev = walk.lam_prev;
  Sf eta_prev = c > 0 ? kla::mul_add(ca.A, x.eta0, ca.B) : x.eta0;
  const float abar = f.a_bar[(static_cast<std::int64_t>(h) * s.N + n) * s.D + d];
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h);
    const float kn = Elem<E>::to_float(k[r * s.N + n]), vd = Elem<E>::to_float(v[r * s.D + d]);
    Sf eta;
    const Sf lam = walk.step(t == t0, lift<Sf>(kn), lift<Sf>(f.lambda_v[r * s.D + d]), lift<Sf>(vd), eta);
    const std::int64_t i = w.at(s, bh, t, slot);
    const Sf cden = kla::mul_add(x.p, lam_prev, x.a2);  // c_t = ā² + p̄Λ_{t−1}
    w.r[i] = (lam_prev / cden) / lam;
    w.Pt[i] = one() / lam;
    w.Pp[i] = one() / lam_prev;
    w.mu[i] = kla::value(eta / lam);
    const float mu_p = kla::value(eta_prev / lam_prev);
    w.mu_p[i] = mu_p;
    w.nu[i] = __fsub_rn(vd, mul(mul(kn, abar), mu_p));  // ν_t = v − k ā μ_{t−1}
    if (t == len - 1) {  // terminal values in moment coordinates
      const std::int64_t fs = static_cast<std::int64_t>(bh) * s.N * s.D + slot;
      const Sf dE = a.deta_T ? lift<Sf>(a.deta_T[fs]) : zero();
      const Sf dL = a.dlambda_T ? lift<Sf>(a.dlambda_T[fs]) : zero();
      w.GmuT[fs] = lam * dE;
      w.GPT[fs] = negated(lam * ((lam * dL) + (eta * dE)));
    }
    lam_prev = lam;
    eta_prev = eta;
  }
}

// The mean-adjoint pair of token t: (ā r_{t+1}, scale·do_t q_t) (1 for the last token).
template <class E>
__device__ inline Affine<Sf> mean_pair(const Shape& s, const KlaBackwardArgs& a, const Tokens& w, Sf abar, int b,
                                       int bh, int h, int t, int n, int d, int slot) {
  const std::int64_t r = s.row(b, t, h);
  const float leaf = mul(mul(a.fwd.scale, Elem<E>::to_float(static_cast<const E*>(a.do_)[r * s.D + d])),
                         Elem<E>::to_float(static_cast<const E*>(a.fwd.q)[r * s.N + n]));
  return {t + 1 < s.len(b) ? abar * w.r[w.at(s, bh, t + 1, slot)] : one(), kla::normalised(leaf)};
}

// The precision-adjoint pair of token t, which reads G^μ_{t+1}.
template <class E>
__device__ inline Affine<Sf> prec_pair(const Shape& s, const KlaBackwardArgs& a, const Tokens& w, Sf abar, int b,
                                       int bh, int h, int t, int n, int d, int slot) {
  const std::int64_t r = s.row(b, t, h);
  float leaf = 0.0f;
  if (a.do_var) {
    const float qn = Elem<E>::to_float(static_cast<const E*>(a.fwd.q)[r * s.N + n]);
    const float scale2 = mul(a.fwd.scale, a.fwd.scale);
    leaf = mul(mul(mul(scale2, Elem<E>::to_float(static_cast<const E*>(a.do_var)[r * s.D + d])), qn), qn);
  }
  Affine<Sf> e{one(), kla::normalised(leaf)};
  if (t + 1 < s.len(b)) {
    const std::int64_t j = w.at(s, bh, t + 1, slot), r1 = s.row(b, t + 1, h);
    const Sf ar = abar * w.r[j];
    e.A = ar * ar;
    const float kln = mul(mul(Elem<E>::to_float(static_cast<const E*>(a.fwd.k)[r1 * s.N + n]),
                              a.fwd.lambda_v[r1 * s.D + d]),
                          w.nu[j]);
    e.B = kla::mul_add(e.A, lift<Sf>(kln) * w.Gmu[j], e.B);
  }
  return e;
}

// Stages 6 and 9 (Aggregate) and 8 and 11's walks: the chunk's tokens last to first,
// each pair composed onto the local reversed prefix; `visit(t, full)` receives the
// prefix with the carry-in composed on (the inclusive prefix of the reversed sequence).
template <bool Mean, class E, class Visit>
__device__ inline Affine<Sf> reversed_walk(const Shape& s, const KlaBackwardArgs& a, const Tokens& w, int c, int bh,
                                           int slot, const Affine<Sf>* carry, Visit&& visit) {
  const int n = slot / s.D, d = slot % s.D, b = bh / s.H, h = bh % s.H;
  const int t0 = c * kChunk, t1 = min(s.len(b), t0 + kChunk);
  const Sf abar = lift<Sf>(a.fwd.a_bar[(static_cast<std::int64_t>(h) * s.N + n) * s.D + d]);
  Affine<Sf> local{};
  for (int t = t1 - 1; t >= t0; --t) {
    const Affine<Sf> e = Mean ? mean_pair<E>(s, a, w, abar, b, bh, h, t, n, d, slot)
                              : prec_pair<E>(s, a, w, abar, b, bh, h, t, n, d, slot);
    local = t == t1 - 1 ? e : kla::compose(local, e);  // the later token is the earlier operand
    visit(t, carry ? kla::compose(*carry, local) : local);
  }
  return local;
}

// Stages 6 and 9: the reversed chunk aggregate, stored narrowed at the reversed chunk index.
template <bool Mean, class E>
__global__ void __launch_bounds__(kSlots) adjoint_aggregates(Shape s, KlaBackwardArgs a, Tokens w,
                                                             Affine<Sf>* __restrict__ agg) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  const int nb = s.nchunks(bh / s.H);  // this sequence's chunks (varlen), reversed below
  if (slot >= s.N * s.D || c >= nb) return;
  const Affine<Sf> local = reversed_walk<Mean, E>(s, a, w, c, bh, slot, nullptr, [](int, const Affine<Sf>&) {});
  agg[s.ws(bh, nb - 1 - c, slot / s.D, slot % s.D)] = kla::stored<E>(local);
}

// Stage 8: G^μ_t for every token of the chunk.
template <class E>
__global__ void __launch_bounds__(kSlots) mean_adjoint(Shape s, KlaBackwardArgs a, Tokens w,
                                                       const Affine<Sf>* __restrict__ carries) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  const int nb = s.nchunks(bh / s.H);
  if (slot >= s.N * s.D || c >= nb) return;
  const int cr = nb - 1 - c;
  const Affine<Sf> carry = carries[s.ws(bh, cr, slot / s.D, slot % s.D)];
  const Sf GT = w.GmuT[static_cast<std::int64_t>(bh) * s.N * s.D + slot];
  reversed_walk<true, E>(s, a, w, c, bh, slot, cr > 0 ? &carry : nullptr, [&](int t, const Affine<Sf>& full) {
    w.Gmu[w.at(s, bh, t, slot)] = kla::mul_add(full.A, GT, full.B);
  });
}

// Stage 11: G^P_t for every token; the chunk's partial dā, dp̄; dlambda_init, deta_init.
template <class E>
__global__ void __launch_bounds__(kSlots) prec_adjoint(Shape s, KlaBackwardArgs a, Tokens w,
                                                       const Affine<Sf>* __restrict__ carries, Sf* __restrict__ pda,
                                                       Sf* __restrict__ pdp) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D, b = bh / s.H, h = bh % s.H, nb = s.nchunks(b);
  const std::int64_t fs = static_cast<std::int64_t>(bh) * s.N * s.D + slot;
  if (nb == 0 && c == 0) {  // an empty sequence (varlen): Λ_T = Λ_0, η_T = η_0, the terminal values at once
    const Slot<Sf> x = load_slot<Sf>(s, a.fwd.a_bar, a.fwd.p_bar, a.fwd.lambda_init, a.fwd.eta_init, a.fwd.lambda0,
                                     bh, n, d);
    const Sf dE = a.deta_T ? lift<Sf>(a.deta_T[fs]) : zero(), dL = a.dlambda_T ? lift<Sf>(a.dlambda_T[fs]) : zero();
    const Sf Gmu0 = x.lam0 * dE, GP0 = negated(x.lam0 * ((x.lam0 * dL) + (x.eta0 * dE)));
    const Sf P0 = one() / x.lam0, mu0 = x.eta0 / x.lam0;
    if (a.dlambda_init) a.dlambda_init[fs] = kla::value(negated(P0 * ((P0 * GP0) + (mu0 * Gmu0))));
    if (a.deta_init) a.deta_init[fs] = kla::value(P0 * Gmu0);
  }
  if (c >= nb) return;  // past this sequence's end (varlen)
  const int cr = nb - 1 - c, t0 = c * kChunk, t1 = min(s.len(b), t0 + kChunk);
  const Affine<Sf> carry = carries[s.ws(bh, cr, n, d)];
  const Sf GT = w.GPT[fs];
  reversed_walk<false, E>(s, a, w, c, bh, slot, cr > 0 ? &carry : nullptr, [&](int t, const Affine<Sf>& full) {
    w.GP[w.at(s, bh, t, slot)] = kla::mul_add(full.A, GT, full.B);
  });
  // dā += r μ_{t−1} G^μ + 2ā P_{t−1} dP⁻_t,  dp̄ += dP⁻_t,  dP⁻_t = r²(G^P + k λv ν G^μ).
  const float abar = a.fwd.a_bar[(static_cast<std::int64_t>(h) * s.N + n) * s.D + d];
  const Sf two_a = kla::normalised(__fmul_rn(2.0f, abar));
  Sf da = zero(), dp = zero(), dPm0 = zero();
  for (int t = t0; t < t1; ++t) {
    const std::int64_t i = w.at(s, bh, t, slot), r = s.row(b, t, h);
    const float kln = mul(mul(Elem<E>::to_float(static_cast<const E*>(a.fwd.k)[r * s.N + n]),
                              a.fwd.lambda_v[r * s.D + d]),
                          w.nu[i]);
    const Sf dPm = (w.r[i] * w.r[i]) * (w.GP[i] + lift<Sf>(kln) * w.Gmu[i]);
    const float rmu = mul(kla::value(w.r[i]), w.mu_p[i]);
    da = da + lift<Sf>(rmu) * w.Gmu[i];
    da = da + two_a * (w.Pp[i] * dPm);
    dp = dp + dPm;
    if (t == 0) dPm0 = dPm;
  }
  pda[s.ws(bh, c, n, d)] = da;
  pdp[s.ws(bh, c, n, d)] = dp;
  if (c == 0 && (a.dlambda_init || a.deta_init)) {  // back to (Λ_0, η_0): G^μ_0 = ā r_1 G^μ_1, G^P_0 = ā² dP⁻_1
    const Slot<Sf> x = load_slot<Sf>(s, a.fwd.a_bar, a.fwd.p_bar, a.fwd.lambda_init, a.fwd.eta_init, a.fwd.lambda0,
                                     bh, n, d);
    const std::int64_t i = w.at(s, bh, 0, slot);
    const Sf Gmu0 = (x.a * w.r[i]) * w.Gmu[i];
    const Sf GP0 = x.a2 * dPm0;
    const Sf P0 = one() / x.lam0, mu0 = x.eta0 / x.lam0;
    if (a.dlambda_init) a.dlambda_init[fs] = kla::value(negated(P0 * ((P0 * GP0) + (mu0 * Gmu0))));
    if (a.deta_init) a.deta_init[fs] = kla::value(P0 * Gmu0);
  }
}

// Stage 12: a thread per (token, n): dq_n = Σ_d g μ_t (+ 2h q P_t), dk_n scaled, d ascending.
template <class E>
__global__ void __launch_bounds__(256) grads_qk(Shape s, KlaBackwardArgs a, Tokens w) {
  const int c = blockIdx.x, bh = blockIdx.y, task = blockIdx.z * 256 + threadIdx.x;
  const int t = c * kChunk + task / s.N, n = task % s.N;
  const int b = bh / s.H, h = bh % s.H;
  if (task >= kChunk * s.N || t >= s.len(b)) return;
  const KlaArgs& f = a.fwd;
  const std::int64_t r = s.row(b, t, h);
  const float qn = Elem<E>::to_float(static_cast<const E*>(f.q)[r * s.N + n]);
  const float kn = Elem<E>::to_float(static_cast<const E*>(f.k)[r * s.N + n]);
  const float scale2 = mul(f.scale, f.scale);
  float dq = 0.0f;
  Sf dk = zero();
  for (int d = 0; d < s.D; ++d) {
    const int slot = n * s.D + d;
    const std::int64_t i = w.at(s, bh, t, slot);
    const float lvd = f.lambda_v[r * s.D + d], vd = Elem<E>::to_float(static_cast<const E*>(f.v)[r * s.D + d]);
    const float rr = kla::value(w.r[i]);
    const float abar = f.a_bar[(static_cast<std::int64_t>(h) * s.N + n) * s.D + d];
    // dq_n += g μ_t + 2 h q_n P_t
    const float g = mul(f.scale, Elem<E>::to_float(static_cast<const E*>(a.do_)[r * s.D + d]));
    dq = __fadd_rn(dq, mul(g, w.mu[i]));
    if (a.do_var) {
      const float hh = mul(scale2, Elem<E>::to_float(static_cast<const E*>(a.do_var)[r * s.D + d]));
      dq = __fadd_rn(dq, mul(mul(mul(2.0f, hh), qn), kla::value(w.Pt[i])));
    }
    // dk_n += λv P_t (v (2r−1) − 2 r k ā μ_{t−1}) G^μ − 2 k λv P_t² G^P
    const float kam = mul(mul(kn, abar), w.mu_p[i]);
    const float two_r = mul(2.0f, rr);
    const float bracket = mul(__fsub_rn(mul(vd, __fsub_rn(two_r, 1.0f)), mul(two_r, kam)), lvd);
    const float klv = mul(kn, lvd);
    dk = dk + lift<Sf>(bracket) * (w.Pt[i] * w.Gmu[i]);
    dk = dk + negated(lift<Sf>(mul(2.0f, klv)) * ((w.Pt[i] * w.Pt[i]) * w.GP[i]));
  }
  static_cast<E*>(a.dq)[r * s.N + n] = Elem<E>::from_float(dq);
  static_cast<E*>(a.dk)[r * s.N + n] = Elem<E>::from_float(kla::value(dk));
}

// Stage 13: a thread per (token, d): dv_d = Σ_n k λv P_t G^μ, dλv_d = Σ_n (k r ν P_t G^μ − k² P_t² G^P).
template <class E>
__global__ void __launch_bounds__(256) grads_v(Shape s, KlaBackwardArgs a, Tokens w) {
  const int c = blockIdx.x, bh = blockIdx.y, task = blockIdx.z * 256 + threadIdx.x;
  const int t = c * kChunk + task / s.D, d = task % s.D;
  const int b = bh / s.H, h = bh % s.H;
  if (task >= kChunk * s.D || t >= s.len(b)) return;
  const KlaArgs& f = a.fwd;
  const std::int64_t r = s.row(b, t, h);
  const float lvd = f.lambda_v[r * s.D + d];
  Sf dv = zero(), dlv = zero();
  for (int n = 0; n < s.N; ++n) {
    const std::int64_t i = w.at(s, bh, t, n * s.D + d);
    const float kn = Elem<E>::to_float(static_cast<const E*>(f.k)[r * s.N + n]);
    const Sf PG = w.Pt[i] * w.Gmu[i];
    dv = dv + lift<Sf>(mul(kn, lvd)) * PG;
    dlv = dlv + lift<Sf>(mul(mul(kn, kla::value(w.r[i])), w.nu[i])) * PG;
    dlv = dlv + negated(lift<Sf>(mul(kn, kn)) * ((w.Pt[i] * w.Pt[i]) * w.GP[i]));
  }
  static_cast<E*>(a.dv)[r * s.D + d] = Elem<E>::from_float(kla::value(dv));
  a.dlambda_v[r * s.D + d] = kla::value(dlv);
}

// Stage 14: dā, dp̄ [H, N, D] over the batch rows and chunks, in order.
__global__ void __launch_bounds__(kSlots) reduce_params(Shape s, const Sf* __restrict__ pda,
                                                        const Sf* __restrict__ pdp, float* __restrict__ da_bar,
                                                        float* __restrict__ dp_bar) {
  const int h = blockIdx.x, slot = blockIdx.y * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  Sf da = zero(), dp = zero();
  for (int b = 0; b < s.B; ++b)  // batch rows, or the sequences of a varlen batch
    for (int c = 0; c < s.nchunks(b); ++c) {
      const std::int64_t i = s.ws(b * s.H + h, c, n, d);
      da = da + pda[i];
      dp = dp + pdp[i];
    }
  const std::int64_t hs = static_cast<std::int64_t>(h) * s.N * s.D + slot;
  da_bar[hs] = kla::value(da);
  dp_bar[hs] = kla::value(dp);
}

// One allocation, carved into 256-byte aligned pieces (base 0: only the size is taken).
struct Carver {
  std::uintptr_t base = 0;
  std::size_t used = 0;
  template <class T>
  T* take(std::size_t count) {
    T* p = reinterpret_cast<T*>(base + used);
    used += (count * sizeof(T) + 255) / 256 * 256;
    return p;
  }
};

template <class E>
void chunk_backward(const KlaBackwardArgs& a) {
  const Shape s = kla::shape_of(a.fwd);
  const auto stream = static_cast<cudaStream_t>(a.fwd.stream);
  const std::size_t slots = static_cast<std::size_t>(s.N) * s.D, heads = static_cast<std::size_t>(s.B) * s.H;
  const std::size_t per_chunk = heads * s.chunks * slots, per_token = heads * s.T * slots;
  // Sizes first (a carver on a null base), then one allocation.
  const auto carve = [&](Carver& cv, Mobius<Sf>*& wm, Affine<Sf>*& wa, Affine<Sf>*& wmean, Affine<Sf>*& wprec,
                         Sf*& pda, Sf*& pdp, Tokens& w) {
    wm = cv.take<Mobius<Sf>>(per_chunk);
    wa = cv.take<Affine<Sf>>(per_chunk);
    wmean = cv.take<Affine<Sf>>(per_chunk);
    wprec = cv.take<Affine<Sf>>(per_chunk);
    pda = cv.take<Sf>(per_chunk);
    pdp = cv.take<Sf>(per_chunk);
    w.r = cv.take<Sf>(per_token), w.Pt = cv.take<Sf>(per_token), w.Pp = cv.take<Sf>(per_token);
    w.Gmu = cv.take<Sf>(per_token), w.GP = cv.take<Sf>(per_token);
    w.mu = cv.take<float>(per_token), w.mu_p = cv.take<float>(per_token), w.nu = cv.take<float>(per_token);
    w.GmuT = cv.take<Sf>(heads * slots), w.GPT = cv.take<Sf>(heads * slots);
  };
  Mobius<Sf>* wm;
  Affine<Sf>*wa, *wmean, *wprec;
  Sf *pda, *pdp;
  Tokens w{};
  Carver sizer;
  carve(sizer, wm, wa, wmean, wprec, pda, pdp, w);
  unsigned char* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), sizer.used, stream));
  Carver cv{reinterpret_cast<std::uintptr_t>(ws)};
  carve(cv, wm, wa, wmean, wprec, pda, pdp, w);
  const dim3 slot_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(heads), tiles(s.N * s.D, kSlots));
  const dim3 carry_grid(static_cast<unsigned>(heads), tiles(s.N * s.D, kSlots));
  try {
    kla::forward_carries<E, Sf>(a.fwd, s, wm, wa, stream);
    states<E><<<slot_grid, kSlots, 0, stream>>>(s, a, wm, wa, w);
    TTR_CUDA_CHECK_LAUNCH("kla backward states");
    adjoint_aggregates<true, E><<<slot_grid, kSlots, 0, stream>>>(s, a, w, wmean);
    TTR_CUDA_CHECK_LAUNCH("kla backward mean_aggregates");
    kla::carries<E, Affine<Sf>><<<carry_grid, kSlots, 0, stream>>>(s, wmean);
    TTR_CUDA_CHECK_LAUNCH("kla backward carries<mean>");
    mean_adjoint<E><<<slot_grid, kSlots, 0, stream>>>(s, a, w, wmean);
    TTR_CUDA_CHECK_LAUNCH("kla backward mean_adjoint");
    adjoint_aggregates<false, E><<<slot_grid, kSlots, 0, stream>>>(s, a, w, wprec);
    TTR_CUDA_CHECK_LAUNCH("kla backward prec_aggregates");
    kla::carries<E, Affine<Sf>><<<carry_grid, kSlots, 0, stream>>>(s, wprec);
    TTR_CUDA_CHECK_LAUNCH("kla backward carries<prec>");
    prec_adjoint<E><<<slot_grid, kSlots, 0, stream>>>(s, a, w, wprec, pda, pdp);
    TTR_CUDA_CHECK_LAUNCH("kla backward prec_adjoint");
    const dim3 qk_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(heads), tiles(kChunk * s.N, 256));
    grads_qk<E><<<qk_grid, 256, 0, stream>>>(s, a, w);
    TTR_CUDA_CHECK_LAUNCH("kla backward grads_qk");
    const dim3 v_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(heads), tiles(kChunk * s.D, 256));
    grads_v<E><<<v_grid, 256, 0, stream>>>(s, a, w);
    TTR_CUDA_CHECK_LAUNCH("kla backward grads_v");
    const dim3 param_grid(static_cast<unsigned>(s.H), tiles(s.N * s.D, kSlots));
    reduce_params<<<param_grid, kSlots, 0, stream>>>(s, pda, pdp, a.da_bar, a.dp_bar);
    TTR_CUDA_CHECK_LAUNCH("kla backward reduce_params");
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
}

}  // namespace

void validate(const KlaBackwardArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu kla_kalman backward kernel: " + m); };
  const KlaArgs& f = a.fwd;
  if (f.B < 1 || f.T < 1 || f.H < 1) fail("B, T and H must be at least 1");
  if (f.N < 1 || f.N > 128) fail("N = " + std::to_string(f.N) + " (need 1 ≤ N ≤ 128)");
  if (f.D < 1) fail("D must be at least 1");
  if (!f.q || !f.k || !f.v || !f.lambda_v || !f.a_bar || !f.p_bar) fail("q, k, v, lambda_v, a_bar and p_bar are required");
  if (!a.do_) fail("the cotangent do is required");
  if (!a.dq || !a.dk || !a.dv || !a.dlambda_v || !a.da_bar || !a.dp_bar)
    fail("dq, dk, dv, dlambda_v, da_bar and dp_bar are required");
}

void kla_kalman_chunk_backward(const KlaBackwardArgs& a) {
  validate(a);
  if (a.fwd.dtype == DType::bf16) chunk_backward<__nv_bfloat16>(a);
  else chunk_backward<float>(a);
}

}  // namespace ttr::gpu