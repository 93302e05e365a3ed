// Chunk backward of the delta rule with decay, chunk size 64: the algorithm and
// the narrowing points of reference/family/delta_chunk_backward.hpp (the adjoint
// of the chunk form's own equations; docs/arithmetic-policies.md, "Delta family
// chunk backward"), split the way FLA's chunk_gated_delta_rule_bwd splits it so
// that every stage but the two state passes is parallel over the chunks:
//
//   1. ut_transform  (chunks × B·H)   the forward's stage 1 (delta_chunk.cu):
//        b, A, T = (I + A)⁻¹ (kept, narrowed), W, U, W ⊙ e^{b_last − b}; given the
//        forward's T (DeltaBackwardArgs::ut_inverse), b, W, U and W ⊙ e^{b_last − b} from it
//   2. state_pass    (V/16 × B·H)     the forward's stage 2: Δ and the chunk-initial
//        states S_0, stored narrowed (FLA's h: every later read, the gate term's included)
//   3. prep          (chunks × B·H)   the scores M = narrow([Q Kᵀ ⊙ Γ]_{s≤t}), Q ⊙ e^{b}
//   4. dstate_pass   (V/BV × B·H)     sequential, last chunk first: dH = narrow(dS_end),
//        dΔ, dS ← Diag(e^{b_last}) dS + scale·(Q⊙e^b)ᵀ dO − Wᵀ dΔ, dh0
//   5. dqkwg         (K/KB × chunks × B·H)   dq, the write key's dw, dWy, gate partials
//   6. wy            (chunks × B·H)   the UT backward: dv, dk, dβ, dg
//   7. finish        (rows)           delta_backward_finish.cuh: dk + dw, Kaczmarz, L2 norm
//
// The preconditioned layers (write key w = k̃ ≠ k, DeltaBackwardArgs::atk): stages
// 1–6 read k̃ where the chunk form reads the write key, wy leaves the read and the
// write key's gradients apart, and the preconditioner's adjoint
// (gpu/family/atk_backward.cu) turns dk̃ into its part of dk before finish.
//
// The catalogue's backward mutants of the delta family's chunk form have their
// counterparts in these stages (gpu/core/mutant.cuh; DeltaBackwardArgs::mutant),
// each planted where the CPU form plants it (reference/family/
// delta_chunk_backward.hpp): the state pass (dht-ignored, dh-pass-undecayed,
// dh0-not-written, dv-state-gradient-late), dqkwg (dq-scale-*, dq-first-token-
// intra-dropped, dg-query-term-dropped), wy (dk-wy-term-dropped, dk-undecayed-key,
// ut-adjoint-transposed, wy-backward-offblock-dropped, dbeta-sign-flipped,
// dg-revcumsum-exclusive), both (backward-gate-exp-unmasked, backward-last-partial-
// chunk-dropped), a carry pass (dg-revcumsum-not-reset) and finish
// (l2norm-backward-skipped).
//
// Stages 1–2 are the forward's kernels, so W, U, Δ and the states are bit for bit
// the forward's (as the reference steps its states with the forward's code).
// bf16 products run on the tensor cores (mma.sync, fp32 accumulation); fp32
// products are fp32 FMA (common.cuh). No atomics: every sum has a fixed order,
// so repeated runs are bit-identical.
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/launch.cuh"
#include "gpu/family/atk_backward.cuh"
#include "gpu/family/delta_backward_finish.cuh"
#include "gpu/family/delta_chunk_backward/dqkwg.cuh"
#include "gpu/family/delta_chunk_backward/prep.cuh"
#include "gpu/family/delta_chunk_backward/state_pass.cuh"
#include "gpu/family/delta_chunk_backward/wy.cuh"
#include "gpu/family/delta_chunk_stages.cuh"
#include "gpu/family/delta_dstate_wgmma.hpp"
#include "gpu/family/delta_wy_wgmma.hpp"

