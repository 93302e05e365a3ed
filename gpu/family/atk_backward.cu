// The adjoint of PGDN's diagonal preconditioner on the device (PDN §3.3, eq. (9);
// App. D, Fig. 9 (b), step 5): reference/family/atk_backward.hpp with dg_atk by
// the reverse running sum (DgAtk::reverse_sum, the chunk backward form's and FLA's
// chunk_atk_bwd route). Per key channel i, forward then backward over the tokens:
//
//   A_t = e^{ga_t} A_{t−1} + βa_t k_t²,  r_t = log(A_t + eps) − c,
//   s_t = r_t/(1 + |r_t|),  B_t = e^{−L s_t} (L = log x),  k̃_t = B_t k_t;
//   t = T..1, D = ∂L/∂A_t carried (dA_T or 0):
//     dk_t = B_t dk̃_t;  dr = −L B_t k_t dk̃_t/(1 + |r_t|)²;  dc −= dr;
//     ρ = dr/(A_t + eps);  D += ρ;  ∂L/∂G_t = Σ_i (ρ A_t − βa_t k_t² D)  (at t = T: D A_T);
//     dβa_t = Σ_i D k_t²;  dk_t += 2 βa_t k_t D;  D ← e^{ga_t} D;  dA_0 = D at the end;
//   dga_t = Σ_{s ≥ t} ∂L/∂G_s over the whole sequence, s descending.
//
// One block per (sequence, head), a thread per channel. The forward sweep stores
// A_{t−1} (fp32, a row of K per token); the backward recomputes A_t from it with
// the same fused operation, so with the same bits. The sums over channels of a
// token are a warp's butterfly then the warps in order (one barrier a token, the
// warp sums double-buffered in shared memory); dc per channel, summed over
// sequences then channels by a last launch. Everything fp32; no atomics.
#include "gpu/family/atk_backward.cuh"

#include <cuda_bf16.h>

#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"
#include "gpu/family/delta_backward_finish.cuh"

namespace ttr::gpu::atk {
namespace {

constexpr int kMaxK = 128, kWarps = kMaxK / 32;

// A_t from A_{t−1}: one rounding for the decayed state and the new moment.
__device__ inline float step(float decay, float prev, float kk, float beta) { return fmaf(decay, prev, beta * (kk * kk)); }

template <class EK, class EW>
__global__ void __launch_bounds__(kMaxK) sweep(AtkBackwardArgs args, const float* __restrict__ dw, int NB,
                                               std::int64_t rows, float* __restrict__ dk_atk,
                                               float* __restrict__ prev, float* __restrict__ dc_part) {
  __shared__ float red[2][2][kWarps];  // [token parity][∂L/∂G, dβa][warp]
  const AtkArgs& a = args.fwd;
  const int bh = blockIdx.x, bb = bh / a.H, h = bh % a.H, i = threadIdx.x, K = a.K;
  const int lane = i % 32, warp = i / 32, warps = blockDim.x / 32;
  const bool on = i < K;
  const EK* k = static_cast<const EK*>(a.k);
  const std::int64_t first = seq_start(a.cu_seqlens, bb, a.T), state = static_cast<std::int64_t>(bh) * K + i;
  const int len = seq_len(a.cu_seqlens, bb, a.T);
  const float center = a.center[h];
  auto key = [&](std::int64_t row) { return Elem<EK>::to_float(k[row * K + i]); };
  float A = on && a.A0 ? a.A0[state] : 0.0f;
  if (on)
    for (int t = 0; t < len; ++t) {
      const std::int64_t row = (first + t) * a.H + h;
      prev[row * K + i] = A;
      A = step(expf(a.g_atk[row]), A, key(row), a.beta_atk[row]);
    }
  float D = on && args.dA_final ? args.dA_final[state] : 0.0f, dc = 0.0f, dG_sum = 0.0f;
  for (int t = len - 1; t >= 0; --t) {
    const std::int64_t row = (first + t) * a.H + h;
    float dG = 0.0f, db = 0.0f;
    if (on) {
      const float decay = expf(a.g_atk[row]), w = a.beta_atk[row], ki = key(row);
      const float At = step(decay, prev[row * K + i], ki, w);
      const float r = logf(At + a.eps) - center, ar = 1.0f + fabsf(r);
      const float Bt = expf(-(a.log_x * (r / ar)));
      float dkt = 0.0f;
      for (int nb = 0; nb < NB; ++nb) dkt += dw[(nb * rows + row) * K + i];
      dkt = narrow<EW>(dkt);
      float dki = Bt * dkt;
      const float dr = -(a.log_x * Bt * ki * dkt) / (ar * ar);
      dc -= dr;
      const float rho = dr / (At + a.eps);
      D += rho;
      const float u = w * (ki * ki);
      dG = fmaf(-u, D, (t == len - 1 ? D : rho) * At);  // at T the carried dA_T is direct too
      db = D * (ki * ki);
      dki = fmaf(2.0f * w * ki, D, dki);
      dk_atk[row * K + i] = dki;
      D *= decay;
    }
    dG = delta_backward::sum32(dG), db = delta_backward::sum32(db);
    const int par = t & 1;
    if (lane == 0) red[par][0][warp] = dG, red[par][1][warp] = db;
    __syncthreads();  // a parity's slots are rewritten two tokens later, after the next barrier
    if (i == 0) {
      float g = 0.0f, bsum = 0.0f;
      for (int v = 0; v < warps; ++v) g += red[par][0][v], bsum += red[par][1][v];
      dG_sum += g;
      args.dg_atk[row] = dG_sum;
      args.dbeta_atk[row] = bsum;
    }
  }
  if (!on) return;
  if (args.dA0) args.dA0[state] = D;
  if (dc_part) dc_part[state] = dc;
}

// dc per head: the channels' sums, sequences then channels in order.
__global__ void center_sum(const float* __restrict__ dc_part, int B, int H, int K, float* __restrict__ dcenter) {
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    float x = 0.0f;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < K; ++i) x += dc_part[(static_cast<std::int64_t>(b) * H + h) * K + i];
    dcenter[h] = x;
  }
}

