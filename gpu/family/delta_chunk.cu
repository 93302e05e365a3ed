// Chunkwise forward of the delta rule with decay on the GPU: the algorithm of
// reference/family/delta_chunk.hpp (PDN §2.2 and eq. (6), App. D and F; the
// WY representation / UT transform), split the way FLA's chunk_gated_delta_rule
// splits it, so that each stage has enough independent blocks to fill the chip:
//
//   1. ut_transform   (grid: chunks × B·H)      per chunk, independent:
//        b = cumsum(g) inside the chunk                         (fp32)
//        A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1),  T = (I + A)⁻¹       (fp32, T stored narrowed)
//        W = T (β ⊙ K ⊙ e^{b}),  U = T (β ⊙ V)                  (stored narrowed)
//   2. state_pass     (grid: V-tiles × B·H)     sequential over chunks:
//        h_n = narrow(S)  (the chunk-initial state as an operand, stored)
//        Δ = narrow(U − W h_n)                                  (FLA's v_new, stored)
//        S ← Diag(e^{b_last}) S + (w ⊙ e^{b_last − b})ᵀ Δ       (fp32 state)
//   3. outputs        (grid: chunks × V-tiles × B·H), independent:
//        O = (Q ⊙ e^{b}) h_n + [Q wᵀ ⊙ Γ]_{s ≤ t} Δ,  o = narrow(scale · O)
//
// The state's V columns are independent in the delta rule (δ_t's column j reads
// only column j of S), which is what lets stage 2 split V across blocks.
// Narrowing points are those of docs/arithmetic-policies.md ("Delta family
// chunk"); every product accumulates in fp32 (tensor cores for bf16, FMA for fp32).
// Per-key decay (KDA) cannot be factored without e^{+b}, so A and the score
// matrix are then formed pair by pair in fp32, as the reference does.
//
// Two implementations of the stages: the generic kernels of delta_chunk_fp32.cuh
// (WMMA/FMA block_gemm on shared-memory tiles) serve fp32; bf16 runs the kernels of
// delta_chunk_bf16.cuh (raw mma.sync fragments in registers, the state pass's S
// held in accumulators across chunks, one output block per chunk and head), the
// same arithmetic at the same narrowing points, only faster.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/cluster.cuh"
#include "gpu/core/env_switch.hpp"
#include "gpu/core/launch.cuh"
#include "gpu/core/mma.cuh"
#include "gpu/core/mma_sync.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/tile.cuh"
#include "gpu/family/delta_chunk_stages.cuh"
#include "gpu/family/delta_state_wgmma.hpp"

