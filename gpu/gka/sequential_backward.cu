// Recurrent (fused-recurrent) backward of Gated KalmaNet, solver = chebyshev: the
// GPU's own reference for GKA's gradients, the adjoint of the recurrent forward
// (gpu/gka/sequential.cu) run token by token — reference/gka/backward.hpp with the
// Chebyshev solve differentiated by the reverse pass over its stored iterates
// (reference/gka/solve_backward.hpp, gka_chebyshev_unrolled_backward; GKA App. C.1
// eqs. (54)-(58), with the bounds L = ‖H_t‖_F + λ_t, μ = λ_t differentiated too).
//
// Adjoint step, t = T..1, carrying dS = ∂L/∂S_t and dH = ∂L/∂H_t (dht, dhkk at t = T):
//   dq̃ = S_t do,  dS += q̃ doᵀ;   dx = α dq̃,  dq̂ = (1 − α) dq̃,  dα = ⟨dq̃, x − q̂⟩   (α absent: dx = dq̃)
//   for i = r..1 (A = H_t + λI, c_i = 2ω_i/s, s = L + μ):
//     dq̂ += c_i dξ_i,  dH −= c_i dξ_i ξ_{i−1}ᵀ,  dλ −= c_i ⟨dξ_i, ξ_{i−1}⟩,
//     dξ_{i−1} += ω_i dξ_i − c_i Aᵀ dξ_i,  dξ_{i−2} −= (ω_i − 1) dξ_i                       (eq. (56))
//     dc_i = −⟨dξ_i, Aξ_{i−1} − q̂⟩,  dω_i += ⟨dξ_i, ξ_{i−1} − ξ_{i−2}⟩ + 2 dc_i/s,
//     ds −= dc_i c_i/s,  dω_{i−1} += dω_i ρ² ω_i²/4,  dρ² += dω_i ω_{i−1} ω_i²/4
//   dq̂ += c_0 dξ_0;  ds −= ⟨dξ_0, q̂⟩ c_0/s,  dρ = 2ρ dρ²,  ds −= dρ ρ/s,
//   d‖H‖_F += ds + dρ/s,  dλ += 2 ds                                    (dL = ds + dρ/s, dμ = ds − dρ/s)
//   λ = a‖H_t‖_F (eq. (4)): d‖H‖_F += a dλ;  dH += (d‖H‖_F/‖H_t‖_F) H_t  (‖H_t‖_F > 0)
//   dq = scale dq̂;  dγ = ⟨dH, H_{t−1}⟩ + ⟨dS, S_{t−1}⟩,  dw = kᵀdH k + kᵀdS v,
//   dk = w ((dH + dHᵀ) k + dS v),  dv = w dSᵀk,  dg = γ dγ,  dβ = dw;  dH ← γ dH,  dS ← γ dS.
// Where λ_t = 0 (H_t = 0 under the adaptive λ) the forward sets x = 0: nothing flows
// through the solve. dhkk0 is written as the symmetric part (G + Gᵀ)/2 of the
// general-matrix gradient G (hkk0 is a symmetric input; oracles/layers/gka.hpp).
//
// One block per (b, h), three phases in one launch, then a finishing launch:
//  1. a forward sweep from (hkk0, h0) storing (H, S) before every 64th token;
//  2. segments last to first: re-stepped from the checkpoint with the forward's
//     operations into a per-head workspace of the segment's 65 states (every
//     thread reads back only the elements it wrote: no barrier for the states),
//     then the adjoint step per token, H_t in shared memory (the re-run solve
//     and the adjoint apply H_t 2r times), dH and dS in shared memory, the
//     iterates ξ_{−1..r}, the products Aξ_{0..r−1} and ω_{0..r} in a per-head
//     workspace (global memory, read back by the adjoint pass);
//  3. finish (a warp per token row): dq, dk from fp32 to the dtype, through the
//     L2 norm's chain rule under use_qk_l2norm_in_kernel (delta_backward_finish.cuh).
// Every sum is taken in a fixed order (warp shuffles, then warps in order; no
// atomics): repeated runs are bit-identical.
//
// Arithmetic: q, k, v and do as stored (bf16 or fp32), everything else fp32; dq, dk,
// dv rounded once to the dtype, dg, dβ, dα, dh0, dhkk0 fp32 — a subset of the
// operations the sequential backward form's model perturbs (gate/kernel_checks.hpp).
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/launch.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"
#include "gpu/gka/backward_finish.cuh"