template <class EK, class EW>
void launch(const AtkBackwardArgs& a, const float* dw, int NB, std::int64_t rows, float* dk_atk, float* prev,
            float* dc_part, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>((a.fwd.K + 31) / 32 * 32);
  sweep<EK, EW><<<a.fwd.B * a.fwd.H, threads, 0, stream>>>(a, dw, NB, rows, dk_atk, prev, dc_part);
  TTR_CUDA_CHECK_LAUNCH("atk backward sweep");
}

}  // namespace

void backward(const AtkBackwardArgs& a, const float* dw, int NB, std::int64_t rows, DType dw_dtype, float* dk_atk,
              cudaStream_t stream) {
  const AtkArgs& p = a.fwd;
  const std::size_t states = static_cast<std::size_t>(p.B) * p.H * p.K;
  const std::size_t prev_n = (static_cast<std::size_t>(rows) * p.K + 63) / 64 * 64;
  float* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), (prev_n + states) * sizeof(float), stream));
  float* dc_part = a.dcenter ? ws + prev_n : nullptr;
  try {
    const bool kb = p.key_dtype == DType::bf16, wb = dw_dtype == DType::bf16;
    if (kb && wb) launch<__nv_bfloat16, __nv_bfloat16>(a, dw, NB, rows, dk_atk, ws, dc_part, stream);
    else if (kb) launch<__nv_bfloat16, float>(a, dw, NB, rows, dk_atk, ws, dc_part, stream);
    else if (wb) launch<float, __nv_bfloat16>(a, dw, NB, rows, dk_atk, ws, dc_part, stream);
    else launch<float, float>(a, dw, NB, rows, dk_atk, ws, dc_part, stream);
    if (a.dcenter) {
      center_sum<<<1, 256, 0, stream>>>(dc_part, p.B, p.H, p.K, a.dcenter);
      TTR_CUDA_CHECK_LAUNCH("atk backward centre");
    }
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
}

}  // namespace ttr::gpu::atk
