// Chunkwise form of the delta rule with decay (delta_rule, gated_delta_rule,
// kda, kaczmarz_delta_rule, precond_gated_delta_rule, precond_kda) through the
// WY representation / UT transform: PDN §2.2 and eq. (6), App. D and F; KLA-Z
// Props 3–6 (whose printed formulas were lost in extraction: rebuilt here from
// the recurrence).
//
// Derivation. In a chunk with initial state S_0 and cumulative log decay b_t,
// Γ_t = Diag(e^{b_t}), the recurrence of delta.hpp (read key k, write key w)
// unrolls to S̄_t = Γ_t S_0 + Σ_{s<t} Γ_tΓ_s⁻¹ w_s δ_sᵀ, so
//
//   δ_t + β_t Σ_{s<t} (k_tᵀ Γ_tΓ_s⁻¹ w_s) δ_s = β_t (v_t − S_0ᵀ Γ_t k_t),
//
// i.e. (I + A) Δ = Diag(β)(V − (K ⊙ e^{b}) S_0) with the strictly lower
// A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1) — asymmetric (K W̃ᵀ) for the preconditioned
// layers, PDN eq. (6). With the UT transform T = (I + A)⁻¹ Diag(β):
//
//   W = T (K ⊙ e^{b}),  U = T V,  Δ = U − W S_0                         (WY / UT)
//   O = (Q ⊙ e^{b}) S_0 + [Q Wᵀ ⊙ Γ]_{s ≤ t} Δ                          (outputs)
//   S_end = Diag(e^{b_last}) S_0 + (W ⊙ e^{b_last − b})ᵀ Δ              (state passing)
//
// with w in place of W in the last two lines (the write keys). Kaczmarz
// (KLA-Z eq. (3), App. B.4) substitutes β_t/(‖k_t‖² + eps) for β_t before the
// chunk form runs: a coefficient substitution, the algorithm is unchanged.
//
// Arithmetic policy P (reference/core/policy.hpp), following FLA's
// chunk_gated_delta_rule. Narrowed to the 16-bit format: q, k, w, v, β; the
// inverted (I + A)⁻¹ (FLA's solve_tril output, stored as k.dtype); the operands
// β ⊙ K ⊙ e^{b} and β ⊙ V; W and U (stored); S_0 when read as an operand (FLA's
// per-chunk h); Δ (FLA's v_new); the decayed q and write-key operands; the
// masked score matrix; the output o. In acc (fp32): gates and their sums, A and
// the triangular solve, every product's accumulation, the running state carried
// between chunks (also the final state ht).
#pragma once

#include <algorithm>
#include <optional>

#include "reference/core/intermediate.hpp"

#include "reference/family/chunk_common.hpp"
#include "reference/family/delta.hpp"

