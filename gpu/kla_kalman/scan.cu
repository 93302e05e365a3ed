// kla_kalman forward (KLA-K §4.2, Alg. 1): the Möbius precision scan and the
// affine information-mean scan as chunked two-level scans (chunks of 64 tokens),
// the plan of the CPU `chunk` forms, in two representations (Num, mobius.cuh):
// Sf, scaled (form `chunk`, reference/kla_kalman/scaled_scan.hpp: cannot
// overflow), and float, the paper's (form `chunk_unscaled`,
// reference/kla_kalman/scan.hpp: overflows with Λ_t). The stages:
//
//   1. mobius_aggregates  (chunks × B·H × slot tiles): per slot, the sequential
//      prefix of M_t inside the chunk (registers); the chunk aggregate is stored.
//   2. carries<Mobius>    (B·H × slot tiles): sequential over chunks, the
//      aggregates turned in place into each chunk's carry-in (the prefix of the
//      aggregates before it; stored narrowed, as every stored composition).
//   3. affine_aggregates  (chunks × B·H × slot tiles): Λ_t = (carry ∘ local_t)(Λ_0)
//      (Cor. 1.1), f_t = ā/(ā² + p̄Λ_{t−1}) (eq. (19)), the chunk's prefix of the
//      affine maps (f_t, k_n λv_d v_d) (registers); the aggregate is stored.
//   4. carries<Affine>    as 2, for the mean track.
//   5. outputs            (chunks × B·H × column tiles): both tracks recomputed
//      from the carries, η_t = A_{1:t} η_0 + b_{1:t} (Cor. 2.1), μ = η/Λ,
//      o_{t,d} = scale Σ_n q_n μ, o_var_{t,d} = scale² Σ_n q_n²/Λ (n ascending),
//      lambda_T, eta_T.
//
// A thread per slot (n, d) in every stage: Λ and η never leave registers inside
// a chunk; the carries cross chunks through global memory, and the outputs' sums
// over n go through shared memory, n ascending (stage 5).
// Recomputing the local scans (stages 3 and 5) is cheaper than storing Λ_t for
// every token and slot (T·N·D floats per head).
//
// Arithmetic (docs/arithmetic-policies.md, the CPU forms' policy): q, k, v in the
// dtype; λv, ā, p̄, the initial and final states, Λ_t, f_t and the affine factors
// A in fp32 (scaled: fp32 mantissas with int32 exponents); narrowed to the dtype:
// every stored aggregate and carry (all four Möbius entries, the affine part B —
// scaled: their mantissas), o and o_var. The carry scan runs left to
// right (the CPU form scans the aggregates by Blelloch's tree: another
// bracketing, the same narrowing points).
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
using kla::lift;
using kla::load_slot;
using kla::mul_add;
using kla::Mobius;
using kla::out;
using kla::Shape;
using kla::shape_of;
using kla::Slot;
using kla::SlotWalk;
using kla::tiles;

// Stage 5: a thread per slot (n, d) of a block of N × cols slots (cols = the
// value columns of the block); every kSub tokens the slots' terms q_n μ and
// q_n²/Λ go to shared memory and one thread per (token, column, output) sums them
// over n ascending (the sequential form's order).
constexpr int kSub = 8;
constexpr int kOutThreads = 256;

