// Pieces shared by the chunkwise forms of the gated linear layers and the delta
// family (PDN §2.1–2.2, App. F): gathering one chunk of a sequence into dense
// matrices, the gates accumulated inside a chunk, and the causally masked,
// decayed pairwise products
//
//   [X Yᵀ ⊙ Γ]_{ts} = Σ_d X_{td} Y_{sd} e^{b_{td} − b_{sd}}     (s < t, or s ≤ t)
//
// where b_t is the cumulative log decay from the chunk start to token t. Only
// differences b_t − b_s with s ≤ t are exponentiated, so every factor is ≤ 1:
// the form never multiplies by e^{+b} (which overflows fp32 once a chunk's gates
// sum below −88) and never divides one cumulative product by another.
#pragma once

#include <cmath>
#include <cstdint>

#include "reference/core/matrix.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/gated_linear.hpp"  // Decay

namespace ttr {

// Rows t0 .. t0+c−1 of a sequence view as a c×F matrix, narrowed to the policy's
// operand format (idempotent on values that are already narrow).
template <class P>
void gather_rows(const SeqView<const typename P::acc>& x, std::int64_t t0, int c, int F, Matrix<typename P::acc>& out) {
  out.assign(c, F, from_double<typename P::acc>(0.0));
  for (int t = 0; t < c; ++t) {
    const auto* src = x.row(t0 + t);
    for (int f = 0; f < F; ++f) out(t, f) = P::narrow(src[f]);
  }
}

// Cumulative log decay b_t = Σ_{s ≤ t} g_s over the chunk, in acc (gates stay
// in fp32 under the 16-bit policies, as FLA's chunk_local_cumsum keeps them):
// c×1 for scalar gates, c×K for per-key gates, zeros for Decay::none.
template <class A>
void cumulative_gates(Decay kind, const SeqView<const A>& g, std::int64_t t0, int c, int K, Matrix<A>& b) {
  const int width = kind == Decay::per_key ? K : 1;
  b.assign(c, width, from_double<A>(0.0));
  if (kind == Decay::none) return;
  for (int t = 0; t < c; ++t)
    for (int d = 0; d < width; ++d) {
      const A& gt = kind == Decay::per_key ? g.row(t0 + t)[d] : g.at(t0 + t);
      b(t, d) = t == 0 ? gt : b(t - 1, d) + gt;
    }
}

// e^{b_{t,d} − b_{s,d}}; d is ignored for scalar gates.
template <class A>
A decay_between(const Matrix<A>& b, int t, int s, int d) {
  using std::exp;
  const int col = b.cols == 1 ? 0 : d;
  return exp(b(t, col) - b(s, col));
}

// out_{ts} = Σ_d X_{td} Y_{sd} e^{b_{td} − b_{sd}} for s < t (strict) or s ≤ t,
// zero above. X, Y are operand-format matrices (c×K); products accumulate in acc.
// Scalar gates: one matrix product, then the elementwise decay mask. Per-key gates
// cannot be factored without e^{+b}, so the sum is formed pair by pair.
template <class A>
void masked_decayed_products(Decay kind, const Matrix<A>& X, const Matrix<A>& Y, const Matrix<A>& b, bool strict,
                             Matrix<A>& out) {
  const int c = X.rows, K = X.cols;
  const A zero = from_double<A>(0.0);
  if (kind != Decay::per_key) {
    gemm_nt(X, Y, out);
    for (int t = 0; t < c; ++t)
      for (int s = 0; s < c; ++s) {
        if (s > t || (strict && s == t)) out(t, s) = zero;
        else if (kind == Decay::scalar) out(t, s) *= decay_between(b, t, s, 0);
      }
    return;
  }
  out.assign(c, c, zero);
  for (int t = 0; t < c; ++t)
    for (int s = 0; s <= (strict ? t - 1 : t); ++s) {
      A acc = zero;
      for (int d = 0; d < K; ++d) mul_add_to(acc, X(t, d) * Y(s, d), decay_between(b, t, s, d));
      out(t, s) = acc;
    }
}

// Rows of X scaled by the decay from the chunk start (e^{b_t}, to_end = false)
// or to the chunk end (e^{b_last − b_t}, to_end = true), then narrowed.
template <class P>
void decay_rows(Decay kind, const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& b, bool to_end,
                Matrix<typename P::acc>& out) {
  using std::exp;
  out = X;
  if (kind == Decay::none) return;
  const int last = X.rows - 1;
  for (int t = 0; t < X.rows; ++t)
    for (int d = 0; d < X.cols; ++d) {
      const int col = b.cols == 1 ? 0 : d;
      const auto f = to_end ? exp(b(last, col) - b(t, col)) : exp(b(t, col));
      out(t, d) = P::narrow(X(t, d) * f);
    }
}

// S ← Diag(e^{b_last}) S: the state decayed across the whole chunk.
template <class A>
void decay_state(Decay kind, const Matrix<A>& b, A* S, int K, int V) {
  using std::exp;
  if (kind == Decay::none) return;
  const int last = b.rows - 1;
  for (int i = 0; i < K; ++i) {
    const A f = exp(b(last, b.cols == 1 ? 0 : i));
    for (int j = 0; j < V; ++j) scale_by(S[static_cast<std::ptrdiff_t>(i) * V + j], f);
  }
}

// The K×V state as a matrix-product operand (a kernel reads the chunk-initial
// state from memory in the operand format: FLA stores h per chunk as k.dtype).
template <class P>
void state_operand(const typename P::acc* S, int K, int V, Matrix<typename P::acc>& out) {
  out.assign(K, V, from_double<typename P::acc>(0.0));
  for (std::size_t i = 0; i < out.a.size(); ++i) out.a[i] = P::narrow(S[i]);
}

// out_t ← narrow(scale · out_t) into row t0 + t of o.
template <class P>
void scatter_output(const Matrix<typename P::acc>& O, const typename P::acc& scale, std::int64_t t0,
                    const SeqView<typename P::acc>& o) {
  for (int t = 0; t < O.rows; ++t)
    for (int j = 0; j < O.cols; ++j) o.row(t0 + t)[j] = P::narrow(scale * O(t, j));
}

}  // namespace ttr
