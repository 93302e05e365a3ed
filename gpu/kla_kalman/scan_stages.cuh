// The stages the kla_kalman chunked-scan kernels share (scan.cu's forward, and
// scan_backward.cu, which re-runs the forward scans for its states): the shape,
// the per-slot walk over one chunk, and stages 1–4 of the forward (the Möbius and
// affine chunk aggregates and their carries). scan.cu's header describes the
// stages and their arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"
#include "gpu/kla_kalman/mobius.cuh"

namespace ttr::gpu::kla {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kSlots = 256; // slots per block (stages 1–4)

// With cu (varlen, gpu/core/seqs.cuh): B sequences, T the longest (`chunks` sizes
// the per-sequence workspaces), sequence b the packed tokens [cu[b], cu[b+1]).
struct Shape {
  int B, T, H, N, D, chunks;
  const std::int64_t* cu = nullptr;
  __device__ int len(int b) const { return seq_len(cu, b, T); }
  __device__ int nchunks(int b) const { return (len(b) + kChunk - 1) / kChunk; }
  __device__ std::int64_t row(int b, int t, int h) const { return (seq_start(cu, b, T) + t) * H + h; }
  // (b·H + h, chunk, n, d) in the workspaces, chunk-major per head.
  __device__ std::int64_t ws(int bh, int c, int n, int d) const {
    return ((static_cast<std::int64_t>(bh) * chunks + c) * N + n) * D + d;
  }
};

// Per-slot inputs a thread reads once per slot.
template <class Num>
struct Slot {
  Num a, a2, p, lam0, eta0;
};

template <class Num>
__device__ inline Slot<Num> load_slot(const Shape& s, const float* a_bar, const float* p_bar, const float* lambda_init,
                                 const float* eta_init, float lambda0, int bh, int n, int d) {
  const int h = bh % s.H;
  const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
  const std::int64_t bs = (static_cast<std::int64_t>(bh) * s.N + n) * s.D + d;
  Slot<Num> x;
  x.a = lift<Num>(a_bar[hs]);
  x.a2 = x.a * x.a;
  x.p = lift<Num>(p_bar[hs]);
  x.lam0 = lift<Num>(lambda_init ? lambda_init[bs] : lambda0);
  x.eta0 = lift<Num>(eta_init ? eta_init[bs] : 0.0f);
  return x;
}

template <class E, class Num>
__global__ void __launch_bounds__(kSlots) mobius_aggregates(Shape s, const E* __restrict__ k,
                                                            const float* __restrict__ lv,
                                                            const float* __restrict__ a_bar,
                                                            const float* __restrict__ p_bar,
                                                            Mobius<Num>* __restrict__ agg) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  const int b = bh / s.H, h = bh % s.H, t0 = c * kChunk, t1 = min(s.len(b), t0 + kChunk);
  if (t0 >= t1) return;  // past this sequence's end (varlen)
  const std::int64_t hs = (static_cast<std::int64_t>(h) * s.N + n) * s.D + d;
  const Num a = lift<Num>(a_bar[hs]), a2 = a * a, p = lift<Num>(p_bar[hs]);
  Mobius<Num> local{};
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h);
    const Mobius<Num> m =
        kla::step_matrix(lift<Num>(Elem<E>::to_float(k[r * s.N + n])), lift<Num>(lv[r * s.D + d]), a2, p);
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
  const int chunks = s.nchunks(bh / s.H);  // this sequence's (varlen)
  if (chunks == 0) return;
  X running = x[s.ws(bh, 0, n, d)];
  for (int c = 1; c < chunks; ++c) {
    const std::int64_t i = s.ws(bh, c, n, d);
    const X own = x[i];
    x[i] = running;
    if (c + 1 < chunks) running = kla::stored<E>(kla::compose(running, own));
  }
}

// Stages 3 and 5 share the walk over one chunk of one slot: Λ_t from the carried
// Möbius prefix (Cor. 1.1), the affine prefix of the mean track inside the chunk
// and, with a carried affine prefix, η_t = A_{1:t} η_0 + b_{1:t} (Cor. 2.1).
template <class Num>
struct SlotWalk {
  Slot<Num> x;
  Mobius<Num> carry_m;    // the carry-ins (unused in chunk 0, where they are the identity)
  Affine<Num> carry_a;
  bool carried_m, carried_a;
  Num lam_prev;           // Λ_{t−1}
  Mobius<Num> local{};    // M_t ⋯ M_{t0}
  Affine<Num> mean{};     // the chunk's affine prefix