namespace ttr::gpu {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kSeg = 64;

// Per-head workspace (fp32), nseg = ⌈T/64⌉, r = iters, W = K² + K·V (H then S).
struct Work {
  float* ckpt;   // [BH][nseg][W]: (H, S) before tokens 0, 64, 128, …
  float* seg;    // [BH][65][W]: the segment's states, before its first token and after each
  float* xi;     // [BH][r + 2][K]: ξ_{−1} .. ξ_r of the token at hand
  float* ax;     // [BH][max(r, 1)][K]: A ξ_{i−1}, i = 1..r
  float* omega;  // [BH][r + 1]: ω_0 .. ω_r
  float* dq;     // [B,T,H,K]: scale·dq̂ (fp32, before the chain rule)
  float* dk;     // [B,T,H,K]
};

// The block's sum of one value per thread, returned to every thread: warps by
// shuffles, then the warps' sums in warp order (fixed: bit-identical reruns).
__device__ inline float block_sum(float x, float* red) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();  // red free (its last readers are past)
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  return s;
}

// (H, S) ← (γ H + β k kᵀ, γ S + β k vᵀ), elementwise, the recurrent forward's
// operations (gpu/gka/sequential.cu). Thread-owned elements (e ≡ threadIdx.x mod
// kThreads in both tensors): in and out may alias.
__device__ inline void step_states(const float* Hin, float* Hout, const float* kv, const float* vv, float gam,
                                   float bet, int K, int V) {
  const float* Sin = Hin + K * K;
  float* Sout = Hout + K * K;
  for (int e = threadIdx.x; e < K * K; e += kThreads) {
    const int i = e / K, j = e % K;
    Hout[e] = fmaf(bet * kv[i], kv[j], Hin[e] * gam);
  }
  for (int e = threadIdx.x; e < K * V; e += kThreads) {
    const int i = e / V, j = e % V;
    Sout[e] = fmaf(bet * kv[i], vv[j], Sin[e] * gam);
  }
}

struct Params {
  int B, T, H, K, V, iters;
  float scale, a, lambda, omega0;
  bool fixed;
  const std::int64_t* cu;  // varlen offsets (gpu/core/seqs.cuh), or nullptr; T then the longest sequence
};