template <class E, class Num>
__global__ void __launch_bounds__(kOutThreads) outputs(Shape s, int cols, const E* __restrict__ q,
                                                       const E* __restrict__ k, const E* __restrict__ v,
                                                       const float* __restrict__ lv, const float* __restrict__ a_bar,
                                                       const float* __restrict__ p_bar,
                                                       const float* __restrict__ lambda_init,
                                                       const float* __restrict__ eta_init, float lambda0, float scale,
                                                       const Mobius<Num>* __restrict__ carry_m,
                                                       const Affine<Num>* __restrict__ carry_a, E* __restrict__ o,
                                                       E* __restrict__ o_var, float* __restrict__ lambda_T,
                                                       float* __restrict__ eta_T) {
  // terms[i][t][n][j]: i = 0 q_n μ, i = 1 q_n²/Λ; column j of the block.
  extern __shared__ float terms[];
  const int slots = s.N * cols;
  const int c = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H, len = s.len(b);
  const int t0 = c * kChunk, t1 = min(len, t0 + kChunk);
  const int n = threadIdx.x / cols, j = threadIdx.x % cols, d = blockIdx.z * cols + j;
  const bool mine = threadIdx.x < slots && d < s.D;  // the others only share the barriers
  if (len == 0 && c == 0 && mine) {  // an empty sequence (varlen): the final states are the initial ones
    const Slot<Num> x0 = load_slot<Num>(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
    const std::int64_t f = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
    lambda_T[f] = out(x0.lam0);
    eta_T[f] = out(x0.eta0);
  }
  if (t0 >= t1) return;  // past this sequence's end (varlen), for the whole block
  Mobius<Num> cm{};
  Affine<Num> ca{};
  Slot<Num> x{};
  if (mine) {
    const std::int64_t w = s.ws(bh, c, n, d);
    cm = carry_m[w], ca = carry_a[w];
    x = load_slot<Num>(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
  }
  SlotWalk<Num> walk(x, c > 0 ? &cm : nullptr, c > 0 ? &ca : nullptr);
  const auto term = [&](int i, int t, int nn, int jj) -> float& {
    return terms[((i * kSub + t) * s.N + nn) * cols + jj];
  };
  for (int u0 = t0; u0 < t1; u0 += kSub) {
    const int u1 = min(t1, u0 + kSub);
    if (mine)
      for (int t = u0; t < u1; ++t) {
        const std::int64_t r = s.row(b, t, h);
        Num eta;
        const Num lam = walk.step(t == t0, lift<Num>(Elem<E>::to_float(k[r * s.N + n])), lift<Num>(lv[r * s.D + d]),
                                  lift<Num>(Elem<E>::to_float(v[r * s.D + d])), eta);
        const float qn = Elem<E>::to_float(q[r * s.N + n]);
        const Num qs = lift<Num>(qn);
        // q_n μ, μ = η/Λ, and q_n²/Λ: scaled quotients rounded into fp32 once
        // (below its range: gradual underflow, the faithful tiny value).
        term(0, t - u0, n, j) = qn * out(eta / lam);
        term(1, t - u0, n, j) = out(qs * qs / lam);
        if (t == len - 1) {  // ±inf exactly where the true final state is beyond fp32
          const std::int64_t f = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
          lambda_T[f] = out(lam);
          eta_T[f] = out(eta);
        }
      }
    __syncthreads();
    for (int task = threadIdx.x; task < 2 * kSub * cols; task += blockDim.x) {
      const int i = task / (kSub * cols), t = (task / cols) % kSub, jj = task % cols, dd = blockIdx.z * cols + jj;
      if (u0 + t >= u1 || dd >= s.D) continue;
      float acc = 0.0f;
      for (int nn = 0; nn < s.N; ++nn) acc += term(i, t, nn, jj);
      const std::int64_t r = s.row(b, u0 + t, h) * s.D + dd;
      if (i == 0) o[r] = Elem<E>::from_float(acc * scale);
      else o_var[r] = Elem<E>::from_float(acc * (scale * scale));
    }
    __syncthreads();
  }
}

// The recurrent form (reference/kla_kalman/sequential.hpp) one token at a time:
// a thread per value column d, the slots' Λ and η in shared memory (column d
// touched by its thread only), o and o_var rounded once. Λ and η are scaled
// numbers (scaled.cuh: fp32 mantissa, int32 exponent), every other quantity
// fp32: each operation of eqs. (18)-(19) rounds once in its mantissa, as the
// float operation it replaces — the same bits wherever the plain recurrence stays
// in fp32's normal range — and nothing overflows where the plain one does
// (p̄ = 0, small ā: Λ_t = ā^{−2t}(…), docs/kla-scaled.md). The GPU property
// CudaProperties.ChunkAndRecurrentAgreeWithinTheModel found the plain kernel
// returning inf at T = 1 (ā = 1e-24, p̄ = 0, λv = 0.01) where o is 0.
constexpr int kRecCols = 32;

template <class E>
__global__ void __launch_bounds__(kRecCols) recurrent(Shape s, const E* __restrict__ q, const E* __restrict__ k,
                                                      const E* __restrict__ v, const float* __restrict__ lv,
                                                      const float* __restrict__ a_bar,
                                                      const float* __restrict__ p_bar,
                                                      const float* __restrict__ lambda_init,
                                                      const float* __restrict__ eta_init, float lambda0,
                                                      float scale, E* __restrict__ o, E* __restrict__ o_var,
                                                      float* __restrict__ lambda_T, float* __restrict__ eta_T) {
  extern __shared__ kla::Sf state[];  // Λ [N][kRecCols], then η [N][kRecCols]
  kla::Sf* Lam = state;
  kla::Sf* Eta = state + s.N * kRecCols;
  const int bh = blockIdx.x, d = blockIdx.y * kRecCols + threadIdx.x, j = threadIdx.x;
  if (d >= s.D) return;
  const int b = bh / s.H, h = bh % s.H;
  for (int n = 0; n < s.N; ++n) {
    const Slot<kla::Sf> x = load_slot<kla::Sf>(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
    Lam[n * kRecCols + j] = x.lam0;
    Eta[n * kRecCols + j] = x.eta0;
  }
  using kla::lift;
  for (int t = 0; t < s.len(b); ++t) {
    const std::int64_t r = s.row(b, t, h);
    const kla::Sf lvd = lift<kla::Sf>(lv[r * s.D + d]);
    const kla::Sf ev = lvd * lift<kla::Sf>(Elem<E>::to_float(v[r * s.D + d]));
    float acc = 0.0f, accv = 0.0f;
    for (int n = 0; n < s.N; ++n) {
      const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
      const kla::Sf a = lift<kla::Sf>(a_bar[hs]), p = lift<kla::Sf>(p_bar[hs]);
      const kla::Sf kn = lift<kla::Sf>(Elem<E>::to_float(k[r * s.N + n]));
      const float qn = Elem<E>::to_float(q[r * s.N + n]);
      kla::Sf& L = Lam[n * kRecCols + j];
      kla::Sf& e = Eta[n * kRecCols + j];
      const kla::Sf denom = kla::mul_add(p, L, a * a);  // ā² + p̄Λ_{t−1}
      e = kla::mul_add(a / denom, e, kn * ev);          // eq. (19)
      L = kla::mul_add(kn * kn, lvd, L / denom);         // eq. (18)
      acc += qn * kla::value(e / L);                     // μ = η/Λ, an ordinary number
      accv += kla::value(lift<kla::Sf>(qn * qn) / L);
    }
    o[r * s.D + d] = Elem<E>::from_float(scale * acc);
    o_var[r * s.D + d] = Elem<E>::from_float(scale * scale * accv);
  }
  for (int n = 0; n < s.N; ++n) {
    const std::int64_t f = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
    lambda_T[f] = kla::value(Lam[n * kRecCols + j]);  // ±inf only where Λ_T itself is beyond fp32
    eta_T[f] = kla::value(Eta[n * kRecCols + j]);
  }
}


template <class E, class Num>
void chunk_forward(const KlaArgs& a) {
  const Shape s = shape_of(a);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const std::size_t slots = static_cast<std::size_t>(a.B) * a.H * s.chunks * a.N * a.D;
  unsigned char* ws = nullptr;
  const std::size_t bytes_m = (slots * sizeof(Mobius<Num>) + 255) / 256 * 256;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), bytes_m + slots * sizeof(Affine<Num>), stream));
  auto* wm = reinterpret_cast<Mobius<Num>*>(ws);
  auto* wa = reinterpret_cast<Affine<Num>*>(ws + bytes_m);
  const auto* q = static_cast<const E*>(a.q);
  const auto* k = static_cast<const E*>(a.k);
  const auto* v = static_cast<const E*>(a.v);
  // Stage 5: N × cols slots per block, cols = the value columns that fit 256 threads.
  const int cols = std::max(1, std::min(a.D, kOutThreads / a.N));
  const dim3 out_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(a.B * a.H), tiles(a.D, cols));
  const std::size_t out_shmem = 2u * kSub * a.N * cols * sizeof(float);
  try {
    kla::forward_carries<E, Num>(a, s, wm, wa, stream);
    outputs<E, Num><<<out_grid, kOutThreads, out_shmem, stream>>>(
        s, cols, q, k, v, a.lambda_v, a.a_bar, a.p_bar, a.lambda_init, a.eta_init, a.lambda0, a.scale, wm, wa,
        static_cast<E*>(a.o), static_cast<E*>(a.o_var), a.lambda_T, a.eta_T);
    TTR_CUDA_CHECK_LAUNCH("kla outputs");
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
}

