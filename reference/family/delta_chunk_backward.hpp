// Chunkwise backward of the delta-rule core (delta_chunk.hpp), in the structure
// of flash-linear-attention's chunk_gated_delta_rule_bwd (PDN App. D, Fig. 9 (a)):
// the adjoint of the chunk form's own equations, chunk by chunk from the last,
// so that in exact arithmetic it equals the sequential adjoint
// (delta_backward.hpp) and under a 16-bit policy it is a realistic backward
// kernel. Generic over the arithmetic policy P, like the forward.
//
// Forward of chunk n (delta_chunk.hpp; c tokens, cumulative log decay b, chunk-
// initial state S_0, read keys K, write keys W_k, Γ_ts = e^{b_t − b_s}):
//   A  = tril(Diag(β) [K W_kᵀ ⊙ Γ], −1),  T = (I + A)⁻¹             (UT transform)
//   Wy = T X,  X = Diag(β)(K ⊙ e^{b});  U = T Y,  Y = Diag(β) V      (WY / UT)
//   Δ  = U − Wy S_0                                                   (v_new)
//   O  = scale·[(Q ⊙ e^{b}) S_0 + M Δ],  M = [Q W_kᵀ ⊙ Γ]_{s ≤ t}
//   S_end = Diag(e^{b_last}) S_0 + (W_k ⊙ e^{b_last − b})ᵀ Δ
// Adjoint, with dO = ∂L/∂O and dS_end = ∂L/∂S_end (dht for the last chunk):
//   dΔ   = scale·Mᵀ dO + (W_k ⊙ e^{b_last − b}) dS_end               (FLA's dv2, chunk_bwd_dhu)
//   dS_0 = Diag(e^{b_last}) dS_end + scale·(Q ⊙ e^{b})ᵀ dO − Wyᵀ dΔ   (FLA's dh, the backward state pass)
//   dM   = scale·dO Δᵀ on s ≤ t;  d(Q ⊙ e^b) = scale·dO S_0ᵀ;  d(W_k ⊙ e^{b_last−b}) = Δ dS_endᵀ
//   dU = dΔ,  dWy = −dΔ S_0ᵀ                                          (chunk_bwd_dqkwg's dw)
//   dT = dU Yᵀ + dWy Xᵀ,  dX = Tᵀ dWy,  dY = Tᵀ dU,  dA = −Tᵀ dT Tᵀ on s < t
//                                                                      (prepare_wy_repr_bwd)
//   and through A_ts = β_t G_ts, G_ts = Σ_d k_td w_sd e^{b_td − b_sd}:  dβ_t += Σ_s dA_ts G_ts,
//   dG = Diag(β) dA; every pairwise product P_ts = Σ_d x_td y_sd e^{b_td − b_sd} (M and G)
//   gives dx_td += Σ_s dP_ts y_sd e, dy_sd += Σ_t dP_ts x_td e, db_td += Σ_s dP_ts x_td y_sd e,
//   db_sd −= the same; the row decays give db_td += d(x ⊙ e^b)_td (x ⊙ e^b)_td and
//   db_last += Σ_t d(w ⊙ e^{b_last − b})_td (w ⊙ …)_td, db_td −= the same term; the state
//   decay gives db_last,d += Σ_j dS_end,dj e^{b_last,d} S_0,dj. Finally dg is the reverse
//   cumulative sum of db inside the chunk (b_t = Σ_{i ≤ t, i in chunk} g_i): dg_i = Σ_{t ≥ i} db_t,
//   reset at every chunk start (FLA's chunk_local_cumsum(reverse=True)). Scalar gates sum
//   the per-key terms over d.
// The read key k and the write key w get separate gradients dk, dw (the callers add
// them, or chain dw through the preconditioner), as in delta_backward.hpp.
//
// Stored vs recomputed (FLA's structure): a forward pass over the chunks stores the
// chunk-initial states S_0 (FLA's h, one K×V block per chunk; stepped by the forward's
// own delta_chunk_sequence, so bit for bit the forward's); each chunk's A, T, Wy, U,
// Δ, M are recomputed in the backward sweep (FLA's recompute_w_u_fwd).
//
// Arithmetic policy P: what the forward narrows is narrowed the same way when
// recomputed; in addition the cotangent do and dht are inputs (16-bit), dS_end is
// read as a 16-bit operand (FLA stores dh per chunk as q.dtype), so is S_0 wherever
// it is read (the gate term's Σ dS_end ⊙ S_0 too: FLA stores h per chunk as k.dtype),
// dΔ is stored in 16 bits (dv2) and so is dWy (dw); the UT backward's dT, Tᵀ dT and dA are narrowed
// (FLA casts each to q's dtype); the running dS carried between chunks, the
// gate gradients and their reverse sum stay in acc (fp32); dq, dk, dw, dv, dβ are
// written in 16 bits, dg and dh0 in acc (fp32, as FLA returns them for fp32 g, h0).
//
// Mutants (reference/core/mutant.hpp; the catalogue with each bug's story is
// gate/mutants.cpp): realistic bugs of a chunkwise backward kernel, each read once
// per sequence or per chunk where it is injected (comments `mutant <name>` below).
#pragma once