template <class E>
__global__ void __launch_bounds__(kThreads, 1) backward_kernel(Params p, const E* __restrict__ q,
                                                             const E* __restrict__ k, const E* __restrict__ v,
                                                             const float* __restrict__ g,
                                                             const float* __restrict__ beta,
                                                             const float* __restrict__ alpha, const float* hkk0,
                                                             const float* h0, const E* __restrict__ do_,
                                                             const float* dht, const float* dhkk, E* __restrict__ dv,
                                                             float* dg, float* dbeta, float* dalpha, float* dh0,
                                                             float* dhkk0, Work work) {
  extern __shared__ __align__(16) float sm[];
  const int K = p.K, V = p.V, r = p.iters, bh = blockIdx.x, b = bh / p.H, h = bh % p.H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int W = K * K + K * V, nseg = (p.T + kSeg - 1) / kSeg;
  float* Hs = sm;            // K×K: H_t
  float* dH = Hs + K * K;    // K×K
  float* dS = dH + K * K;    // K×V
  float* kv = dS + K * V;    // k_t
  float* vv = kv + K;        // v_t
  float* dov = vv + V;       // do_t
  float* sq = dov + V;       // q̂ = scale·q_t
  float* qt = sq + K;        // q̃
  float* dqt = qt + K;       // dq̃
  float* dsq = dqt + K;      // dq̂
  float* dx = dsq + K;       // dx (then dξ_r)
  float* tmp = dx + K;       // Aᵀ dξ_i
  float* xm1 = tmp + K;      // ξ_{i−1}
  float* xm2 = xm1 + K;      // ξ_{i−2}
  float* axm1 = xm2 + K;     // A ξ_{i−1}
  float* dxi = axm1 + K;     // dξ: three rotating K-vectors
  float* acc = dxi + 3 * K;  // (dH + dHᵀ) k, then + dS v
  float* red = acc + K;      // kWarps partial sums
  float* sc = red + kWarps;  // γ, β, α

  float* ckpt = work.ckpt + static_cast<std::int64_t>(bh) * nseg * W;
  float* seg = work.seg + static_cast<std::int64_t>(bh) * (kSeg + 1) * W;
  float* xig = work.xi + static_cast<std::int64_t>(bh) * (r + 2) * K;  // row i + 1: ξ_i
  float* axg = work.ax + static_cast<std::int64_t>(bh) * (r > 0 ? r : 1) * K;
  float* omg = work.omega + static_cast<std::int64_t>(bh) * (r + 1);
  const std::int64_t hbase = static_cast<std::int64_t>(bh) * K * K, sbase = static_cast<std::int64_t>(bh) * K * V;
  const std::int64_t first = seq_start(p.cu, b, p.T);  // sequence b's tokens (varlen)
  const int len = seq_len(p.cu, b, p.T);
  auto token_row = [&](int t) { return (first + t) * p.H + h; };
  // k_t, v_t, γ_t, β_t, α_t into shared memory (the caller synchronises).
  auto load_token = [&](int t) {
    const std::int64_t row = token_row(t);
    for (int i = threadIdx.x; i < K; i += kThreads) kv[i] = Elem<E>::to_float(k[row * K + i]);
    for (int j = threadIdx.x; j < V; j += kThreads) vv[j] = Elem<E>::to_float(v[row * V + j]);
    if (threadIdx.x == 0) {
      sc[0] = expf(g[row]);
      sc[1] = beta ? beta[row] : 1.0f;
      sc[2] = alpha ? alpha[row] : 0.0f;
    }
  };

  // ---- 1. forward sweep: checkpoints (the running state in seg's first slot)
  for (int e = threadIdx.x; e < K * K; e += kThreads) seg[e] = hkk0 ? hkk0[hbase + e] : 0.0f;
  for (int e = threadIdx.x; e < K * V; e += kThreads) seg[K * K + e] = h0 ? h0[sbase + e] : 0.0f;
  for (int t = 0; t < len; ++t) {
    if (t % kSeg == 0) {
      float* c = ckpt + static_cast<std::int64_t>(t / kSeg) * W;
      for (int e = threadIdx.x; e < K * K; e += kThreads) c[e] = seg[e];
      for (int e = threadIdx.x; e < K * V; e += kThreads) c[K * K + e] = seg[K * K + e];
    }
    load_token(t);
    __syncthreads();
    step_states(seg, seg, kv, vv, sc[0], sc[1], K, V);
    __syncthreads();  // kv, vv, sc are rewritten next token
  }

  // ---- 2. the adjoint, segment by segment from the last
  for (int e = threadIdx.x; e < K * K; e += kThreads) dH[e] = dhkk ? dhkk[hbase + e] : 0.0f;
  for (int e = threadIdx.x; e < K * V; e += kThreads) dS[e] = dht ? dht[sbase + e] : 0.0f;
  for (int sg = nseg - 1; sg >= 0; --sg) {
    const int t0 = sg * kSeg, t1 = min(len, t0 + kSeg);
    if (t0 >= len) continue;  // past this sequence's end (varlen): no checkpoint there
    {
      const float* c = ckpt + static_cast<std::int64_t>(sg) * W;
      for (int e = threadIdx.x; e < K * K; e += kThreads) seg[e] = c[e];
      for (int e = threadIdx.x; e < K * V; e += kThreads) seg[K * K + e] = c[K * K + e];
    }
    for (int t = t0; t < t1; ++t) {
      load_token(t);
      __syncthreads();
      step_states(seg + static_cast<std::int64_t>(t - t0) * W, seg + static_cast<std::int64_t>(t - t0 + 1) * W, kv,
                  vv, sc[0], sc[1], K, V);
      __syncthreads();
    }
    for (int t = t1 - 1; t >= t0; --t) {
      const std::int64_t row = token_row(t);
      const float* Ht = seg + static_cast<std::int64_t>(t - t0 + 1) * W;  // (H_t, S_t)
      const float* Hp = seg + static_cast<std::int64_t>(t - t0) * W;      // (H_{t−1}, S_{t−1})
      const float* St = Ht + K * K;
      load_token(t);
      for (int i = threadIdx.x; i < K; i += kThreads) sq[i] = p.scale * Elem<E>::to_float(q[row * K + i]);
      for (int j = threadIdx.x; j < V; j += kThreads) dov[j] = Elem<E>::to_float(do_[row * V + j]);
      float part = 0.0f;
      for (int e = threadIdx.x; e < K * K; e += kThreads) {
        const float x = Ht[e];
        Hs[e] = x;
        part = fmaf(x, x, part);
      }
      // ‖H_t‖_F and λ_t (block_sum synchronises: Hs, the vectors and sc visible after it).
      const float fro = sqrtf(block_sum(part, red));
      const float lam = p.fixed ? p.lambda : p.a * fro;
      const bool live = lam != 0.0f;
      const float gam = sc[0], w = sc[1], al = sc[2];
      const float L = fro + lam, mu = lam, s = L + mu, rho = (L - mu) / s, rho2 = rho * rho, c0 = 2.0f / s;
      // Alg. 1 with its iterates stored: ξ_{−1} = 0, ξ_0 = c_0 q̂, then r steps.
      for (int i = threadIdx.x; i < K; i += kThreads) {
        xig[i] = 0.0f;
        xig[K + i] = live ? c0 * sq[i] : 0.0f;
      }
      if (threadIdx.x == 0) omg[0] = p.omega0;
      __syncthreads();
      float omega = p.omega0;
      for (int it = 1; live && it <= r; ++it) {
        const float wi = 4.0f / (4.0f - rho2 * omega);  // ω_i = 4/(4 − ρ²ω_{i−1})
        omega = wi;
        const float ci = 2.0f * wi / s;
        const float* x = xig + static_cast<std::int64_t>(it) * K;  // ξ_{i−1}
        const float* xp = x - K;                                   // ξ_{i−2}
        float* xn = xig + static_cast<std::int64_t>(it + 1) * K;   // ξ_i
        for (int i = warp; i < K; i += kWarps) {
          float a = 0.0f;
          for (int j = lane; j < K; j += 32) a = fmaf(Hs[i * K + j], x[j], a);
          for (int o = 16; o > 0; o /= 2) a += __shfl_xor_sync(0xffffffffu, a, o);
          if (lane == 0) {
            const float ax = fmaf(lam, x[i], a);
            axg[static_cast<std::int64_t>(it - 1) * K + i] = ax;
            xn[i] = fmaf(wi - 1.0f, x[i] - xp[i], fmaf(-ci, ax - sq[i], x[i]));  // step + momentum
          }
        }
        if (threadIdx.x == 0) omg[it] = wi;
        __syncthreads();
      }
      // q̃ and the readout's adjoint: dq̃ = S_t do, dS += q̃ doᵀ.
      const float* xr = xig + static_cast<std::int64_t>(r + 1) * K;  // ξ_r (0 where not live)
      for (int i = threadIdx.x; i < K; i += kThreads) {
        const float x = live ? xr[i] : 0.0f;
        qt[i] = alpha ? fmaf(al, x - sq[i], sq[i]) : x;
      }
      for (int i = warp; i < K; i += kWarps) {
        float a = 0.0f;
        for (int j = lane; j < V; j += 32) a = fmaf(St[i * V + j], dov[j], a);
        for (int o = 16; o > 0; o /= 2) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) dqt[i] = a;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < K * V; e += kThreads) dS[e] = fmaf(qt[e / V], dov[e % V], dS[e]);
      // The α-connection.
      float pa = 0.0f;
      for (int i = threadIdx.x; i < K; i += kThreads) {
        const float x = live ? xr[i] : 0.0f;
        dx[i] = alpha ? al * dqt[i] : dqt[i];
        dsq[i] = alpha ? (1.0f - al) * dqt[i] : 0.0f;
        pa = fmaf(dqt[i], x - sq[i], pa);
      }
      const float da = block_sum(pa, red);
      if (alpha && threadIdx.x == 0) dalpha[row] = da;
      // The solve's adjoint (the reverse pass over the stored iterates).
      float dlam = 0.0f, dfro = 0.0f;
      if (live) {
        auto buf = [&](int i) { return dxi + ((i + 3) % 3) * K; };  // dξ_i, i ≥ −1
        for (int i = threadIdx.x; i < K; i += kThreads) {
          buf(r)[i] = dx[i];
          buf(r - 1)[i] = 0.0f;
          buf(r - 2)[i] = 0.0f;
        }
        float ds = 0.0f, drho2 = 0.0f, domega = 0.0f;  // domega: dω_i carried from step i + 1
        for (int it = r; it >= 1; --it) {
          for (int i = threadIdx.x; i < K; i += kThreads) {
            xm1[i] = xig[static_cast<std::int64_t>(it) * K + i];
            xm2[i] = xig[static_cast<std::int64_t>(it - 1) * K + i];
            axm1[i] = axg[static_cast<std::int64_t>(it - 1) * K + i];
          }
          __syncthreads();  // xm1, xm2, axm1 and dξ_i complete
          const float wi = omg[it], wprev = omg[it - 1], ci = 2.0f * wi / s;
          float* di = buf(it);
          float* dm1 = buf(it - 1);
          float* dm2 = buf(it - 2);
          // Aᵀ dξ_i (thread per column: H_t read down its columns) and the three dots.
          float p_c = 0.0f, p_w = 0.0f, p_l = 0.0f;
          for (int j = threadIdx.x; j < K; j += kThreads) {
            float y = lam * di[j];
            for (int l = 0; l < K; ++l) y = fmaf(Hs[l * K + j], di[l], y);
            tmp[j] = y;
            p_c = fmaf(-di[j], axm1[j] - sq[j], p_c);
            p_w = fmaf(di[j], xm1[j] - xm2[j], p_w);
            p_l = fmaf(di[j], xm1[j], p_l);
          }
          const float dci = block_sum(p_c, red), dw_dot = block_sum(p_w, red), dl_dot = block_sum(p_l, red);
          for (int j = threadIdx.x; j < K; j += kThreads) {
            dsq[j] = fmaf(ci, di[j], dsq[j]);
            dm1[j] += wi * di[j] - ci * tmp[j];
            dm2[j] -= (wi - 1.0f) * di[j];
          }
          for (int e = threadIdx.x; e < K * K; e += kThreads) dH[e] = fmaf(-(ci * di[e / K]), xm1[e % K], dH[e]);
          dlam -= ci * dl_dot;
          float dwi = domega + dw_dot;
          dwi += 2.0f * dci / s;
          ds -= dci * ci / s;
          const float w2 = wi * wi;
          domega = dwi * rho2 * w2 / 4.0f;
          drho2 += dwi * wprev * w2 / 4.0f;
          __syncthreads();  // dξ_i, xm1 read by everyone: dξ_i's buffer becomes dξ_{i−3}
          for (int i = threadIdx.x; i < K; i += kThreads) di[i] = 0.0f;
        }
        // dξ_0: dq̂ += c_0 dξ_0 and the bounds' terms.
        const float* d0 = buf(0);
        float p0 = 0.0f;
        for (int j = threadIdx.x; j < K; j += kThreads) {
          dsq[j] = fmaf(c0, d0[j], dsq[j]);
          p0 = fmaf(d0[j], sq[j], p0);
        }
        ds -= block_sum(p0, red) * c0 / s;
        const float drho = 2.0f * rho * drho2;
        ds -= drho * rho / s;
        const float dL = ds + drho / s, dmu = ds - drho / s;
        dfro += dL;
        dlam += dL + dmu;
      }
      if (!p.fixed) dfro += p.a * dlam;
      if (fro != 0.0f) {
        const float f = dfro / fro;
        for (int e = threadIdx.x; e < K * K; e += kThreads) dH[e] = fmaf(f, Hs[e], dH[e]);
      }
      for (int i = threadIdx.x; i < K; i += kThreads) work.dq[row * K + i] = p.scale * dsq[i];
      __syncthreads();  // dH, dS complete for this token
      // H_t = γ H_{t−1} + w k kᵀ, S_t = γ S_{t−1} + w k vᵀ.
      float pg = 0.0f;
      for (int e = threadIdx.x; e < K * K; e += kThreads) pg = fmaf(dH[e], Hp[e], pg);
      for (int e = threadIdx.x; e < K * V; e += kThreads) pg = fmaf(dS[e], Hp[K * K + e], pg);
      for (int i = threadIdx.x; i < K; i += kThreads) {  // the columns' part: (dHᵀ k)_i
        float a = 0.0f;
        for (int j = 0; j < K; ++j) a = fmaf(dH[j * K + i], kv[j], a);
        acc[i] = a;
      }
      const float dgam = block_sum(pg, red);  // synchronises: acc visible
      float pw = 0.0f;
      for (int i = warp; i < K; i += kWarps) {  // the rows' part (dH k)_i and (dS v)_i
        float a = 0.0f, sv = 0.0f;
        for (int j = lane; j < K; j += 32) a = fmaf(dH[i * K + j], kv[j], a);
        for (int j = lane; j < V; j += 32) sv = fmaf(dS[i * V + j], vv[j], sv);
        for (int o = 16; o > 0; o /= 2) {
          a += __shfl_xor_sync(0xffffffffu, a, o);
          sv += __shfl_xor_sync(0xffffffffu, sv, o);
        }
        const float hk = a + acc[i];  // ((dH + dHᵀ) k)_i
        if (lane == 0) {
          work.dk[row * K + i] = w * (hk + sv);
          pw = fmaf(kv[i], 0.5f * hk + sv, pw);  // kᵀdH k = ½ kᵀ(dH + dHᵀ)k
        }
      }
      for (int j = threadIdx.x; j < V; j += kThreads) {
        float a = 0.0f;
        for (int i = 0; i < K; ++i) a = fmaf(dS[i * V + j], kv[i], a);
        dv[row * V + j] = Elem<E>::from_float(w * a);
      }
      const float dwt = block_sum(pw, red);
      if (threadIdx.x == 0) {
        dg[row] = gam * dgam;
        if (beta) dbeta[row] = dwt;
      }
      for (int e = threadIdx.x; e < K * K; e += kThreads) dH[e] *= gam;
      for (int e = threadIdx.x; e < K * V; e += kThreads) dS[e] *= gam;
      __syncthreads();  // before the next token's loads and reads of dH, dS
    }
  }
  // dhkk0 reads dH transposed, another thread's elements: after a barrier (with
  // an empty varlen sequence no token's barrier separates it from dH's initial
  // writes; compute-sanitizer racecheck found that, 2026-12-03).
  __syncthreads();
  if (dh0)
    for (int e = threadIdx.x; e < K * V; e += kThreads) dh0[sbase + e] = dS[e];
  if (dhkk0)
    for (int e = threadIdx.x; e < K * K; e += kThreads) {
      const int i = e / K, j = e % K;
      dhkk0[hbase + e] = (dH[e] + dH[j * K + i]) / 2.0f;
    }
}