namespace ttr::gpu {
namespace {

using chunk_bwd::Args;
using chunk_bwd::Work;

// Carves the workspace: one allocation, 256-byte aligned pieces.
struct Carver {
  unsigned char* base;
  std::size_t off = 0;
  static std::size_t up(std::size_t x) { return (x + 255) / 256 * 256; }
  template <class T>
  T* take(std::size_t bytes) {
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += up(bytes);
    return p;
  }
};

// t_given: the forward's UT inverses are the caller's (DeltaBackwardArgs::ut_inverse).
template <class E, Decay D>
Work carve(Carver& cv, const chunk::Shape& s, int NVT, int NKB, int KB, const void* t_given) {
  const std::size_t BH = static_cast<std::size_t>(s.B) * s.H, rowsP = BH * s.Tp, es = sizeof(E);
  const std::size_t states = BH * s.NT * s.K * s.V;
  Work w{};
  w.fwd.W = cv.take<void>(rowsP * s.K * es);
  w.fwd.WD = cv.take<void>(rowsP * s.K * es);
  w.fwd.U = cv.take<void>(rowsP * s.V * es);
  w.fwd.D = cv.take<void>(rowsP * s.V * es);
  w.fwd.G = cv.take<float>(rowsP * s.Kg * 4);
  w.fwd.Hs = cv.take<void>(states * es);
  if (t_given) w.fwd.Tn = const_cast<void*>(t_given), w.fwd.t_given = true;  // read only (stage 1, wy)
  else w.fwd.Tn = cv.take<void>(BH * s.NT * chunk::kChunk * chunk::kChunk * es);
  w.M = cv.take<void>(rowsP * chunk::kChunk * es);
  w.QD = cv.take<void>(rowsP * s.K * es);
  w.dH = cv.take<void>(states * es);
  w.dD = cv.take<void>(rowsP * s.V * es);
  w.rowdot = cv.take<float>(BH * s.NT * NVT * s.K * 4);
  w.dWy = cv.take<void>(rowsP * s.K * es);
  w.dWk = cv.take<float>(rowsP * s.K * 4);
  w.dbp = cv.take<float>(D == Decay::none ? 0 : (D == Decay::per_key ? rowsP * s.K * 4 : NKB * rowsP * 4));
  w.NVT = NVT, w.NKB = NKB, w.KB = KB;
  return w;
}

// mutant dg-revcumsum-not-reset: dg's reverse cumulative sum carried on across the
// chunks (a global reverse sum where the chunk-local one is meant): each chunk's
// rows get the sum of every later chunk's db, which is their chunk-local sums'
// first rows. One thread per (b, h, gate column), the chunks last first.
__global__ void dg_carry_across_chunks(float* dg, chunk::Shape s) {
  const int bh = blockIdx.x, b = bh / s.H, h = bh % s.H, d = threadIdx.x, T = s.len(b);
  if (d >= s.Kg) return;
  const std::int64_t first = s.start(b);
  auto at = [&](int t) -> float& { return dg[((first + t) * s.H + h) * s.Kg + d]; };
  float carry = 0.0f;
  for (int t0 = (T - 1) / chunk::kChunk * chunk::kChunk; t0 >= 0; t0 -= chunk::kChunk) {
    const float total = at(t0);
    for (int t = t0; t < min(T, t0 + chunk::kChunk); ++t) at(t) += carry;
    carry += total;
  }
}

// Every stage here holds its tiles in shared memory and reads global memory once:
// the carveout is asked for all of it (a hint), so that two blocks of wy and dqkwg
// (98 816 and 107 520 bytes in bf16 at K = V = 128) fit on a multiprocessor.
template <class Kern>
void set_smem(Kern kernel, std::size_t bytes) {
  allow_smem(kernel, bytes, "gpu delta chunk backward");
  TTR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
}

template <class E, Decay D, int BV, int KV>
void launch_dstate(const Args<E>& a, const Work& w, unsigned BH, cudaStream_t stream) {
  // Two warps a 16-row strip where the shape is known at compile time to fill them
  // (bf16, K = V = 128, BV = 32: 16 warps in 217 600 bytes of shared memory with
  // three stages, scalar gates), else one.
  constexpr int SPLIT = sizeof(E) == 2 && KV == 128 && BV == 32 ? 2 : 1;
  // As many stages (up to 3) as shared memory holds: bf16 at K = V = 128 has 3, fp32 1.
  const auto fits = [&](int n) {
    return chunk_bwd::dstate_smem<E, D>(a.s, BV, n, SPLIT) <= std::size_t(max_smem_optin());
  };
  const int stages = fits(3) ? 3 : fits(2) ? 2 : 1;
  const std::size_t sm = chunk_bwd::dstate_smem<E, D>(a.s, BV, stages, SPLIT);
  set_smem(chunk_bwd::dstate_pass<E, D, BV, KV, SPLIT>, sm);
  chunk_bwd::dstate_pass<E, D, BV, KV, SPLIT><<<dim3(a.s.V / BV, BH), SPLIT * 2 * a.s.K, sm, stream>>>(a, w, stages);
}

template <class E, Decay D>
void launch(const DeltaBackwardArgs& x) {
  DeltaArgs f = x.fwd;
  f.ht = nullptr;  // the final state is not needed
  f.ut_inverse_out = nullptr;  // stage 1 writes the workspace's (or reads x.ut_inverse)
  if (!x.atk) f.w = nullptr;  // w = k (validate)
  const chunk::Shape s = chunk::shape_of(f);
  // Read (and a value it does not know refused) before anything is allocated or
  // launched, whatever the dtype: the Hopper wy stage runs in bf16 only.
  const bool hopper_wy = chunk_bwd::hopper_wy_chosen(D, s.K, s.V, f.w != nullptr) && std::is_same_v<E, __nv_bfloat16>;
  auto stream = static_cast<cudaStream_t>(f.stream);
  const unsigned BH = static_cast<unsigned>(f.B) * f.H;
  // Token rows of the gradients: B·T·H, or the packed tokens' under varlen (the
  // partials below hold B·T·H ≥ them, indexed as the gradients).
  const std::size_t rows = static_cast<std::size_t>(BH) * f.T;
  const std::size_t out_rows = f.cu_seqlens ? static_cast<std::size_t>(f.packed_tokens) * f.H : rows;
  // State-pass column tiles of 32 (V/32 · B·H blocks, 128 at the benchmark's
  // B = 4, H = 8, V = 128: one per multiprocessor), else 16.
  const int BV = f.V % 32 == 0 ? 32 : 16, NVT = f.V / BV;
  constexpr int KB = chunk_bwd::dqkwg_kb<E>();
  const int NKB = (f.K + KB - 1) / KB;
  Carver sizing{nullptr};
  carve<E, D>(sizing, s, NVT, NKB, KB, x.ut_inverse);
  // Without Kaczmarz and the L2 norm, finish would only round the partials to the
  // dtype: the stages write the final gradients themselves (dg straight into its
  // fp32 output), and neither the fp32 partials nor finish's pass over them exist.
  // The preconditioned layers keep the partials: dk̃ goes through the preconditioner first.
  const bool direct = !f.kaczmarz && x.q_raw == nullptr && !x.atk;
  const std::size_t partials =
      direct ? 0
             : Carver::up(rows * f.K * 4) * (x.atk ? 4 : 2) + Carver::up(rows * s.Kg * 4) + Carver::up(rows * 4);
  unsigned char* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), sizing.off + partials, stream));
  Carver cv{ws};
  const Work w = carve<E, D>(cv, s, NVT, NKB, KB, x.ut_inverse);
  Args<E> a{};
  a.s = s;
  a.q = static_cast<const E*>(f.q), a.k = static_cast<const E*>(f.k), a.v = static_cast<const E*>(f.v);
  a.beta = static_cast<const E*>(f.beta), a.do_ = static_cast<const E*>(x.do_);
  const bool own_w = f.w != nullptr;  // the preconditioned layers' k̃
  a.w = own_w ? static_cast<const E*>(f.w) : a.k;
  a.dht = x.dht, a.dh0 = x.dh0, a.dv = static_cast<E*>(x.dv);
  a.out.dw = nullptr;  // wy writes dk + dw (own_w: apart, below)
  float* dk_atk = nullptr;
  if (direct) {
    a.dq_out = static_cast<E*>(x.dq), a.dk_out = static_cast<E*>(x.dk), a.dbeta_out = static_cast<E*>(x.dbeta);
    a.out.dg = x.dg;
  } else {
    a.out.dq = cv.take<float>(rows * f.K * 4);
    a.out.dk = cv.take<float>(rows * f.K * 4);
    a.out.dg = cv.take<float>(rows * s.Kg * 4);
    a.out.dbeta = cv.take<float>(rows * 4);
    if (x.atk) a.out.dw = cv.take<float>(rows * f.K * 4), dk_atk = cv.take<float>(rows * f.K * 4);
  }
  a.scale = f.scale, a.eps = f.kaczmarz_eps, a.kaczmarz = f.kaczmarz;
  a.mutant = x.mutant;
  // TTR_GPU_STAGE_TIMING=1: per-stage event times on stderr (benchmarking aid).
  StageTimer timer(stream, {"ut_transform", "state_pass", "prep", "dstate_pass", "dqkwg", "wy", "finish"});
  try {
    timer.mark(0);
    chunk::launch_ut_transform(f, s, w.fwd);
    timer.mark(1);
    chunk::launch_state_pass(f, s, w.fwd);
    timer.mark(2);
    const std::size_t sm3 = chunk_bwd::prep_smem<E>(s);
    set_smem(chunk_bwd::prep<E, D>, sm3);
    chunk_bwd::prep<E, D><<<dim3(s.NT, BH), chunk_bwd::kThreads, sm3, stream>>>(a, w);
    TTR_CUDA_CHECK_LAUNCH("chunk backward prep");
    timer.mark(3);
    // The Hopper pass (delta_dstate_wgmma_sm90a.cu) where the forward's runs: by default
    // (or TTR_GPU_STATE_BV=32w) on compute capability 9.0, K = 128.
    constexpr bool is_bf16 = std::is_same_v<E, __nv_bfloat16>;
    if (is_bf16 && BV == 32 && chunk::hopper_state_passes_chosen(s.K, s.V)) {
      if constexpr (is_bf16) chunk_bwd::launch_hopper_dstate_pass(D, a, w, BH, stream);
    } else {
      with_static_kv(s.K, s.V, [&](auto kv) {
        if (BV == 32) launch_dstate<E, D, 32, decltype(kv)::value>(a, w, BH, stream);
        else launch_dstate<E, D, 16, decltype(kv)::value>(a, w, BH, stream);
      });
    }
    TTR_CUDA_CHECK_LAUNCH("chunk backward dstate_pass");
    timer.mark(4);
    const std::size_t sm5 = chunk_bwd::dqkwg_smem<E, D>(s);
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      set_smem(chunk_bwd::dqkwg<E, D, KV>, sm5);
      chunk_bwd::dqkwg<E, D, KV><<<dim3(NKB, s.NT, BH), chunk_bwd::kThreads, sm5, stream>>>(a, w);
    });
    TTR_CUDA_CHECK_LAUNCH("chunk backward dqkwg");
    timer.mark(5);
    // The Hopper stage (delta_wy_wgmma_sm90a.cu) on compute capability 9.0 where it
    // applies (bf16, K = V = 128, k the write key, no per-key gate) unless TTR_GPU_WY=mma.
    if (hopper_wy) {
      if constexpr (is_bf16) chunk_bwd::launch_hopper_wy(D, a, w, BH, stream);
    } else {
      const std::size_t sm6 = chunk_bwd::wy_smem<E, D>(s, own_w);
      with_static_kv(s.K, s.V, [&](auto kv) {
        constexpr int KV = decltype(kv)::value;
        // A write key of its own: the preconditioned layers, whose gate is scalar (validate).
        if constexpr (D == Decay::scalar)
          if (own_w) {
            set_smem(chunk_bwd::wy<E, D, KV, true>, sm6);
            chunk_bwd::wy<E, D, KV, true><<<dim3(s.NT, BH), chunk_bwd::kThreads, sm6, stream>>>(a, w);
            return;
          }
        set_smem(chunk_bwd::wy<E, D, KV>, sm6);
        chunk_bwd::wy<E, D, KV><<<dim3(s.NT, BH), chunk_bwd::kThreads, sm6, stream>>>(a, w);
      });
    }
    TTR_CUDA_CHECK_LAUNCH("chunk backward wy");
    if (D != Decay::none && mutated(x.mutant, Mutant::dg_revcumsum_not_reset)) {
      dg_carry_across_chunks<<<BH, s.Kg, 0, stream>>>(a.out.dg, s);
      TTR_CUDA_CHECK_LAUNCH("chunk backward dg carry (mutant)");
    }
    delta_backward::DeltaGradPartials parts = a.out;
    if (x.atk) {  // dk̃ (narrowed by wy, as the form writes it) through the preconditioner's adjoint
      atk::backward(*x.atk, a.out.dw, 1, static_cast<std::int64_t>(out_rows), f.dtype, dk_atk, stream);
      parts.dw = nullptr, parts.dk_extra = dk_atk;
    }
    timer.mark(6);
    // dq is already scaled: scale 1 in finish.
    const unsigned blocks = direct ? 0 : static_cast<unsigned>((out_rows + 7) / 8);
    if (blocks > 0)  // none when every sequence of a varlen batch is empty
    delta_backward::finish<E, D><<<blocks, 256, 0, stream>>>(
        static_cast<std::int64_t>(out_rows), f.K, 1, a.k, static_cast<const E*>(x.q_raw), static_cast<const E*>(x.k_raw),
        a.beta, f.kaczmarz, f.kaczmarz_eps, x.l2_eps, 1.0f, parts, static_cast<E*>(x.dq), static_cast<E*>(x.dk),
        static_cast<E*>(x.dbeta), x.dg, !mutated(x.mutant, Mutant::l2norm_backward_skipped));
    TTR_CUDA_CHECK_LAUNCH("finish");
    timer.mark(7);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
  timer.print();
}

template <class E>
void launch_decay(const DeltaBackwardArgs& a) {
  switch (a.fwd.decay) {
    case Decay::none: return launch<E, Decay::none>(a);
    case Decay::scalar: return launch<E, Decay::scalar>(a);
    case Decay::per_key: return launch<E, Decay::per_key>(a);
  }
}

}  // namespace

void delta_chunk_backward(const DeltaBackwardArgs& a) {
  validate(a);
  if (a.fwd.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

}  // namespace ttr::gpu
