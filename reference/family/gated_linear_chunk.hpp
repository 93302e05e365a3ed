// Chunkwise form of linear attention with decay (linear_attn, simple_gla, gla):
// PDN §2.1 (Yang et al.'s chunkwise parallel linear attention) with the decay
// of PDN §3.4 / Mamba-2 / GLA. For a chunk [t0, t0 + c) with initial state S_0
// and cumulative log decay b_t (chunk_common.hpp):
//
//   O     = (Q ⊙ e^{b}) S_0 + [Q Kᵀ ⊙ Γ]_{s ≤ t} V                 (inter + intra chunk)
//   S_end = Diag(e^{b_last}) S_0 + (K ⊙ e^{b_last − b})ᵀ V            (state passing)
//
// which unrolls S_t = Diag(e^{g_t}) S_{t−1} + k_t v_tᵀ over the chunk exactly;
// the output is scaled by `scale` after the products (FLA's chunk_fwd_o).
//
// Arithmetic policy P (reference/core/policy.hpp). Narrowed to the 16-bit format:
// q, k, v; the decayed operands Q ⊙ e^{b} and K ⊙ e^{b_last − b}; the masked
// score matrix before it multiplies V; the chunk-initial state S_0 when read as
// an operand; the output o. In acc (fp32): gates and their cumulative sums, the
// products' accumulation, and the running state carried between chunks (which
// is also the final state ht).
#pragma once

#include <algorithm>
#include <optional>

#include "reference/core/intermediate.hpp"

#include "reference/family/chunk_common.hpp"

namespace ttr {

template <class P>
struct GatedLinearChunkWork {
  using A = typename P::acc;
  Matrix<A> q, k, v, b, qd, kd, s0, scores, o, state;
};

template <class P>
void gated_linear_chunk_sequence(Decay kind, SeqView<const typename P::acc> q, SeqView<const typename P::acc> k,
                                 SeqView<const typename P::acc> v, SeqView<const typename P::acc> g, std::int64_t len,
                                 int K, int V, const typename P::acc& scale, int chunk, typename P::acc* S,
                                 SeqView<typename P::acc> o, GatedLinearChunkWork<P>& w) {
  using A = typename P::acc;
  // mutant state-leaks-across-heads: a persistent kernel that does not reset its
  // state registers between work items starts this (batch, head) from the final
  // state of the one it ran before (the workspace still holds it) instead of h0.
  const bool leak = mutated(Mutant::state_leaks_across_heads) && w.state.rows == K && w.state.cols == V;
  if (!leak) {
    w.state.assign(K, V, from_double<A>(0.0));
    // mutant h0-ignored: the kernel never loads initial_state (the USE_INITIAL_STATE
    // branch is dead) and starts from zero.
    if (!mutated(Mutant::h0_ignored)) std::copy(S, S + static_cast<std::ptrdiff_t>(K) * V, w.state.a.begin());
  }
  // mutant last-partial-chunk-dropped: a launch grid of T / C chunks (floor, not
  // ceil) skips the last partial chunk: its outputs stay 0 and ht misses it.
  const std::int64_t end = mutated(Mutant::last_partial_chunk_dropped) ? len - len % chunk : len;
  // mutant causal-mask-strict: the intra-chunk score mask drops the diagonal
  // (s < t, the UT matrix's mask), so no token reads its own write.
  const bool strict = mutated(Mutant::causal_mask_strict);
  const bool decay_after = mutated(Mutant::decay_after_update);
  std::optional<NamedIntermediate> phase;  // names for the range trace (reference/core/intermediate.hpp)
  for (std::int64_t t0 = 0; t0 < end; t0 += chunk) {
    const int c = static_cast<int>(std::min<std::int64_t>(chunk, len - t0));
    phase.emplace("chunk inputs q, k, v and cumulative log decays b");
    gather_rows<P>(q, t0, c, K, w.q);
    gather_rows<P>(k, t0, c, K, w.k);
    gather_rows<P>(v, t0, c, V, w.v);
    cumulative_gates(kind, g, t0, c, K, w.b);
    // Inter-chunk: the queries read the decayed chunk-initial state.
    phase.emplace("inter-chunk output (Q ⊙ e^{b}) S_0");
    decay_rows<P>(kind, w.q, w.b, false, w.qd);
    state_operand<P>(w.state.a.data(), K, V, w.s0);
    chunk_gemm_nn<P>(w.qd, w.s0, w.o);
    // Intra-chunk: causal, decayed attention scores (s ≤ t) times V.
    phase.emplace("intra-chunk output [Q Kᵀ ⊙ Γ]_{s ≤ t} V");
    masked_decayed_products<P>(kind, w.q, w.k, w.b, strict, w.scores);
    narrow_all<P>(w.scores.a);
    chunk_gemm_nn<P>(w.scores, w.v, w.o, true);
    scatter_output<P>(w.o, scale, t0, o);
    // State passing to the next chunk.
    phase.emplace("state passing S_end = Diag(e^{b_last}) S_0 + (K ⊙ e^{b_last − b})ᵀ V");
    if (!decay_after) decay_state(kind, w.b, w.state.a.data(), K, V);
    decay_rows<P>(kind, w.k, w.b, true, w.kd);
    chunk_gemm_tn<P>(w.kd, w.v, w.state, true);
    // mutant decay-after-update: `h += kᵀv` before `h *= exp(g_last)` (the two lines
    // of the state-passing kernel swapped): the chunk's own contribution, already
    // decayed to the chunk end, is decayed by the whole chunk once more.
    if (decay_after) decay_state(kind, w.b, w.state.a.data(), K, V);
  }
  std::copy(w.state.a.begin(), w.state.a.end(), S);
}

// Whole-tensor driver, the chunk counterpart of gated_linear_forward.
template <class P>
void gated_linear_chunk_forward(Decay kind, const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                                const Tensor<typename P::acc>& v, const Tensor<typename P::acc>* g,
                                const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                                Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  using A = typename P::acc;
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<A>({B, len, H, V}, from_double<A>(0.0));
  ht = h0 ? *h0 : Tensor<A>({B, H, K, V}, from_double<A>(0.0));
  GatedLinearChunkWork<P> work;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_chunk_sequence<P>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                                     g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, len, K, V, scale, chunk,
                                     state_block(ht, b, h), seq(o, b, h), work);
}

}  // namespace ttr