namespace ttr::gpu {
namespace {

using chunk::kChunk;
using chunk::Shape;
using chunk::Work;  // stage intermediates (delta_chunk_stages.cuh)
constexpr int kThreads = 256;

// T = (I + A)⁻¹ for a strictly lower triangular 64×64 fp32 A in shared memory
// (leading dimension lda), by forward substitution, one column per group of 4
// threads (256 threads): column j of T solves (I + A) x = e_j,
// x_t = [t = j] − Σ_{s<t} A_ts x_s (x_s = 0 for s < j, so the formula needs no case
// for t < j). The columns are independent; the 4 threads split the sum over
// s ≡ part (mod 4), and each keeps its x_s in registers (t and the slot are
// compile-time after unrolling), so only A is read from shared memory, ~t/4 loads
// per step. store(t, j, x) receives every entry of T, from one thread each.
template <class Store>
__device__ inline void unit_lower_inverse(const float* A, int lda, Store&& store) {
  const int j = threadIdx.x / 4, part = threadIdx.x % 4;
  float xs[kChunk / 4];
#pragma unroll
  for (int i = 0; i < kChunk / 4; ++i) xs[i] = 0.0f;
#pragma unroll
  for (int t = 0; t < kChunk; ++t) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < (t + 3) / 4; ++i) {
      const int s2 = part + 4 * i;
      const float a = A[t * lda + min(s2, kChunk - 1)];
      acc = fmaf(s2 < t ? a : 0.0f, xs[i], acc);
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    const float x = (t == j ? 1.0f : 0.0f) - acc;
    if (part == (t & 3)) xs[t >> 2] = x;
    if (part == 0) store(t, j, x);
  }
}

#include "gpu/family/delta_chunk_fp32.cuh"
#include "gpu/family/delta_chunk_bf16.cuh"

// ---------------------------------------------------------------- host side
template <class Kern>
void set_smem(Kern kernel, std::size_t bytes) {
  allow_smem(kernel, bytes, "gpu delta kernel");
}

// Stage 1: the bf16 kernel of delta_chunk_bf16.cuh, the generic one for fp32.
template <class E, Decay D>
void stage1(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  const E* k = static_cast<const E*>(a.k);
  const E* w = static_cast<const E*>(a.w);
  const E* v = static_cast<const E*>(a.v);
  const E* beta = static_cast<const E*>(a.beta);
  auto run = [&](auto given) {
    constexpr bool G = decltype(given)::value;
    if constexpr (std::is_same_v<E, __nv_bfloat16>) {
      const std::size_t sm1 = bf16k::ut_smem(s, w != nullptr, G);
      with_static_kv(s.K, s.V, [&](auto kv) {
        constexpr int KV = decltype(kv)::value;
        set_smem(bf16k::ut_transform<D, KV, G>, sm1);
        bf16k::ut_transform<D, KV, G><<<dim3(s.NT, BH), kThreads, sm1, stream>>>(s, k, w, v, beta, a.g, a.kaczmarz,
                                                                                  a.kaczmarz_eps, work);
      });
    } else {
      const std::size_t sm1 = ut_smem<E>(s, w != nullptr);
      set_smem(ut_transform_kernel<E, D, G>, sm1);
      ut_transform_kernel<E, D, G><<<dim3(s.NT, BH), kThreads, sm1, stream>>>(s, k, w, v, beta, a.g, a.kaczmarz,
                                                                               a.kaczmarz_eps, work);
    }
  };
  if (work.t_given) run(std::true_type{});
  else run(std::false_type{});
  TTR_CUDA_CHECK_LAUNCH("ut_transform_kernel");
}

// Stage 2. bf16: state-pass tiles of 32 columns where V is a multiple of 32 (else 16),
// B·H·V/32 blocks (128 at B = 4, H = 8, V = 128), each reading a chunk's W tiles once
// for 32 columns: the pass is bound by those L2 reads, which 16-column tiles made
// twice (docs/gpu-delta-backward-speed-2026-12-06.md). TTR_GPU_STATE_BV (read at every launch)
// chooses another tiling: "16" (two blocks a multiprocessor whose sequential chains
// hide each other's latency; the default until 2026-12-06), "32x2" (two warps a
// 16-row strip, each 16 columns); "16c" and "32x2c" run a head's column blocks as
// one cluster of 2, 4 or 8 (the largest that divides V/BV) that shares each chunk's
// W tiles by multicast. All give the same bits (their check:
// CudaDelta.StatePassTilingsGiveTheSameBits); the clusters measured slowest.
// The 32-column tilings hold three chunks' inputs (two chunks of lookahead for the
// loads; the same bits), the others two: TTR_GPU_STATE_STAGES=2|3 sets it. The
// default ("32w" by name) runs the Hopper pass instead (delta_state_wgmma_sm90a.cu:
// one warpgroup a block, wgmma; its own summation order inside a product step, so not
// the same bits) where the device is compute capability 9.0 and K = 128; "32" keeps
// the mma.sync pass there.
// fp32: 16 columns, double-buffered where shared memory allows.
#include "gpu/family/delta_state_tiling.cuh"

template <class E, Decay D>
void stage2(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const StateTiling t = state_tiling(a.K, a.V);
    if (t.hopper) return chunk::launch_hopper_state_pass(a, s, work, stream);
    const unsigned cx = t.cluster ? cluster_blocks(a.V / t.bv) : 1;
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      if (t.bv == 32 && t.split == 2) {
        if (cx > 1) return launch_bf16_state_pass<D, 32, KV, 2, true>(a, s, work, BH, stream, 2, cx);
        return launch_bf16_state_pass<D, 32, KV, 2>(a, s, work, BH, stream, t.stages);
      }
      if (t.bv == 32) return launch_bf16_state_pass<D, 32, KV, 1>(a, s, work, BH, stream, t.stages);
      if (cx > 1) return launch_bf16_state_pass<D, 16, KV, 1, true>(a, s, work, BH, stream, 2, cx);
      launch_bf16_state_pass<D, 16, KV, 1>(a, s, work, BH, stream, t.stages);
    });
  } else {
    const int bv2 = 16;
    const int smem_max = max_smem_optin();
    const int stages = state_smem<E>(s, bv2, 2) <= static_cast<std::size_t>(smem_max) ? 2 : 1;
    const std::size_t sm2 = state_smem<E>(s, bv2, stages);
    set_smem(state_pass_kernel<E, D>, sm2);
    state_pass_kernel<E, D><<<dim3(a.V / bv2, BH), kThreads, sm2, stream>>>(s, bv2, stages, a.h0, a.ht, work);
  }
  TTR_CUDA_CHECK_LAUNCH("state_pass_kernel");
}

