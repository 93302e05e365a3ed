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
#include "reference/core/mutant.hpp"
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
  const auto gate = [&](std::int64_t t, int d) -> const A& { return kind == Decay::per_key ? g.row(t)[d] : g.at(t); };
  for (int t = 0; t < c; ++t)
    for (int d = 0; d < width; ++d) {
      const A& gt = gate(t0 + t, d);
      b(t, d) = t == 0 ? gt : b(t - 1, d) + gt;
    }
  // mutant gate-cumsum-not-reset: a kernel that calls a global cumsum where a
  // chunk-local one is meant (FLA has both, chunk_local_cumsum and
  // chunk_global_cumsum) starts every chunk's b from the sum of all earlier gates:
  // the differences b_t − b_s inside the chunk are unchanged, but e^{b_t} (queries
  // and keys reading S_0) and e^{b_last} (the state decay) decay S_0 again by
  // everything before the chunk.
  if (mutated(Mutant::gate_cumsum_not_reset) && t0 > 0)
    for (int d = 0; d < width; ++d) {
      A carry = from_double<A>(0.0);
      for (std::int64_t s = 0; s < t0; ++s) carry += gate(s, d);
      for (int t = 0; t < c; ++t) b(t, d) += carry;
    }
}

// e^{b_{t,d} − b_{s,d}}; d is ignored for scalar gates.
template <class A>
A decay_between(const Matrix<A>& b, int t, int s, int d) {
  using std::exp;
  const int col = b.cols == 1 ? 0 : d;
  return exp(b(t, col) - b(s, col));
}

// The matrix products of the chunk forms under policy P: C = X Y, X Yᵀ or Xᵀ Y
// (C += … when accumulate) of operand-format matrices, accumulated in acc (fp32
// under the 16-bit policies, as a tensor-core MMA accumulates).
//
// mutant accumulate-in-16bit: the accumulator itself is 16-bit — every partial
// sum is rounded to the storage format (bf16/fp16), in order of the reduction
// index, and a product accumulated onto C (C += …: the output's inter- plus
// intra-chunk parts, the running state's update) continues in 16 bits. That is
// what a kernel computes whose accumulator tile is declared k.dtype instead of
// fp32 (`b_h = tl.zeros(..., dtype=k.dtype)`, `tl.dot(..., out_dtype=tl.float16)`,
// fp16 HMMA with an f16 accumulator): errors grow with the reduction length (K, C)
// instead of staying at one rounding per stored result. Only the 16-bit policies
// have a narrower format; under the exact policies the products are unchanged.
namespace chunk_detail {
template <class P, class AOp, class BOp>
void product_in_storage_format(int m, int n, int depth, AOp a, BOp b, Matrix<typename P::acc>& C, bool accumulate) {
  using A = typename P::acc;
  if (!accumulate) C.assign(m, n, from_double<A>(0.0));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      A s = P::narrow(C(i, j));
      for (int p = 0; p < depth; ++p) s = P::narrow(s + a(i, p) * b(p, j));
      C(i, j) = s;
    }
}
template <class P>
bool accumulates_in_16bit() {
  if constexpr (P::narrows) return mutated(Mutant::accumulate_in_16bit);
  return false;
}
}  // namespace chunk_detail

template <class P>
void chunk_gemm_nn(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y, Matrix<typename P::acc>& C,
                   bool accumulate = false) {
  if constexpr (P::narrows)
    if (mutated(Mutant::accumulate_in_16bit))
      return chunk_detail::product_in_storage_format<P>(
          X.rows, Y.cols, X.cols, [&](int i, int p) { return X(i, p); }, [&](int p, int j) { return Y(p, j); }, C,
          accumulate);
  gemm_nn(X, Y, C, accumulate);
}
template <class P>
void chunk_gemm_nt(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y, Matrix<typename P::acc>& C,
                   bool accumulate = false) {
  if constexpr (P::narrows)
    if (mutated(Mutant::accumulate_in_16bit))
      return chunk_detail::product_in_storage_format<P>(
          X.rows, Y.rows, X.cols, [&](int i, int p) { return X(i, p); }, [&](int p, int j) { return Y(j, p); }, C,
          accumulate);
  gemm_nt(X, Y, C, accumulate);
}
template <class P>
void chunk_gemm_tn(const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y, Matrix<typename P::acc>& C,
                   bool accumulate = false) {
  if constexpr (P::narrows)
    if (mutated(Mutant::accumulate_in_16bit))
      return chunk_detail::product_in_storage_format<P>(
          X.cols, Y.cols, X.rows, [&](int i, int p) { return X(p, i); }, [&](int p, int j) { return Y(p, j); }, C,
          accumulate);
  gemm_tn(X, Y, C, accumulate);
}