  __device__ SlotWalk(const Slot<Num>& s, const Mobius<Num>* cm, const Affine<Num>* ca)
      : x(s), carry_m(cm ? *cm : Mobius<Num>{}), carry_a(ca ? *ca : Affine<Num>{}), carried_m(cm), carried_a(ca) {
    lam_prev = carried_m ? kla::apply(carry_m, x.lam0) : x.lam0;
  }
  // Token t (first: t is the chunk's first token); returns Λ_t, sets eta (with carry_a).
  __device__ Num step(bool first, Num kn, Num lvd, Num vd, Num& eta) {
    const Mobius<Num> m = kla::step_matrix(kn, lvd, x.a2, x.p);
    local = first ? m : kla::compose(local, m);
    const Num lam = kla::apply(carried_m ? kla::compose(carry_m, local) : local, x.lam0);  // P_t(Λ_0)
    // eq. (19): f_t = ā/(ā² + p̄Λ_{t−1}), b_t = k_n (λv_d v_d)
    const Affine<Num> st{x.a / mul_add(x.p, lam_prev, x.a2), kn * (lvd * vd)};
    mean = first ? st : kla::compose(mean, st);
    const Affine<Num> full = carried_a ? kla::compose(carry_a, mean) : mean;
    eta = mul_add(full.A, x.eta0, full.B);
    lam_prev = lam;
    return lam;
  }
};

template <class E, class Num>
__global__ void __launch_bounds__(kSlots) affine_aggregates(Shape s, const E* __restrict__ k,
                                                            const E* __restrict__ v, const float* __restrict__ lv,
                                                            const float* __restrict__ a_bar,
                                                            const float* __restrict__ p_bar,
                                                            const float* __restrict__ lambda_init,
                                                            const float* __restrict__ eta_init, float lambda0,
                                                            const Mobius<Num>* __restrict__ carry_m,
                                                            Affine<Num>* __restrict__ agg) {
  const int c = blockIdx.x, bh = blockIdx.y, slot = blockIdx.z * kSlots + threadIdx.x;
  if (slot >= s.N * s.D) return;
  const int n = slot / s.D, d = slot % s.D;
  const int b = bh / s.H, h = bh % s.H, t0 = c * kChunk, t1 = min(s.len(b), t0 + kChunk);
  if (t0 >= t1) return;  // past this sequence's end (varlen)
  const Mobius<Num> cm = carry_m[s.ws(bh, c, n, d)];
  SlotWalk<Num> w(load_slot<Num>(s, a_bar, p_bar, lambda_init, eta_init, lambda0, bh, n, d), c > 0 ? &cm : nullptr,
                  nullptr);
  for (int t = t0; t < t1; ++t) {
    const std::int64_t r = s.row(b, t, h);
    Num eta;
    (void)w.step(t == t0, lift<Num>(Elem<E>::to_float(k[r * s.N + n])), lift<Num>(lv[r * s.D + d]),
                 lift<Num>(Elem<E>::to_float(v[r * s.D + d])), eta);
  }
  const Affine<Num> local = w.mean;
  agg[s.ws(bh, c, n, d)] = kla::stored<E>(local);
}

inline Shape shape_of(const KlaArgs& a) { return {a.B, a.T, a.H, a.N, a.D, (a.T + kChunk - 1) / kChunk, a.cu_seqlens}; }
inline unsigned tiles(int n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

// Stages 1–4 on the stream: wm[bh, c] the Möbius carry-in of chunk c, wa[bh, c]
// the affine one (chunk 0's entries hold its own aggregate and are never read).
template <class E, class Num>
void forward_carries(const KlaArgs& a, const Shape& s, Mobius<Num>* wm, Affine<Num>* wa, cudaStream_t stream) {
  const auto* k = static_cast<const E*>(a.k);
  const auto* v = static_cast<const E*>(a.v);
  const dim3 slot_grid(static_cast<unsigned>(s.chunks), static_cast<unsigned>(a.B * a.H), tiles(a.N * a.D, kSlots));
  const dim3 carry_grid(static_cast<unsigned>(a.B * a.H), tiles(a.N * a.D, kSlots));
  mobius_aggregates<E, Num><<<slot_grid, kSlots, 0, stream>>>(s, k, a.lambda_v, a.a_bar, a.p_bar, wm);
  TTR_CUDA_CHECK_LAUNCH("kla mobius_aggregates");
  carries<E, Mobius<Num>><<<carry_grid, kSlots, 0, stream>>>(s, wm);
  TTR_CUDA_CHECK_LAUNCH("kla carries<Mobius>");
  affine_aggregates<E, Num><<<slot_grid, kSlots, 0, stream>>>(s, k, v, a.lambda_v, a.a_bar, a.p_bar, a.lambda_init,
                                                        a.eta_init, a.lambda0, wm, wa);
  TTR_CUDA_CHECK_LAUNCH("kla affine_aggregates");
  carries<E, Affine<Num>><<<carry_grid, kSlots, 0, stream>>>(s, wa);
  TTR_CUDA_CHECK_LAUNCH("kla carries<Affine>");
}

}  // namespace ttr::gpu::kla
