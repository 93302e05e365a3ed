// kla_kalman forward (KLA-K §4.2, Alg. 1): the Möbius precision scan and the
// affine information-mean scan as chunked two-level scans (chunks of 64 tokens),
// the plan of reference/kla_kalman/scan.hpp's `chunk` form:
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
//   5. outputs            (chunks × B·H × D-tiles): both tracks recomputed from
//      the carries, η_t = A_{1:t} η_0 + b_{1:t} (Cor. 2.1), μ = η/Λ,
//      o_{t,d} = scale Σ_n q_n μ, o_var_{t,d} = scale² Σ_n q_n²/Λ (n ascending,
//      in the thread that owns d: no cross-thread reduction), lambda_T, eta_T.
//
// Stages 1–4: a thread per slot (n, d). Stage 5: a thread owns one value column
// d and walks the slots (n, d), n ascending, and the tokens of its chunk, so the
// sums over n need no cross-thread reduction. Λ and η never leave registers
// inside a chunk; nothing crosses threads except through the carries in memory.
// Recomputing the local scans (stages 3 and 5) is cheaper than storing Λ_t for
// every token and slot (T·N·D floats per head).
//
// Arithmetic (docs/arithmetic-policies.md, scan.hpp's policy): q, k, v in the
// dtype; λv, ā, p̄, the initial and final states, Λ_t, f_t and the affine factors
// A in fp32; narrowed to the dtype: every stored aggregate and carry (all four
// Möbius entries, the affine part B), o and o_var. The carry scan runs left to
// right (the CPU form scans the aggregates by Blelloch's tree: another
// bracketing, the same narrowing points).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/kla_kalman/mobius.cuh"

namespace ttr::gpu {
namespace {

using kla::Affine;
using kla::Mobius;

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kCols = 64;   // value columns d per block (stage 5)
constexpr int kSlots = 256; // slots per block (stages 1–4)

struct Shape {
  int B, T, H, N, D, chunks;
  __device__ std::int64_t row(int b, int t, int h) const { return (static_cast<std::int64_t>(b) * T + t) * H + h; }
  // (b·H + h, chunk, n, d) in the workspaces, chunk-major per head.
  __device__ std::int64_t ws(int bh, int c, int n, int d) const {
    return ((static_cast<std::int64_t>(bh) * chunks + c) * N + n) * D + d;
  }
};

// Per-slot inputs a thread reads once per slot.
struct Slot {
  float a, a2, p, lam0, eta0;
};

__device__ inline Slot load_slot(const Shape& s, const float* a_bar, const float* p_bar, const float* lambda_init,
                                 const float* eta_init, float lambda0, int bh, int n, int d) {
  const int h = bh % s.H;
  const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
  const std::int64_t bs = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
  Slot x;
  x.a = a_bar[hs];
  x.a2 = x.a * x.a;
  x.p = p_bar[hs];
  x.lam0 = lambda_init ? lambda_init[bs] : lambda0;
  x.eta0 = eta_init ? eta_init[bs] : 0.0f;
  return x;
}

template <class E>
__global__ void __launch_bounds__(kSlots) mobius_aggregates(Shape s, const E* __restrict__ k,
                                                            const float* __restrict__ lv,
                                                            const float* __restrict__ a_bar,
                                                            const float* __restrict__ p_bar,
                                                            Mobius* __restrict__ agg) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  const int b = bh / s.H, h = bh % s.H, t0 = c * kChunk, t1 = min(s.T, t0 + kChunk);
  const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
  const float a = a_bar[hs], a2 = a * a, p = p_bar[hs];
  Mobius local{};
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h);
    const Mobius m = kla::step_matrix(Elem<E>::to_float(k[r * s.N + n]), lv[r * s.D + d], a2, p);
    local = t == t0 ? m : kla::compose(local, m);
  }
  agg[s.ws(bh, c, n, d)] = kla::stored<E>(local);
}

// Aggregates → exclusive carries, in place: x[c] ← x[0] ⊕ … ⊕ x[c−1] (x[0] ← identity,
// never read), each composition narrowed as it is stored.
template <class E, class X>
__global__ void __launch_bounds__(kSlots) carries(Shape s, X* __restrict__ x) {
  const int bh = blockIdx.x;
  const int slot = blockIdx.y * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  X running = x[s.ws(bh, 0, n, d)];
  for (int c = 1; c < s.chunks; ++c) {
    const std::int64_t i = s.ws(bh, c, n, d);
    const X own = x[i];
    x[i] = running;
    if (c + 1 < s.chunks) running = kla::stored<E>(kla::compose(running, own));
  }
}