// out_{ts} = Σ_d X_{td} Y_{sd} e^{b_{td} − b_{sd}} for s < t (strict) or s ≤ t,
// zero above. X, Y are operand-format matrices (c×K); products accumulate in acc
// (in 16 bits under mutant accumulate-in-16bit, as chunk_gemm_nn).
// Scalar gates: one matrix product, then the elementwise decay mask. Per-key gates
// cannot be factored without e^{+b}, so the sum is formed pair by pair.
template <class P>
void masked_decayed_products(Decay kind, const Matrix<typename P::acc>& X, const Matrix<typename P::acc>& Y,
                             const Matrix<typename P::acc>& b, bool strict, Matrix<typename P::acc>& out) {
  using A = typename P::acc;
  const int c = X.rows, K = X.cols;
  const A zero = from_double<A>(0.0);
  // mutant gate-exp-unmasked: the decay factor e^{b_t − b_s} computed for every
  // pair (t, s) of the chunk and the causal mask applied by multiplying with 0/1
  // (`A * exp(g[:, None] − g[None, :]) * m` instead of `where(m, …, 0)`). Above the
  // diagonal b_t − b_s = −Σ_{s'∈(t,s]} g_{s'} ≥ 0: where a chunk's gates sum below
  // −88.7 (fp32; −709.8 in fp64) the factor overflows to +inf and inf·0 = NaN.
  // Gates of realistic size never get there; strong decays (g ≈ −69) do in two tokens.
  if (mutated(Mutant::gate_exp_unmasked) && kind != Decay::none) {
    const bool acc16 = chunk_detail::accumulates_in_16bit<P>();
    if (kind == Decay::scalar) chunk_gemm_nt<P>(X, Y, out);
    else out.assign(c, c, zero);
    const A one = from_double<A>(1.0);
    for (int t = 0; t < c; ++t)
      for (int s = 0; s < c; ++s) {
        const A mask = (s > t || (strict && s == t)) ? zero : one;
        if (kind == Decay::scalar) {
          out(t, s) = out(t, s) * decay_between(b, t, s, 0) * mask;
          continue;
        }
        A acc = zero;
        for (int d = 0; d < K; ++d) {
          if (acc16) acc = P::narrow(acc + X(t, d) * Y(s, d) * decay_between(b, t, s, d));
          else mul_add_to(acc, X(t, d) * Y(s, d), decay_between(b, t, s, d));
        }
        out(t, s) = acc * mask;
      }
    return;
  }
  if (kind != Decay::per_key) {
    chunk_gemm_nt<P>(X, Y, out);
    for (int t = 0; t < c; ++t)
      for (int s = 0; s < c; ++s) {
        if (s > t || (strict && s == t)) out(t, s) = zero;
        else if (kind == Decay::scalar) out(t, s) *= decay_between(b, t, s, 0);
      }
    return;
  }
  const bool acc16 = chunk_detail::accumulates_in_16bit<P>();
  out.assign(c, c, zero);
  for (int t = 0; t < c; ++t)
    for (int s = 0; s <= (strict ? t - 1 : t); ++s) {
      A acc = zero;
      if (acc16)
        for (int d = 0; d < K; ++d) acc = P::narrow(acc + X(t, d) * Y(s, d) * decay_between(b, t, s, d));
      else
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
  typename P::acc s = scale;
  // mutant scale-applied-twice: the caller already folded `scale` into q (as
  // model code often does before calling the op) and the kernel applies its
  // default scale again: o carries scale².
  if (mutated(Mutant::scale_applied_twice)) s *= scale;
  for (int t = 0; t < O.rows; ++t)
    for (int j = 0; j < O.cols; ++j) o.row(t0 + t)[j] = P::narrow(s * O(t, j));
}

}  // namespace ttr