// Stage 3: bf16 one block per (chunk, head) over all of V; fp32 V tiles of 64
// (or 32, 16) columns.
template <class E, Decay D>
void stage3(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  const E* q = static_cast<const E*>(a.q);
  const E* wkey = static_cast<const E*>(a.w ? a.w : a.k);
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const std::size_t sm3 = bf16k::output_smem(s);
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      set_smem(bf16k::output<D, KV>, sm3);
      bf16k::output<D, KV><<<dim3(s.NT, BH), kThreads, sm3, stream>>>(s, q, wkey, a.scale, static_cast<E*>(a.o), work);
    });
  } else {
    const int bv3 = a.V % 64 == 0 ? 64 : (a.V % 32 == 0 ? 32 : 16);
    const std::size_t sm3 = output_smem<E>(s, bv3);
    set_smem(output_kernel<E, D>, sm3);
    output_kernel<E, D><<<dim3(s.NT, a.V / bv3, BH), kThreads, sm3, stream>>>(s, bv3, q, wkey, a.scale,
                                                                               static_cast<E*>(a.o), work);
  }
  TTR_CUDA_CHECK_LAUNCH("output_kernel");
}

template <class E, Decay D>
void launch(const DeltaArgs& a) {
  const Shape s = chunk::shape_of(a);
  auto stream = static_cast<cudaStream_t>(a.stream);
  const std::int64_t BH = static_cast<std::int64_t>(a.B) * a.H;
  const std::size_t bytesW = BH * s.Tp * a.K * sizeof(E), bytesU = BH * s.Tp * a.V * sizeof(E);
  const std::size_t bytesG = BH * s.Tp * s.Kg * sizeof(float), bytesH = BH * s.NT * a.K * a.V * sizeof(E);
  unsigned char* ws = nullptr;
  const std::size_t total = 2 * bytesW + 2 * bytesU + bytesG + bytesH + 6 * 256;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), total, stream));
  auto align = [](std::size_t x) { return (x + 255) / 256 * 256; };
  Work work{};
  std::size_t off = 0;
  work.W = ws + off, off += align(bytesW);
  work.WD = ws + off, off += align(bytesW);
  work.U = ws + off, off += align(bytesU);
  work.D = ws + off, off += align(bytesU);
  work.G = reinterpret_cast<float*>(ws + off), off += align(bytesG);
  work.Hs = ws + off;
  work.Tn = a.ut_inverse_out;  // stage 1 writes it where given
  // TTR_GPU_STAGE_TIMING=1: per-stage event times on stderr (benchmarking aid).
  StageTimer timer(stream, {"ut_transform", "state_pass", "output"});
  try {
    timer.mark(0);
    stage1<E, D>(a, s, work, stream);
    timer.mark(1);
    stage2<E, D>(a, s, work, stream);
    timer.mark(2);
    stage3<E, D>(a, s, work, stream);
    timer.mark(3);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
  timer.print();
}

template <class E>
void launch_decay(const DeltaArgs& a) {
  switch (a.decay) {
    case Decay::none: return launch<E, Decay::none>(a);
    case Decay::scalar: return launch<E, Decay::scalar>(a);
    case Decay::per_key: return launch<E, Decay::per_key>(a);
  }
}

// One of the stages for the dtype and decay of `a`.
template <template <class, Decay> class Stage>
void dispatch(const DeltaArgs& a, const Shape& s, const Work& w) {
  auto stream = static_cast<cudaStream_t>(a.stream);
  auto by_decay = [&](auto e) {
    using E = decltype(e);
    switch (a.decay) {
      case Decay::none: return Stage<E, Decay::none>::run(a, s, w, stream);
      case Decay::scalar: return Stage<E, Decay::scalar>::run(a, s, w, stream);
      case Decay::per_key: return Stage<E, Decay::per_key>::run(a, s, w, stream);
    }
  };
  if (a.dtype == DType::bf16) by_decay(__nv_bfloat16{});
  else by_decay(float{});
}
template <class E, Decay D>
struct Stage1 {
  static void run(const DeltaArgs& a, const Shape& s, const Work& w, cudaStream_t st) { stage1<E, D>(a, s, w, st); }
};
template <class E, Decay D>
struct Stage2 {
  static void run(const DeltaArgs& a, const Shape& s, const Work& w, cudaStream_t st) { stage2<E, D>(a, s, w, st); }
};

}  // namespace

void delta_chunk_forward(const DeltaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

std::size_t delta_ut_inverse_bytes(const DeltaArgs& a) {
  const std::size_t tiles = static_cast<std::size_t>(a.B) * a.H * ((a.T + chunk::kChunk - 1) / chunk::kChunk);
  return tiles * chunk::kChunk * chunk::kChunk * (a.dtype == DType::bf16 ? 2 : 4);
}

namespace chunk {
void launch_ut_transform(const DeltaArgs& a, const Shape& s, const Work& w) { dispatch<Stage1>(a, s, w); }
void launch_state_pass(const DeltaArgs& a, const Shape& s, const Work& w) { dispatch<Stage2>(a, s, w); }
}  // namespace chunk

}  // namespace ttr::gpu