// Stages 3 and 5 share the walk over one chunk of one slot: Λ_t from the carried
// Möbius prefix, the affine prefix of the mean track inside the chunk, and (for
// the outputs) η_t from the carried affine prefix. `visit(t, lam_t, eta_t)`.
template <bool WithMean, class E, class Visit>
__device__ inline Affine walk_chunk(const Shape& s, const E* __restrict__ k, const E* __restrict__ v,
                                    const float* __restrict__ lv, const Slot& x, const Mobius* carry_m,
                                    const Affine* carry_a, int b, int h, int n, int d, int t0, int t1,
                                    Visit&& visit) {
  const float lam_prev0 = carry_m ? kla::apply(*carry_m, x.lam0) : x.lam0;  // Λ_{t0−1}
  float lam_prev = lam_prev0;
  Mobius local{};
  Affine mean{};
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h);
    const float kn = Elem<E>::to_float(k[r * s.N + n]), lvd = lv[r * s.D + d];
    const Mobius m = kla::step_matrix(kn, lvd, x.a2, x.p);
    local = t == t0 ? m : kla::compose(local, m);
    const float lam = kla::apply(carry_m ? kla::compose(*carry_m, local) : local, x.lam0);  // P_t(Λ_0)
    // eq. (19): f_t = ā/(ā² + p̄Λ_{t−1}), b_t = k_n (λv_d v_d)
    const Affine step{x.a / (x.a2 + x.p * lam_prev), kn * (lvd * Elem<E>::to_float(v[r * s.D + d]))};
    mean = t == t0 ? step : kla::compose(mean, step);
    if constexpr (WithMean) {
      const Affine full = carry_a ? kla::compose(*carry_a, mean) : mean;
      visit(t, lam, full.B + full.A * x.eta0);
    }
    lam_prev = lam;
  }
  return mean;
}

template <class E>
__global__ void __launch_bounds__(kSlots) affine_aggregates(Shape s, const E* __restrict__ k,
                                                            const E* __restrict__ v, const float* __restrict__ lv,
                                                            const float* __restrict__ a_bar,
                                                            const float* __restrict__ p_bar,
                                                            const float* __restrict__ lambda_init,
                                                            const float* __restrict__ eta_init, float lambda0,
                                                            const Mobius* __restrict__ carry_m,
                                                            Affine* __restrict__ agg) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  const int b = bh / s.H, h = bh % s.H, t0 = c * kChunk, t1 = min(s.T, t0 + kChunk);
  const Slot x = load_slot(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
  const Mobius cm = carry_m[s.ws(bh, c, n, d)];
  const Affine local = walk_chunk<false, E>(s, k, v, lv, x, c > 0 ? &cm : nullptr, nullptr, b, h, n, d, t0, t1,
                                            [](int, float, float) {});
  agg[s.ws(bh, c, n, d)] = kla::stored<E>(local);
}

template <class E>
__global__ void __launch_bounds__(kCols) outputs(Shape s, const E* __restrict__ q, const E* __restrict__ k,
                                                 const E* __restrict__ v, const float* __restrict__ lv,
                                                 const float* __restrict__ a_bar, const float* __restrict__ p_bar,
                                                 const float* __restrict__ lambda_init,
                                                 const float* __restrict__ eta_init, float lambda0, float scale,
                                                 const Mobius* __restrict__ carry_m,
                                                 const Affine* __restrict__ carry_a, E* __restrict__ o,
                                                 E* __restrict__ o_var, float* __restrict__ lambda_T,
                                                 float* __restrict__ eta_T) {
  // Running sums over n of this block's columns, one per token of the chunk;
  // column threadIdx.x is touched by its own thread only.
  __shared__ float acc_o[kChunk][kCols], acc_v[kChunk][kCols];
  const int c = blockIdx.x, bh = blockIdx.y, d = blockIdx.z * kCols + threadIdx.x;
  if (d >= s.D) return;
  const int b = bh / s.H, h = bh % s.H, t0 = c * kChunk, t1 = min(s.T, t0 + kChunk);
  for (int i = 0; i < t1 - t0; ++i) acc_o[i][threadIdx.x] = 0.0f, acc_v[i][threadIdx.x] = 0.0f;
  for (int n = 0; n < s.N; ++n) {
    const Slot x = load_slot(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
    const std::int64_t w = s.ws(bh, c, n, d);
    const Mobius cm = carry_m[w];
    const Affine ca = carry_a[w];
    const bool carried = c > 0;
    walk_chunk<true, E>(s, k, v, lv, x, carried ? &cm : nullptr, carried ? &ca : nullptr, b, h, n, d, t0, t1,
                        [&](int t, float lam, float eta) {
                          const float qn = Elem<E>::to_float(q[s.row(b, t, h) * s.N + n]);
                          acc_o[t - t0][threadIdx.x] += qn * (eta / lam);  // q_n μ, μ = η/Λ
                          acc_v[t - t0][threadIdx.x] += qn * qn / lam;
                          if (t == s.T - 1) {
                            const std::int64_t f = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
                            lambda_T[f] = lam;
                            eta_T[f] = eta;
                          }
                        });
  }
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h) * s.D + d;
    o[r] = Elem<E>::from_float(acc_o[t - t0][threadIdx.x] * scale);
    o_var[r] = Elem<E>::from_float(acc_v[t - t0][threadIdx.x] * (scale * scale));
  }
}

