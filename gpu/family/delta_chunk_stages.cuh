// The chunk forward's first two stages (gpu/family/delta_chunk.cu) as the chunk
// backward (gpu/family/delta_chunk_backward.cu) reuses them: FLA's
// chunk_gated_delta_rule_bwd recomputes w, u (recompute_w_u_fwd) and the
// chunk-initial states h with v_new (chunk_gated_delta_rule_fwd_h) by the
// forward's own kernels, and so does ours, so that the backward reads bit for
// bit the forward's W, U, Δ and states (reference/family/delta_chunk_backward.hpp:
// "stepped by the forward's own delta_chunk_sequence").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/seqs.cuh"

namespace ttr::gpu::chunk {

constexpr int kChunk = 64;

// NT chunks, Tp = 64·NT, Kg: gate width (K per-key, else 1). With cu (FLA's varlen,
// gpu/core/seqs.cuh) B counts sequences, T is the longest one's length (NT, Tp size
// the per-sequence workspaces) and sequence b is the packed tokens [cu[b], cu[b+1]).
struct Shape {
  int B, T, H, K, V, NT, Tp, Kg;
  const std::int64_t* cu = nullptr;
  __device__ std::int64_t start(int b) const { return seq_start(cu, b, T); }
  __device__ int len(int b) const { return seq_len(cu, b, T); }
  __device__ int chunks(int b) const { return (len(b) + kChunk - 1) / kChunk; }
};

inline Shape shape_of(const DeltaArgs& a) {
  Shape s{a.B, a.T, a.H, a.K, a.V, (a.T + kChunk - 1) / kChunk, 0, a.decay == Decay::per_key ? a.K : 1, a.cu_seqlens};
  s.Tp = s.NT * kChunk;
  return s;
}

// Stage intermediates, per (b, h) contiguous; E is the dtype of the activations.
struct Work {
  void* W;             // E [BH][Tp][K]     W = T (β ⊙ K ⊙ e^{b}) (FLA's w)
  void* U;             // E [BH][Tp][V]     U = T (β ⊙ V)
  float* G;            // fp32 [BH][Tp][Kg] cumulative gates b, chunk-local (row 63 holds b_last)
  void* Hs;            // E [BH][NT][K][V]  chunk-initial states narrowed (FLA's h, the operands)
  void* D;             // E [BH][Tp][V]     Δ (FLA's v_new); rows past T not written
  void* WD;            // E [BH][Tp][K]     write keys decayed to the chunk end, narrow(w ⊙ e^{b_last − b})
  void* Tn = nullptr;  // optional E [BH][NT][64][64]: the narrowed UT inverse T = (I + A)⁻¹
  // Tn already holds the inverses (the forward's, kept): stage 1 reads them instead of
  // forming A and inverting it (FLA's backward: recompute_w_u_fwd from the saved A).
  bool t_given = false;
};

// Stage 1 (ut_transform, grid chunks × B·H) and stage 2 (state_pass, grid V-tiles
// × B·H) of the chunk forward into `w`, on a.stream; a.ht is written when given.
void launch_ut_transform(const DeltaArgs& a, const Shape& s, const Work& w);
void launch_state_pass(const DeltaArgs& a, const Shape& s, const Work& w);

}  // namespace ttr::gpu::chunk