template <class E>
void recurrent_forward(const KlaArgs& a) {
  const Shape s = shape_of(a);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const dim3 grid(static_cast<unsigned>(a.B * a.H), tiles(a.D, kRecCols));
  const std::size_t shmem = 2u * a.N * kRecCols * sizeof(kla::Sf);  // 64 KiB at N = 128: above the default 48
  TTR_CUDA_CHECK(cudaFuncSetAttribute(recurrent<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shmem)));
  recurrent<E><<<grid, kRecCols, shmem, stream>>>(s, static_cast<const E*>(a.q), static_cast<const E*>(a.k),
                                                  static_cast<const E*>(a.v), a.lambda_v, a.a_bar, a.p_bar,
                                                  a.lambda_init, a.eta_init, a.lambda0, a.scale,
                                                  static_cast<E*>(a.o), static_cast<E*>(a.o_var), a.lambda_T,
                                                  a.eta_T);
  TTR_CUDA_CHECK_LAUNCH("kla recurrent");
}

}  // namespace

void validate(const KlaArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu kla_kalman kernel: " + m); };
  if (a.B < 1 || a.T < 1 || a.H < 1) fail("B, T and H must be at least 1");
  if (a.N < 1 || a.N > 128) fail("N = " + std::to_string(a.N) + " (need 1 ≤ N ≤ 128)");
  if (a.D < 1) fail("D must be at least 1");
  if (!a.q || !a.k || !a.v || !a.lambda_v || !a.a_bar || !a.p_bar) fail("q, k, v, lambda_v, a_bar and p_bar are required");
  if (!a.o || !a.o_var || !a.lambda_T || !a.eta_T) fail("o, o_var, lambda_T and eta_T are required");
}

void kla_kalman_chunk_forward(const KlaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) chunk_forward<__nv_bfloat16, kla::Sf>(a);
  else chunk_forward<float, kla::Sf>(a);
}

void kla_kalman_chunk_unscaled_forward(const KlaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) chunk_forward<__nv_bfloat16, float>(a);
  else chunk_forward<float, float>(a);
}

void kla_kalman_sequential_forward(const KlaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) recurrent_forward<__nv_bfloat16>(a);
  else recurrent_forward<float>(a);
}

}  // namespace ttr::gpu