template <class E>
void launch(const GkaBackwardArgs& a) {
  const GkaArgs& f = a.fwd;
  auto stream = static_cast<cudaStream_t>(f.stream);
  // Token rows: B·T·H, or the packed tokens' under varlen (B sequences, T the longest).
  const std::int64_t BH = static_cast<std::int64_t>(f.B) * f.H,
                     rows = f.cu_seqlens ? f.packed_tokens * f.H : BH * f.T;
  const int nseg = (f.T + kSeg - 1) / kSeg, r = f.iters;
  const std::size_t W = static_cast<std::size_t>(f.K) * (f.K + f.V);
  auto align = [](std::size_t n) { return (n + 63) / 64 * 64; };  // floats: 256 bytes
  const std::size_t n_ckpt = BH * nseg * W, n_seg = BH * (kSeg + 1) * W, n_xi = BH * (r + 2) * f.K,
                    n_ax = BH * (r > 0 ? r : 1) * f.K, n_om = BH * (r + 1), n_d = rows * f.K;
  const std::size_t total = align(n_ckpt) + align(n_seg) + align(n_xi) + align(n_ax) + align(n_om) + 2 * align(n_d);
  float* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), total * sizeof(float), stream));
  Work work{};
  std::size_t off = 0;
  auto take = [&](std::size_t n) { float* p = ws + off; off += align(n); return p; };
  work.ckpt = take(n_ckpt), work.seg = take(n_seg), work.xi = take(n_xi), work.ax = take(n_ax);
  work.omega = take(n_om), work.dq = take(n_d), work.dk = take(n_d);
  const Params p{f.B,     f.T,     f.H,           f.K,      f.V,          f.iters,
                 f.scale, f.a,     f.lambda_value, f.omega0, f.fixed_lambda, f.cu_seqlens};
  const std::size_t smem =
      (static_cast<std::size_t>(f.K) * (2 * f.K + f.V) + 15 * f.K + 2 * f.V + kWarps + 4) * sizeof(float);
  const E* k = static_cast<const E*>(f.k);
  try {
    allow_smem(backward_kernel<E>, smem, "gpu gka recurrent backward");
    backward_kernel<E><<<static_cast<unsigned>(BH), kThreads, smem, stream>>>(
        p, static_cast<const E*>(f.q), k, static_cast<const E*>(f.v), f.g, f.beta, f.alpha, f.hkk0, f.h0,
        static_cast<const E*>(a.do_), a.dht, a.dhkk, static_cast<E*>(a.dv), a.dg, a.dbeta, a.dalpha, a.dh0, a.dhkk0,
        work);
    TTR_CUDA_CHECK_LAUNCH("gka backward_kernel");
    // dq, dk to the dtype (the L2 norm's chain rule first, when the kernel normalised q and k).
    gka_backward::launch_finish<E>(a, rows, work.dq, work.dk, stream);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
}

}  // namespace

void gka_sequential_backward(const GkaBackwardArgs& a) {
  validate(a);
  if (a.fwd.dtype == DType::bf16) launch<__nv_bfloat16>(a);
  else launch<float>(a);
}

}  // namespace ttr::gpu