// The recurrent form (reference/kla_kalman/sequential.hpp) one token at a time:
// a thread per value column d, the slots' Λ and η in shared memory (column d
// touched by its thread only), everything fp32, o and o_var rounded once.
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
  extern __shared__ float state[];  // Λ [N][kRecCols], then η [N][kRecCols]
  float* Lam = state;
  float* Eta = state + s.N * kRecCols;
  const int bh = blockIdx.x, d = blockIdx.y * kRecCols + threadIdx.x, j = threadIdx.x;
  if (d >= s.D) return;
  const int b = bh / s.H, h = bh % s.H;
  for (int n = 0; n < s.N; ++n) {
    const Slot x = load_slot(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d);
    Lam[n * kRecCols + j] = x.lam0;
    Eta[n * kRecCols + j] = x.eta0;
  }
  for (int t = 0; t < s.T; ++t) {
    const std::int64_t r = s.row(b, t, h);
    const float lvd = lv[r * s.D + d], ev = lvd * Elem<E>::to_float(v[r * s.D + d]);
    float acc = 0.0f, accv = 0.0f;
    for (int n = 0; n < s.N; ++n) {
      const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
      const float a = a_bar[hs], p = p_bar[hs];
      const float kn = Elem<E>::to_float(k[r * s.N + n]), qn = Elem<E>::to_float(q[r * s.N + n]);
      float& L = Lam[n * kRecCols + j];
      float& e = Eta[n * kRecCols + j];
      const float denom = a * a + p * L;  // ā² + p̄Λ_{t−1}
      e = (a / denom) * e + kn * ev;      // eq. (19)
      L = L / denom + kn * kn * lvd;      // eq. (18)
      acc += qn * (e / L);
      accv += qn * qn / L;
    }
    o[r * s.D + d] = Elem<E>::from_float(scale * acc);
    o_var[r * s.D + d] = Elem<E>::from_float(scale * scale * accv);
  }
  for (int n = 0; n < s.N; ++n) {
    const std::int64_t f = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
    lambda_T[f] = Lam[n * kRecCols + j];
    eta_T[f] = Eta[n * kRecCols + j];
  }
}

Shape shape_of(const KlaArgs& a) { return {a.B, a.T, a.H, a.N, a.D, (a.T + kChunk - 1) / kChunk}; }
unsigned tiles(int n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

template <class E>
void chunk_forward(const KlaArgs& a) {
  const Shape s = shape_of(a);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const std::size_t slots = static_cast<std::size_t>(a.B) * a.H * s.chunks * a.N * a.D;
  unsigned char* ws = nullptr;
  const std::size_t bytes_m = (slots * sizeof(Mobius) + 255) / 256 * 256;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), bytes_m + slots * sizeof(Affine), stream));
  auto* wm = reinterpret_cast<Mobius*>(ws);
  auto* wa = reinterpret_cast<Affine*>(ws + bytes_m);
  const auto* q = static_cast<const E*>(a.q);
  const auto* k = static_cast<const E*>(a.k);
  const auto* v = static_cast<const E*>(a.v);
  const dim3 chunk_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(a.B * a.H), tiles(a.D, kCols));
  const dim3 slot_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(a.B * a.H), tiles(a.N * a.D, kSlots));
  const dim3 carry_grid(static_cast<unsigned>(a.B * a.H), tiles(a.N * a.D, kSlots));
  try {
    mobius_aggregates<E><<<slot_grid, kSlots, 0, stream>>>(s, k, a.lambda_v, a.a_bar, a.p_bar, wm);
    TTR_CUDA_CHECK_LAUNCH("kla mobius_aggregates");
    carries<E, Mobius><<<carry_grid, kSlots, 0, stream>>>(s, wm);
    TTR_CUDA_CHECK_LAUNCH("kla carries<Mobius>");
    affine_aggregates<E><<<slot_grid, kSlots, 0, stream>>>(s, k, v, a.lambda_v, a.a_bar, a.p_bar, a.lambda_init,
                                                          a.eta_init, a.lambda0, wm, wa);
    TTR_CUDA_CHECK_LAUNCH("kla affine_aggregates");
    carries<E, Affine><<<carry_grid, kSlots, 0, stream>>>(s, wa);
    TTR_CUDA_CHECK_LAUNCH("kla carries<Affine>");
    outputs<E><<<chunk_grid, kCols, 0, stream>>>(s, q, k, v, a.lambda_v, a.a_bar, a.p_bar, a.lambda_init,
                                                a.eta_init, a.lambda0, a.scale, wm, wa, static_cast<E*>(a.o),
                                                static_cast<E*>(a.o_var), a.lambda_T, a.eta_T);
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
  const std::size_t shmem = 2u * a.N * kRecCols * sizeof(float);
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
  if (a.dtype == DType::bf16) chunk_forward<__nv_bfloat16>(a);
  else chunk_forward<float>(a);
}

void kla_kalman_recurrent_forward(const KlaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) recurrent_forward<__nv_bfloat16>(a);
  else recurrent_forward<float>(a);
}

}  // namespace ttr::gpu