#include <algorithm>
#include <vector>

#include "reference/family/delta_backward.hpp"
#include "reference/family/delta_chunk.hpp"

namespace ttr {

// Given dP for P_ts = Σ_d X_td Y_sd e^{b_td − b_sd} over the causal pairs (s < t when
// strict, else s ≤ t), accumulates dX, dY and db (c×1 for scalar gates, c×K per key).
// Each pair's db term is formed once and added to db_t and taken from db_s, so the two
// cancel exactly in dg's reverse sum. `across` > 0 leaves out the pairs in different
// sub-chunks of that size (t/across ≠ s/across): sub_chunk_products_backward_tf32
// forms those.
template <class A>
void masked_decayed_products_backward(Decay kind, const Matrix<A>& X, const Matrix<A>& Y, const Matrix<A>& b,
                                      bool strict, const Matrix<A>& dP, Matrix<A>& dX, Matrix<A>& dY, Matrix<A>& db,
                                      int across = 0) {
  const int c = X.rows, K = X.cols;
  // mutant backward-gate-exp-unmasked: the backward twin of gate-exp-unmasked —
  // e^{b_t − b_s} formed for every pair of the chunk and the causal mask applied by
  // multiplying with 0/1. Above the diagonal b_t − b_s ≥ 0; once a chunk's gates
  // sum below exp's range the factor is +inf and inf·0 = NaN flows into dX, dY, db.
  if (mutated(Mutant::backward_gate_exp_unmasked) && kind != Decay::none) {
    const A zero = from_double<A>(0.0), one = from_double<A>(1.0);
    for (int t = 0; t < c; ++t)
      for (int s = 0; s < c; ++s) {
        const A mask = (s > t || (strict && s == t)) ? zero : one;
        for (int i = 0; i < K; ++i) {
          const A de = dP(t, s) * decay_between(b, t, s, i) * mask;
          mul_add_to(dX(t, i), de, Y(s, i));
          mul_add_to(dY(s, i), de, X(t, i));
          const A term = de * X(t, i) * Y(s, i);
          const int col = b.cols == 1 ? 0 : i;
          db(t, col) += term;
          db(s, col) -= term;
        }
      }
    return;
  }
  // Scalar gates (and none): one factor dP_ts·e^{b_t − b_s} per pair, formed once. Its
  // operands do not depend on i, so every tier computes the same value at every i
  // (the Monte Carlo tier's rounding is a function of the operands: mca.hpp), and
  // forming it K times cost the model's backward 3 of its ~11 operations per term.
  const bool per_key = kind == Decay::per_key;
  A de = from_double<A>(0.0);
  for (int t = 0; t < c; ++t)
    for (int s = across > 0 ? t / across * across : 0; s <= (strict ? t - 1 : t); ++s) {
      const A& d = dP(t, s);
      if (!per_key) de = d * (kind == Decay::none ? from_double<A>(1.0) : decay_between(b, t, s, 0));
      for (int i = 0; i < K; ++i) {
        if (per_key) de = d * decay_between(b, t, s, i);
        mul_add_to(dX(t, i), de, Y(s, i));
        mul_add_to(dY(s, i), de, X(t, i));
        if (kind == Decay::none) continue;
        const A term = de * X(t, i) * Y(s, i);
        const int col = b.cols == 1 ? 0 : i;
        db(t, col) += term;
        db(s, col) -= term;
      }
    }
}

// The dX side of the pairs across sub-chunks of size `sub` (FLA's `b_dk2 = tl.dot(b_dAkk,
// b_kg, b_dk2)`, then `b_dk2 *= b_gqn`): for each row t of sub-chunk [n, n + sub), n ≥ sub,
// and each key i, use(t, i, part) with part = e^{b_ti − b_ni} Σ_{s<n} dP_ts (Y_si e^{b_ni − b_si}),
// both operands of the sum read as TF32 (tf32_operand).
template <class P, class Use>
void sub_chunk_dx_side_tf32(const Matrix<typename P::acc>& Y, const Matrix<typename P::acc>& b,
                            const Matrix<typename P::acc>& dP, int sub, Use&& use) {
  using A = typename P::acc;
  using std::exp;
  using R = tf32_operand<P>;
  const int c = Y.rows, K = Y.cols;
  const A zero = from_double<A>(0.0);
  std::vector<A> side(static_cast<std::size_t>(K));
  Matrix<A> op;  // one sub-chunk's TF32 operand rows, formed once for its rows
  for (int n = sub; n < c; n += sub) {
    op.assign(n, K, zero);
    for (int s = 0; s < n; ++s)
      for (int i = 0; i < K; ++i) op(s, i) = R::round(Y(s, i) * exp(b(n, i) - b(s, i)));
    for (int t = n; t < std::min(n + sub, c); ++t) {
      std::fill(side.begin(), side.end(), zero);
      for (int s = 0; s < n; ++s) {
        const A d = R::round(dP(t, s));
        for (int i = 0; i < K; ++i) mul_add_to(side[i], d, op(s, i));
      }
      for (int i = 0; i < K; ++i) use(t, i, side[i] * exp(b(t, i) - b(n, i)));
    }
  }
}

// The pairs masked_decayed_products_backward leaves out with `across` = sub (per-key
// decay, s in an earlier sub-chunk than t), as flash-linear-attention's
// chunk_kda_bwd_intra forms them (fla/ops/kda/chunk_intra.py): dX through the first row
// n of t's sub-chunk, dX_t += e^{b_t − b_n} Σ_s dP_ts (Y_s ⊙ e^{b_n − b_s}), and dY
// through the last row m of s's sub-chunk, dY_s += e^{b_m − b_s} Σ_t dP_ts (X_t ⊙
// e^{b_t − b_m}), each a tl.dot on fp32 operands, which Hopper reads as TF32
// (tf32_operand); db then comes from the identity's two sides, db_t += X_t ⊙ (dX_t's
// part) and db_s −= Y_s ⊙ (dY_s's part), as FLA forms dg = q ⊙ dq − k ⊙ dk. Equal to the
// shared-term pairs in exact arithmetic; in a 16-bit kernel the two sides round apart,
// and dg's reverse sum keeps their difference, ~u_tf32 Σ|terms| — the whole of dg at a
// row whose exact value cancels to 0 (t = 0 without an initial state).
template <class P>
void sub_chunk_products_backward_tf32(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y,
                                      const Matrix<typename P::acc>& b, const Matrix<typename P::acc>& dP, int sub,
                                      Matrix<typename P::acc>& dX, Matrix<typename P::acc>& dY,
                                      Matrix<typename P::acc>& db) {
  using A = typename P::acc;
  using std::exp;
  using R = tf32_operand<P>;
  const int c = X.rows, K = X.cols;
  const A zero = from_double<A>(0.0);
  std::vector<A> side(static_cast<std::size_t>(K));
  Matrix<A> op;  // one sub-chunk's TF32 operand rows, formed once for its rows
  sub_chunk_dx_side_tf32<P>(Y, b, dP, sub, [&](int t, int i, const A& part) {
    dX(t, i) += part;
    db(t, i) += X(t, i) * part;
  });
  // The dY side, sub-chunk ending at row m: its columns of dP against the rows t > m
  // of X ⊙ e^{b_t − b_m}.
  for (int s0 = 0; s0 + sub < c; s0 += sub) {
    const int m = s0 + sub - 1;
    op.assign(c, K, zero);
    for (int t = m + 1; t < c; ++t)
      for (int i = 0; i < K; ++i) op(t, i) = R::round(X(t, i) * exp(b(t, i) - b(m, i)));
    for (int s = s0; s <= m; ++s) {
      std::fill(side.begin(), side.end(), zero);
      for (int t = m + 1; t < c; ++t) {
        const A d = R::round(dP(t, s));
        for (int i = 0; i < K; ++i) mul_add_to(side[i], d, op(t, i));
      }
      for (int i = 0; i < K; ++i) {
        const A part = side[i] * exp(b(m, i) - b(s, i));
        dY(s, i) += part;
        db(s, i) -= Y(s, i) * part;
      }
    }
  }
}

// The scalar-gate counterpart of sub_chunk_products_backward_tf32: every causal pair of the
// chunk as flash-linear-attention's chunk_bwd_kernel_dqkwg forms them for a scalar gate
// (fla/ops/common/chunk_o.py): dS_ts = dP_ts e^{b_t − b_s} over s ≤ t (the output's
// scores, the one product FLA forms this way) read once as a TF32 operand, then dX = dS Y and dY = dSᵀ X as two tl.dot on fp32
// operands (TF32 on Hopper), and db from the identity's two sides, db_t += X_t · dX_t's
// part and db_s −= Y_s · dY_s's part, as FLA forms dg = Σ_i q ⊙ dq − Σ_i k ⊙ dk. The pair
// terms cancel in exact arithmetic; with Y rounded on the dX side and X on the dY side
// they round apart at u_tf32 = 2^-11, and dg's reverse sum keeps the difference: the
// whole of dg at a row whose exact value is 0 (t = 0 without an initial state).
// masked_decayed_products_backward forms each pair's term once instead, so its model
// cancels there exactly (docs/validating-fla/failures.md, the preconditioned op's
// stress.long row).
template <class P>
void scalar_products_backward_tf32(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y,
                                   const Matrix<typename P::acc>& b, const Matrix<typename P::acc>& dP,
                                   Matrix<typename P::acc>& dX, Matrix<typename P::acc>& dY,
                                   Matrix<typename P::acc>& db) {
  using A = typename P::acc;
  using R = tf32_operand<P>;
  const int c = X.rows, K = X.cols;
  const A zero = from_double<A>(0.0);
  // The TF32 operands, each element rounded once (a tl.dot reads its tile once).
  Matrix<A> ds, rx, ry, px, py;
  ds.assign(c, c, zero), rx.assign(c, K, zero), ry.assign(c, K, zero), px.assign(c, K, zero), py.assign(c, K, zero);
  for (int t = 0; t < c; ++t)
    for (int s = 0; s <= t; ++s) ds(t, s) = R::round(dP(t, s) * decay_between(b, t, s, 0));
  for (int t = 0; t < c; ++t)
    for (int i = 0; i < K; ++i) rx(t, i) = R::round(X(t, i)), ry(t, i) = R::round(Y(t, i));
  for (int t = 0; t < c; ++t)
    for (int s = 0; s <= t; ++s)
      for (int i = 0; i < K; ++i) {
        mul_add_to(px(t, i), ds(t, s), ry(s, i));
        mul_add_to(py(s, i), ds(t, s), rx(t, i));
      }
  for (int t = 0; t < c; ++t)
    for (int i = 0; i < K; ++i) {
      dX(t, i) += px(t, i);
      dY(t, i) += py(t, i);
      mul_add_to(db(t, 0), X(t, i), px(t, i));
      db(t, 0) -= Y(t, i) * py(t, i);
    }
}

// dβ's pairs across sub-chunks, as flash-linear-attention's chunk_kda_bwd_intra forms
// them: not Σ_s dA_ts G_ts from the forward's G (formed pair by pair in fp32), but
// dβ_t += Σ_d X_td dK2_td with dK2_t = e^{b_t − b_n} Σ_{s<n} dA_ts (Y_s ⊙ e^{b_n − b_s}),
// n the first row of t's sub-chunk: the dX side of sub_chunk_products_backward_tf32 on
// the β-free dA, its operands read as TF32 (FLA: `b_dk2 = tl.dot(b_dAkk, b_kg, b_dk2)`,
// then `b_db = tl.sum(b_dk2 * b_k, 1)`, fla/ops/kda/chunk_intra.py). The same sum in
// exact arithmetic; under TF32 its error is 2^-11 of the products across sub-chunks,
// which the fp32 G does not carry. (Written when FLA's fp32 chunk_kda backward was
// judged at 11.0 on dβ as tf32; that came from the policy leaving the TF32 operands
// exact (mca.hpp, tf32_operand), and with those rounded the capture's dβ is 7.19 as
// tf32 with or without this arrangement: docs/validating-fla.md, "Failures".)
template <class P>
void sub_chunk_dbeta_tf32(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y,
                          const Matrix<typename P::acc>& b, const Matrix<typename P::acc>& dA, int sub,
                          std::vector<typename P::acc>& dbeta) {
  using A = typename P::acc;
  sub_chunk_dx_side_tf32<P>(Y, b, dA, sub, [&](int t, int i, const A& part) { mul_add_to(dbeta[t], X(t, i), part); });
}

template <class P>
struct DeltaChunkBackwardWork {
  using A = typename P::acc;
  DeltaChunkWork<P> fwd;
  Matrix<A> q, k, w, v, b, a, eye, t_inv, bk, bv, wy, u, s0, delta, qd, wd, scores, dO, dse, ddelta, dqd, dscores,
      dwd, dwy, dt, dbk, dbv, da, tmp, dq, dk, dw, dv, db, dse_late;
  std::vector<A> dbeta, dg_carry;
  std::vector<std::vector<A>> states;
  int tf32_sub = 0;  // > 0: the form chunk_tf32_intra, sub-chunks of this size
};

// One (batch, head) sequence. S0: the initial state. dS: on entry ∂L/∂S_T (zeros
// when dht is absent), on exit ∂L/∂S_0.
template <class P>
void delta_chunk_sequence_backward(const DeltaSequence<typename P::acc>& s, std::int64_t len, int K, int V,
                                   const typename P::acc& scale, int chunk, const typename P::acc* S0,
                                   SeqView<const typename P::acc> do_, typename P::acc* dS,
                                   const DeltaGradSequence<typename P::acc>& gr, DeltaChunkBackwardWork<P>& w) {
  using A = typename P::acc;
  using std::exp;
  const A zero = from_double<A>(0.0), one = from_double<A>(1.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t chunks = (len + chunk - 1) / chunk;
  // Forward over the chunks: S_0 of every chunk, by the forward's own code.
  w.states.assign(static_cast<std::size_t>(chunks), std::vector<A>(S0, S0 + KV));
  std::vector<A> S(S0, S0 + KV), o_scratch(static_cast<std::size_t>(chunk) * V);
  const auto from = [](const SeqView<const A>& x, std::int64_t t0) {
    return SeqView<const A>{x.base ? x.row(t0) : nullptr, x.stride, x.features};
  };
  for (std::int64_t n = 0; n < chunks; ++n) {
    const std::int64_t t0 = n * chunk;
    std::copy(S.begin(), S.end(), w.states[static_cast<std::size_t>(n)].begin());
    if (n + 1 == chunks) break;
    const DeltaSequence<A> part{from(s.q, t0), from(s.k, t0), from(s.v, t0), from(s.w, t0), from(s.beta, t0),
                                from(s.g, t0), s.decay};
    delta_chunk_sequence<P>(part, chunk, K, V, scale, chunk, S.data(), SeqView<A>{o_scratch.data(), V, V}, w.fwd);
  }
  // mutant dht-ignored: the backward state pass starts from zero, as if the final
  // state had no cotangent (dht not loaded: the USE_FINAL_STATE_GRADIENT branch off).
  if (mutated(Mutant::dht_ignored)) std::fill(dS, dS + KV, zero);
  for (std::size_t e = 0; e < KV; ++e) dS[e] = P::narrow(dS[e]);  // dht: a 16-bit input
  // The switches of the backward's mutants, read once per sequence.
  const bool pass_decayed = !mutated(Mutant::dh_pass_undecayed);
  const bool dg_carried = mutated(Mutant::dg_revcumsum_not_reset);
  const bool dg_exclusive = mutated(Mutant::dg_revcumsum_exclusive);
  const bool dg_query_term = !mutated(Mutant::dg_query_term_dropped);
  const bool dk_wy_term = !mutated(Mutant::dk_wy_term_dropped);
  const bool dk_decayed_key = !mutated(Mutant::dk_undecayed_key);
  const bool dv_late = mutated(Mutant::dv_state_gradient_late);
  const bool dq_first_intra = !mutated(Mutant::dq_first_token_intra_dropped);
  const bool offblock = !mutated(Mutant::wy_backward_offblock_dropped);
  const bool ut_transposed = mutated(Mutant::ut_adjoint_transposed);
  // The form chunk_tf32_intra (w.tf32_sub > 0, per-key decay): the pairs across
  // sub-chunks as FLA's KDA backward forms them (sub_chunk_products_backward_tf32).
  const int across = w.tf32_sub > 0 && s.decay == Decay::per_key && !mutated(Mutant::backward_gate_exp_unmasked)
                         ? w.tf32_sub : 0;
  // The same form with a scalar gate: the score pairs as FLA's chunk_bwd_kernel_dqkwg
  // forms them, each side of dg's identity from its own TF32 product
  // (scalar_products_backward_tf32).
  const bool scalar_tf32 =
      w.tf32_sub > 0 && s.decay == Decay::scalar && !mutated(Mutant::backward_gate_exp_unmasked);
  // (No arithmetic here unless a mutant is on: the Monte Carlo tier perturbs every
  // operation, so an unused one would shift the error model's random stream.)
  const bool dbeta_flipped = mutated(Mutant::dbeta_sign_flipped);
  const bool dq_rescaled = mutated(Mutant::dq_scale_twice) || mutated(Mutant::dq_scale_missing);
  const A dq_factor = mutated(Mutant::dq_scale_twice) ? scale : dq_rescaled ? one / scale : one;
  // mutant backward-last-partial-chunk-dropped: floor(T/C) chunks in the backward
  // grid; the last partial chunk's gradients stay 0 and dh passes it unchanged.
  const std::int64_t first_run =
      mutated(Mutant::backward_last_partial_chunk_dropped) && len % chunk != 0 ? chunks - 2 : chunks - 1;
  w.dg_carry.assign(s.decay == Decay::per_key ? static_cast<std::size_t>(K) : 1u, zero);
  if (dv_late) w.dse_late.assign(K, V, zero);
  // Backward over the chunks, last first.
  for (std::int64_t n = first_run; n >= 0; --n) {
    const std::int64_t t0 = n * chunk;
    const int c = static_cast<int>(std::min<std::int64_t>(chunk, len - t0));
    const std::vector<A>& Sn = w.states[static_cast<std::size_t>(n)];
    // Recompute the chunk's forward quantities exactly as delta_chunk_sequence does.
    gather_rows<P>(s.q, t0, c, K, w.q);
    gather_rows<P>(s.k, t0, c, K, w.k);
    gather_rows<P>(s.w, t0, c, K, w.w);
    gather_rows<P>(s.v, t0, c, V, w.v);
    cumulative_gates(s.decay, s.g, t0, c, K, w.b);
    std::vector<A> beta(c);
    for (int t = 0; t < c; ++t) beta[t] = P::narrow(s.beta.at(t0 + t));
    masked_decayed_products<P>(s.decay, w.k, w.w, w.b, true, w.a);  // G (the β-free A)
    Matrix<A> a_beta = w.a;
    for (int t = 0; t < c; ++t)
      for (int j = 0; j < t; ++j) a_beta(t, j) *= beta[t];
    w.eye.assign(c, c, zero);
    for (int t = 0; t < c; ++t) w.eye(t, t) = one;
    unit_lower_solve(a_beta, w.eye, w.t_inv);
    narrow_all<P>(w.t_inv.a);
    decay_rows<P>(s.decay, w.k, w.b, false, w.bk);
    Matrix<A> kd = w.bk;  // K ⊙ e^{b}, narrowed as the forward's operand
    w.bv = w.v;
    for (int t = 0; t < c; ++t) {
      for (int d = 0; d < K; ++d) w.bk(t, d) = P::narrow(beta[t] * w.bk(t, d));
      for (int j = 0; j < V; ++j) w.bv(t, j) = P::narrow(beta[t] * w.bv(t, j));
    }
    chunk_gemm_nn<P>(w.t_inv, w.bk, w.wy);
    chunk_gemm_nn<P>(w.t_inv, w.bv, w.u);
    narrow_all<P>(w.wy.a);
    narrow_all<P>(w.u.a);
    state_operand<P>(Sn.data(), K, V, w.s0);
    chunk_gemm_nn<P>(w.wy, w.s0, w.delta);
    for (std::size_t i = 0; i < w.delta.a.size(); ++i) w.delta.a[i] = P::narrow(w.u.a[i] - w.delta.a[i]);
    decay_rows<P>(s.decay, w.q, w.b, false, w.qd);
    masked_decayed_products<P>(s.decay, w.q, w.w, w.b, false, w.scores);
    narrow_all<P>(w.scores.a);
    decay_rows<P>(s.decay, w.w, w.b, true, w.wd);

    // The cotangents of the chunk's outputs.
    gather_rows<P>(do_, t0, c, V, w.dO);
    state_operand<P>(dS, K, V, w.dse);
    // dΔ = scale·Mᵀ dO + (W_k ⊙ e^{b_last − b}) dS_end.
    chunk_gemm_tn<P>(w.scores, w.dO, w.ddelta);
    for (auto& x : w.ddelta.a) x *= scale;
    // mutant dv-state-gradient-late: dΔ's state term (FLA's dv2 += k·dh) reads the
    // state gradient of the following chunk (dh indexed i_t + 1 instead of i_t);
    // the last chunk reads none.
    chunk_gemm_nn<P>(w.wd, dv_late ? w.dse_late : w.dse, w.ddelta, true);
    if (dv_late) w.dse_late = w.dse;
    narrow_all<P>(w.ddelta.a);

    w.dq.assign(c, K, zero), w.dk.assign(c, K, zero), w.dw.assign(c, K, zero), w.dv.assign(c, V, zero);
    w.db.assign(c, w.b.cols, zero);
    w.dbeta.assign(c, zero);
    const int last = c - 1;
    // The state decay Diag(e^{b_last}) S_0 and the carried dS_0. S_0 is read as stored,
    // narrowed (w.s0): FLA keeps one state per chunk in k.dtype and forms this term from
    // it (fla-core 0.6.0 chunk_bwd_kernel_dqkwg: b_dg_last += tl.sum(b_h * b_dh)); dS is
    // the running fp32 one (FLA's dh, read there in q.dtype, is the fp32 sum narrowed:
    // the GPU stage that forms this term holds it in registers).
    if (s.decay != Decay::none)
      for (int i = 0; i < K; ++i) {
        A acc = zero;
        for (int j = 0; j < V; ++j) mul_add_to(acc, dS[static_cast<std::size_t>(i) * V + j], w.s0(i, j));
        w.db(last, w.b.cols == 1 ? 0 : i) += acc * exp(w.b(last, w.b.cols == 1 ? 0 : i));
      }
    // d(W_k ⊙ e^{b_last − b}) = Δ dS_endᵀ (before dS is overwritten).
    chunk_gemm_nt<P>(w.delta, w.dse, w.dwd);
    // mutant dh-pass-undecayed: the backward state pass forgets the chunk's decay
    // Diag(e^{b_last}) (b_dh *= exp(b_g_last) missing in chunk_bwd_dhu).
    if (pass_decayed) decay_state(s.decay, w.b, dS, K, V);
    chunk_gemm_tn<P>(w.qd, w.dO, w.tmp);  // (Q ⊙ e^b)ᵀ dO
    for (std::size_t e = 0; e < KV; ++e) mul_add_to(dS[e], scale, w.tmp.a[e]);
    chunk_gemm_tn<P>(w.wy, w.ddelta, w.tmp);  // Wyᵀ dΔ
    for (std::size_t e = 0; e < KV; ++e) dS[e] -= w.tmp.a[e];

    // The output's two reads: d(Q ⊙ e^b) = scale·dO S_0ᵀ and dM = scale·dO Δᵀ (s ≤ t).
    chunk_gemm_nt<P>(w.dO, w.s0, w.dqd);
    for (auto& x : w.dqd.a) x *= scale;
    chunk_gemm_nt<P>(w.dO, w.delta, w.dscores);
    for (auto& x : w.dscores.a) x *= scale;
    if (scalar_tf32) scalar_products_backward_tf32<P>(w.q, w.w, w.b, w.dscores, w.dq, w.dw, w.db);
    else masked_decayed_products_backward(s.decay, w.q, w.w, w.b, false, w.dscores, w.dq, w.dw, w.db, across);
    if (across) sub_chunk_products_backward_tf32<P>(w.q, w.w, w.b, w.dscores, across, w.dq, w.dw, w.db);
    // mutant dq-first-token-intra-dropped: the chunk's first token gets no
    // intra-chunk part of dq (a loop over the score tile starting at row 1): one
    // row per chunk, which a whole-tensor relative RMS dilutes by √(T/C)/√T.
    if (!dq_first_intra)
      for (int d = 0; d < K; ++d) w.dq(0, d) = zero;
    // The row decays: x ⊙ e^{b} (queries) and w ⊙ e^{b_last − b} (write keys).
    for (int t = 0; t < c; ++t)
      for (int d = 0; d < K; ++d) {
        const int col = w.b.cols == 1 ? 0 : d;
        const A eq = s.decay == Decay::none ? one : exp(w.b(t, col));
        const A ew = s.decay == Decay::none ? one : exp(w.b(last, col) - w.b(t, col));
        mul_add_to(w.dq(t, d), w.dqd(t, d), eq);
        mul_add_to(w.dw(t, d), w.dwd(t, d), ew);
        if (s.decay == Decay::none) continue;
        // mutant dg-query-term-dropped: dg misses the query decay's q·dq term.
        if (dg_query_term) w.db(t, col) += w.dqd(t, d) * w.qd(t, d);
        const A tw = w.dwd(t, d) * w.wd(t, d);
        w.db(last, col) += tw;
        w.db(t, col) -= tw;
      }

    // Δ = U − Wy S_0: dU = dΔ, dWy = −dΔ S_0ᵀ (stored in 16 bits, FLA's dw).
    chunk_gemm_nt<P>(w.ddelta, w.s0, w.dwy);
    for (auto& x : w.dwy.a) x = P::narrow(-x);
    // Wy = T X, U = T Y: dT = dU Yᵀ + dWy Xᵀ (strictly lower: T has a unit diagonal),
    // dX = Tᵀ dWy, dY = Tᵀ dU; T = (I + A)⁻¹: dA = −Tᵀ dT Tᵀ (strictly lower).
    chunk_gemm_nt<P>(w.ddelta, w.bv, w.dt);
    chunk_gemm_nt<P>(w.dwy, w.bk, w.dt, true);
    chunk_gemm_tn<P>(w.t_inv, w.dwy, w.dbk);
    chunk_gemm_tn<P>(w.t_inv, w.ddelta, w.dbv);
    // dT, the product Tᵀ dT and dA are each narrowed, as FLA's prepare_wy_repr_bwd
    // casts them to T's (q's) dtype before each tl.dot and stores dA so
    // (fla/ops/{delta_rule,gated_delta_rule}/wy_fast.py): with near-duplicate keys T is
    // large and these roundings weigh (FLA's chunk_delta_rule dβ on stress
    // near_duplicate_keys: ratio 10.4 without them, 7.46 with; docs/validating-fla.md).
    for (int t = 0; t < c; ++t)
      for (int j = t; j < c; ++j) w.dt(t, j) = zero;
    narrow_all<P>(w.dt.a);
    if (!ut_transposed) {
      chunk_gemm_tn<P>(w.t_inv, w.dt, w.tmp);  // Tᵀ dT
      narrow_all<P>(w.tmp.a);
      chunk_gemm_nt<P>(w.tmp, w.t_inv, w.da);  // (Tᵀ dT) Tᵀ
    } else {
      // mutant ut-adjoint-transposed: the adjoint of the inverse with its
      // transposes misplaced, dA = −T dTᵀ T (the rule for T = (I + A)⁻¹ read as
      // if the kernel's tiles were stored transposed).
      chunk_gemm_nt<P>(w.t_inv, w.dt, w.tmp);  // T dTᵀ
      chunk_gemm_nn<P>(w.tmp, w.t_inv, w.da);  // (T dTᵀ) T
    }
    for (int t = 0; t < c; ++t)
      for (int j = 0; j < c; ++j) w.da(t, j) = j < t ? P::narrow(-w.da(t, j)) : zero;
    // mutant wy-backward-offblock-dropped: a UT backward that works on 16×16
    // sub-blocks of the chunk keeps only dA's diagonal blocks (the products across
    // sub-blocks are never formed): dk and dβ are right for C ≤ 16 and wrong at
    // C = 64 (FLA #984: WY backward dk/dβ wrong at chunk size 64).
    if (!offblock)
      for (int t = 0; t < c; ++t)
        for (int j = 0; j < t; ++j)
          if (t / 16 != j / 16) w.da(t, j) = zero;
    // X = Diag(β)(K ⊙ e^b), Y = Diag(β) V.
    // mutant dk-wy-term-dropped: dk misses dX's contribution (the dw → dk term of
    // the WY backward, Tᵀ dW through X = Diag(β)(K ⊙ e^b)); mutant dk-undecayed-key:
    // that term taken without the key's decay e^{b_t}.
    for (int t = 0; t < c; ++t) {
      for (int d = 0; d < K; ++d) {
        mul_add_to(w.dbeta[t], w.dbk(t, d), kd(t, d));
        const int col = w.b.cols == 1 ? 0 : d;
        const A e = s.decay == Decay::none || !dk_decayed_key ? one : exp(w.b(t, col));
        if (dk_wy_term) mul_add_to(w.dk(t, d), beta[t] * e, w.dbk(t, d));
        if (s.decay != Decay::none) w.db(t, col) += w.dbk(t, d) * w.bk(t, d);
      }
      for (int j = 0; j < V; ++j) {
        mul_add_to(w.dbeta[t], w.dbv(t, j), w.v(t, j));
        mul_add_to(w.dv(t, j), beta[t], w.dbv(t, j));
      }
    }
    // A = Diag(β) G: dβ_t += Σ_s dA_ts G_ts, dG = Diag(β) dA (chunk_tf32_intra: the
    // pairs across sub-chunks as FLA forms them, sub_chunk_dbeta_tf32).
    if (across) sub_chunk_dbeta_tf32<P>(w.k, w.w, w.b, w.da, across, w.dbeta);
    for (int t = 0; t < c; ++t)
      for (int j = 0; j < t; ++j) {
        if (!across || t / across == j / across) mul_add_to(w.dbeta[t], w.da(t, j), w.a(t, j));
        w.da(t, j) *= beta[t];
      }
    masked_decayed_products_backward(s.decay, w.k, w.w, w.b, true, w.da, w.dk, w.dw, w.db, across);
    if (across) sub_chunk_products_backward_tf32<P>(w.k, w.w, w.b, w.da, across, w.dk, w.dw, w.db);

    // mutants dq-scale-twice / dq-scale-missing: dq multiplied by scale once more,
    // or left without it (FLA's `b_dq *= scale` applied twice, or skipped on a
    // scale = 1 path that is taken for any scale).
    if (dq_rescaled)
      for (auto& x : w.dq.a) x *= dq_factor;
    // Write the chunk's gradients; dg is the chunk-local reverse cumulative sum of db.
    for (int t = 0; t < c; ++t) {
      for (int d = 0; d < K; ++d) {
        gr.dq.row(t0 + t)[d] = P::narrow(w.dq(t, d));
        gr.dk.row(t0 + t)[d] = P::narrow(w.dk(t, d));
        gr.dw.row(t0 + t)[d] = P::narrow(w.dw(t, d));
      }
      for (int j = 0; j < V; ++j) gr.dv.row(t0 + t)[j] = P::narrow(w.dv(t, j));
      // mutant dbeta-sign-flipped: dβ returned negated.
      gr.dbeta.at(t0 + t) = P::narrow(dbeta_flipped ? -w.dbeta[t] : w.dbeta[t]);
    }
    if (s.decay == Decay::none) continue;
    // mutant dg-revcumsum-not-reset: the reverse sum runs on from the later chunk
    // (a global reverse cumsum where chunk_local_cumsum(reverse=True) is meant);
    // mutant dg-revcumsum-exclusive: off by one, dg_i = Σ_{t > i} db_t.
    for (int col = 0; col < w.b.cols; ++col) {
      A run = dg_carried ? w.dg_carry[static_cast<std::size_t>(col)] : zero;
      const auto put = [&](int t) {
        if (s.decay == Decay::per_key) gr.dg.row(t0 + t)[col] = run;
        else gr.dg.at(t0 + t) = run;
      };
      for (int t = last; t >= 0; --t) {
        if (dg_exclusive) put(t);
        run += w.db(t, col);
        if (!dg_exclusive) put(t);
      }
      w.dg_carry[static_cast<std::size_t>(col)] = run;
    }
  }
  // mutant dh0-not-written: the kernel never stores dh0 (zeros returned).
  if (mutated(Mutant::dh0_not_written)) std::fill(dS, dS + KV, zero);
}

// Whole-tensor driver, the chunk counterpart of delta_backward (same arguments
// plus the chunk size; tf32_sub > 0 gives the form chunk_tf32_intra, above).
template <class P>
void delta_chunk_backward(Decay kind, const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                          const Tensor<typename P::acc>& w, const Tensor<typename P::acc>& v,
                          const Tensor<typename P::acc>& beta, const Tensor<typename P::acc>* g,
                          const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                          const Tensor<typename P::acc>& do_, const Tensor<typename P::acc>* dht,
                          DeltaGrads<typename P::acc>& out, int tf32_sub = 0) {
  using A = typename P::acc;
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const A zero = from_double<A>(0.0);
  out.dq = Tensor<A>(q.shape, zero);
  out.dk = Tensor<A>(k.shape, zero);
  out.dw = Tensor<A>(w.shape, zero);
  out.dv = Tensor<A>(v.shape, zero);
  out.dbeta = Tensor<A>(beta.shape, zero);
  out.dg = g ? Tensor<A>(g->shape, zero) : Tensor<A>();
  out.dh0 = dht ? *dht : Tensor<A>({B, H, K, V}, zero);
  const std::vector<A> zeros(static_cast<std::size_t>(K) * V, zero);
  const SeqView<A> no_dg{nullptr, 0, 0};
  DeltaChunkBackwardWork<P> work;
  work.tf32_sub = tf32_sub;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const DeltaSequence<A> s{seq(q, b, h), seq(k, b, h), seq(v, b, h), seq(w, b, h), seq(beta, b, h),
                               g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, kind};
      const DeltaGradSequence<A> gr{seq(out.dq, b, h), seq(out.dk, b, h), seq(out.dw, b, h), seq(out.dv, b, h),
                                    seq(out.dbeta, b, h), g ? seq(out.dg, b, h) : no_dg};
      delta_chunk_sequence_backward<P>(s, len, K, V, scale, chunk, h0 ? state_block(*h0, b, h) : zeros.data(),
                                       seq(do_, b, h), state_block(out.dh0, b, h), gr, work);
    }
}

}  // namespace ttr