namespace ttr {

template <class P>
struct DeltaChunkWork {
  using A = typename P::acc;
  Matrix<A> q, k, w, v, b, a, eye, t_inv, bk, bv, wy, u, s0, delta, qd, wd, scores, o, state;
};

template <class P>
void delta_chunk_sequence(const DeltaSequence<typename P::acc>& s, std::int64_t len, int K, int V,
                          const typename P::acc& scale, int chunk, typename P::acc* S, SeqView<typename P::acc> o,
                          DeltaChunkWork<P>& w) {
  using A = typename P::acc;
  const A zero = from_double<A>(0.0), one = from_double<A>(1.0);
  // mutant state-leaks-across-heads: a persistent kernel that does not reset its
  // state registers between work items starts this (batch, head) from the final
  // state of the one it ran before (the workspace still holds it) instead of h0.
  const bool leak = mutated(Mutant::state_leaks_across_heads) && w.state.rows == K && w.state.cols == V;
  if (!leak) {
    w.state.assign(K, V, zero);
    // mutant h0-ignored: the kernel never loads initial_state (the USE_INITIAL_STATE
    // branch is dead) and starts from zero.
    if (!mutated(Mutant::h0_ignored)) std::copy(S, S + static_cast<std::ptrdiff_t>(K) * V, w.state.a.begin());
  }
  // mutant last-partial-chunk-dropped: a launch grid of T / C chunks (floor, not
  // ceil) skips the last partial chunk: its outputs stay 0 and ht misses it.
  const std::int64_t end = mutated(Mutant::last_partial_chunk_dropped) ? len - len % chunk : len;
  // mutant ut-beta-dropped: A built as tril(K Wᵀ ⊙ Γ, −1) without the Diag(β) row
  // scaling (β applied to the right-hand sides only, as if it were part of V).
  const bool beta_in_a = !mutated(Mutant::ut_beta_dropped);
  // mutant causal-mask-strict: the output's score mask reuses the UT matrix's
  // strict mask (s < t): no token reads its own write δ_t.
  const bool strict_scores = mutated(Mutant::causal_mask_strict);
  const bool decay_after = mutated(Mutant::decay_after_update);
  std::optional<NamedIntermediate> phase;  // names for the range trace (reference/core/intermediate.hpp)
  for (std::int64_t t0 = 0; t0 < end; t0 += chunk) {
    const int c = static_cast<int>(std::min<std::int64_t>(chunk, len - t0));
    phase.emplace("chunk inputs q, k, w, v and cumulative log decays b");
    gather_rows<P>(s.q, t0, c, K, w.q);
    gather_rows<P>(s.k, t0, c, K, w.k);
    gather_rows<P>(s.w, t0, c, K, w.w);
    gather_rows<P>(s.v, t0, c, V, w.v);
    cumulative_gates(s.decay, s.g, t0, c, K, w.b);
    // A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1) and the UT inverse (I + A)⁻¹.
    phase.emplace("A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1)");
    masked_decayed_products<P>(s.decay, w.k, w.w, w.b, true, w.a);
    for (int t = 0; t < c && beta_in_a; ++t) {
      const A bt = P::narrow(s.beta.at(t0 + t));
      for (int j = 0; j < t; ++j) w.a(t, j) *= bt;
    }
    w.eye.assign(c, c, zero);
    for (int t = 0; t < c; ++t) w.eye(t, t) = one;
    phase.emplace("UT inverse (I + A)⁻¹");
    unit_lower_solve(w.a, w.eye, w.t_inv);
    narrow_all<P>(w.t_inv.a);
    // W = (I + A)⁻¹ (β ⊙ K ⊙ e^{b}),  U = (I + A)⁻¹ (β ⊙ V).
    phase.emplace("WY operands β ⊙ K ⊙ e^{b}, β ⊙ V");
    decay_rows<P>(s.decay, w.k, w.b, false, w.bk);
    w.bv = w.v;
    for (int t = 0; t < c; ++t) {
      const A bt = P::narrow(s.beta.at(t0 + t));
      for (int d = 0; d < K; ++d) w.bk(t, d) = P::narrow(bt * w.bk(t, d));
      for (int j = 0; j < V; ++j) w.bv(t, j) = P::narrow(bt * w.bv(t, j));
    }
    phase.emplace("W = (I + A)⁻¹ (β ⊙ K ⊙ e^{b}), U = (I + A)⁻¹ (β ⊙ V)");
    chunk_gemm_nn<P>(w.t_inv, w.bk, w.wy);
    chunk_gemm_nn<P>(w.t_inv, w.bv, w.u);
    narrow_all<P>(w.wy.a);
    narrow_all<P>(w.u.a);
    // Δ = U − W S_0: the chunk's residuals, each token's δ_t.
    phase.emplace("residuals Δ = U − W S_0 (v_new)");
    state_operand<P>(w.state.a.data(), K, V, w.s0);
    chunk_gemm_nn<P>(w.wy, w.s0, w.delta);
    for (std::size_t i = 0; i < w.delta.a.size(); ++i) w.delta.a[i] = P::narrow(w.u.a[i] - w.delta.a[i]);
    // O = (Q ⊙ e^{b}) S_0 + [Q wᵀ ⊙ Γ]_{s ≤ t} Δ.
    phase.emplace("output O = (Q ⊙ e^{b}) S_0 + [Q wᵀ ⊙ Γ]_{s ≤ t} Δ");
    decay_rows<P>(s.decay, w.q, w.b, false, w.qd);
    chunk_gemm_nn<P>(w.qd, w.s0, w.o);
    masked_decayed_products<P>(s.decay, w.q, w.w, w.b, strict_scores, w.scores);
    narrow_all<P>(w.scores.a);
    chunk_gemm_nn<P>(w.scores, w.delta, w.o, true);
    scatter_output<P>(w.o, scale, t0, o);
    // S_end = Diag(e^{b_last}) S_0 + (w ⊙ e^{b_last − b})ᵀ Δ.
    phase.emplace("state passing S_end = Diag(e^{b_last}) S_0 + (w ⊙ e^{b_last − b})ᵀ Δ");
    if (!decay_after) decay_state(s.decay, w.b, w.state.a.data(), K, V);
    decay_rows<P>(s.decay, w.w, w.b, true, w.wd);
    chunk_gemm_tn<P>(w.wd, w.delta, w.state, true);
    // mutant decay-after-update: `h += wᵀΔ` before `h *= exp(g_last)` (the two lines
    // of chunk_gated_delta_rule_fwd_h swapped): the chunk's own update, already
    // decayed to the chunk end, is decayed by the whole chunk once more.
    if (decay_after) decay_state(s.decay, w.b, w.state.a.data(), K, V);
  }
  std::copy(w.state.a.begin(), w.state.a.end(), S);
}

// Whole-tensor driver, the chunk counterpart of delta_forward (same arguments
// plus the chunk size).
template <class P>
void delta_chunk_forward(Decay kind, const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                         const Tensor<typename P::acc>& w, const Tensor<typename P::acc>& v,
                         const Tensor<typename P::acc>& beta, const Tensor<typename P::acc>* g,
                         const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                         Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  using A = typename P::acc;
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<A>({B, len, H, V}, from_double<A>(0.0));
  ht = h0 ? *h0 : Tensor<A>({B, H, K, V}, from_double<A>(0.0));
  DeltaChunkWork<P> work;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const DeltaSequence<A> s{seq(q, b, h), seq(k, b, h), seq(v, b, h), seq(w, b, h), seq(beta, b, h),
                               g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, kind};
      delta_chunk_sequence<P>(s, len, K, V, scale, chunk, state_block(ht, b, h), seq(o, b, h), work);
    }
}

}  // namespace ttr
