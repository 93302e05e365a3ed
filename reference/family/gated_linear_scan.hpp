// Scan form of linear attention with decay (linear_attn, simple_gla, gla): the
// recurrence S_t = Diag(d_t) S_{t−1} + k_t v_tᵀ of gated_linear.hpp is the
// action of the affine map (Diag(d_t), k_t v_tᵀ) on the K×V state, and affine
// maps compose associatively,
//
//   (D2, B2) ∘ (D1, B1) = (D2 ⊙ D1, Diag(D2) B1 + B2),
//
// so the prefix compositions (D_{1:t}, B_{1:t}) = (d_t, k_t v_tᵀ) ∘ … ∘ (d_1, k_1 v_1ᵀ)
// come from a prefix scan (reference/scan/blelloch.hpp) and
//
//   S_t = Diag(D_{1:t}) S_0 + B_{1:t},    o_t = S_tᵀ (scale · q_t).
//
// d_t is a K-vector: all ones (linear_attn), e^{g_t}·1 (simple_gla) or e^{g_t}
// per key (gla). This is the structure of KLA-K Cor. 2.1 with a matrix-valued
// additive part; kla_kalman/scan.hpp reuses DiagonalAffine with width 1.
//
// Arithmetic policy P (reference/core/policy.hpp). Narrowed to the 16-bit format:
// the inputs q, k, v; the additive part B of every composition the scan writes to
// memory (each Blelloch level's results; in the chunked plan, the chunk
// aggregates and the carries), as FLA stores chunk states in k.dtype; the output
// o. In acc (fp32): the gates g, their products D (as FLA keeps cumulative gates
// in fp32), the initial state h0 and the final state ht, and the readout
// S_tᵀ(scale·q_t). The leaves k_t v_tᵀ are exact products of narrowed operands
// in fp32. With an exact policy (P::narrows false) every output equals the
// sequential form's in exact arithmetic: the scan only re-brackets compositions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "reference/core/mutant.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/gated_linear.hpp"
#include "reference/scan/blelloch.hpp"

namespace ttr {

// x ↦ Diag(A) x + B on R rows of `width` entries: row r is scaled by A[r].
template <class T>
struct DiagonalAffine {
  int width = 1;
  std::vector<T> A;  // R factors
  std::vector<T> B;  // R × width, row-major

  static DiagonalAffine identity(int rows, int width) {
    return {width, std::vector<T>(rows, from_double<T>(1.0)),
            std::vector<T>(static_cast<std::size_t>(rows) * width, from_double<T>(0.0))};
  }
  int rows() const { return static_cast<int>(A.size()); }
};

// out = later ∘ earlier = (A2 ⊙ A1, Diag(A2) B1 + B2), without temporaries;
// `out` aliases neither operand and has their shape.
template <class T>
void compose_affine(const DiagonalAffine<T>& earlier, const DiagonalAffine<T>& later, DiagonalAffine<T>& out) {
  const int R = later.rows(), W = later.width;
  for (int r = 0; r < R; ++r) {
    out.A[r] = later.A[r];
    scale_by(out.A[r], earlier.A[r]);
    const std::size_t row = static_cast<std::size_t>(r) * W;
    for (int j = 0; j < W; ++j) {
      out.B[row + j] = later.B[row + j];
      mul_add_to(out.B[row + j], later.A[r], earlier.B[row + j]);
    }
  }
}

// The store hook of the scans: a composition written to memory keeps its factors
// in acc and has its additive part narrowed (see the file comment).
template <class P>
struct StoreAffine {
  void operator()(DiagonalAffine<typename P::acc>& e) const { narrow_all<P>(e.B); }
};

// x as a kernel under P reads it: x itself, or a narrowed copy kept in `copy`.
template <class P>
const Tensor<typename P::acc>& policy_operand(const Tensor<typename P::acc>& x, Tensor<typename P::acc>& copy) {
  if constexpr (!P::narrows) {
    return x;
  } else {
    copy = x;
    narrow_all<P>(copy.data);
    return copy;
  }
}

template <class P>
struct GatedLinearScanWork {
  using A = typename P::acc;
  DiagonalAffine<A> identity;
  std::vector<DiagonalAffine<A>> steps;  // (d_t, k_t v_tᵀ), then the prefixes
  ScanWorkspace<DiagonalAffine<A>> scan;
  std::vector<A> d, qs;  // decay factors of one token; scale · q_t
  A s;                   // one entry of S_t

  void reserve(std::int64_t len, int K, int V) {
    identity = DiagonalAffine<A>::identity(K, V);
    steps.resize(static_cast<std::size_t>(len), identity);
    d.resize(K);
    qs.resize(K);
  }
};

// One (batch, head) sequence (w reserved for len, K, V). S holds S_0 on entry (read
// when has_h0) and S_len on exit.
template <class P>
void gated_linear_scan_sequence(Decay kind, SeqView<const typename P::acc> q, SeqView<const typename P::acc> k,
                                SeqView<const typename P::acc> v, SeqView<const typename P::acc> g, std::int64_t len,
                                int K, int V, const typename P::acc& scale, bool has_h0, typename P::acc* S,
                                SeqView<typename P::acc> o, const ScanPlan& plan, GatedLinearScanWork<P>& w) {
  using A = typename P::acc;
  const A one = from_double<A>(1.0), zero = from_double<A>(0.0);
  const std::span<DiagonalAffine<A>> steps(w.steps.data(), static_cast<std::size_t>(len));
  std::fill(w.d.begin(), w.d.end(), one);

  for (std::int64_t t = 0; t < len; ++t) {
    DiagonalAffine<A>& e = steps[t];
    decay_factors(kind, g, t, K, w.d);  // leaves the ones for Decay::none
    for (int i = 0; i < K; ++i) {
      e.A[i] = w.d[i];
      for (int j = 0; j < V; ++j) {
        A& b = e.B[static_cast<std::size_t>(i) * V + j];
        b = k.row(t)[i];
        scale_by(b, v.row(t)[j]);
      }
    }
  }
  prefix_scan(steps, plan, w.identity, compose_affine<A>, StoreAffine<P>{}, w.scan);

  // mutant h0-ignored: the kernel never applies initial_state to its prefixes and
  // reads S_t = B_{1:t} as if S_0 were 0.
  const bool use_h0 = has_h0 && !mutated(Mutant::h0_ignored);
  // mutant scale-applied-twice: the caller already folded `scale` into q and the
  // kernel applies its default scale again: o carries scale².
  A qscale = scale;
  if (mutated(Mutant::scale_applied_twice)) qscale *= scale;
  // mutant accumulate-in-16bit: the readout's running sum over i is held in the
  // storage format (a bf16/fp16 accumulator) instead of fp32.
  bool acc16 = false;
  if constexpr (P::narrows) acc16 = mutated(Mutant::accumulate_in_16bit);
  // S_t = Diag(D_{1:t}) S_0 + B_{1:t};  o_t,j = Σ_i (scale q_t,i) S_t,ij, i ascending.
  const auto state_entry = [&](const DiagonalAffine<A>& e, int i, int j) -> const A& {
    const std::size_t ij = static_cast<std::size_t>(i) * V + j;
    w.s = e.B[ij];
    if (use_h0) mul_add_to(w.s, e.A[i], S[ij]);
    return w.s;
  };
  for (std::int64_t t = 0; t < len; ++t) {
    A* ot = o.row(t);
    for (int i = 0; i < K; ++i) {
      w.qs[i] = qscale;
      scale_by(w.qs[i], q.row(t)[i]);
    }
    for (int j = 0; j < V; ++j) ot[j] = zero;
    for (int i = 0; i < K; ++i) {
      for (int j = 0; j < V; ++j) mul_add_to(ot[j], w.qs[i], state_entry(steps[t], i, j));
      if (acc16)
        for (int j = 0; j < V; ++j) ot[j] = P::narrow(ot[j]);
    }
    for (int j = 0; j < V; ++j) ot[j] = P::narrow(ot[j]);
  }
  if (len > 0) {
    const DiagonalAffine<A>& last = steps[len - 1];
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) S[static_cast<std::size_t>(i) * V + j] = state_entry(last, i, j);
  }
}

// Whole-tensor driver, as gated_linear_forward: q, k [B,T,H,K], v [B,T,H,V], g per
// `kind`, h0 optional [B,H,K,V]. `plan`: one Blelloch scan over the sequence
// (the `scan` form) or the two-level chunked scan.
template <class P>
void gated_linear_scan_forward(Decay kind, const Tensor<typename P::acc>& q_in, const Tensor<typename P::acc>& k_in,
                               const Tensor<typename P::acc>& v_in, const Tensor<typename P::acc>* g,
                               const Tensor<typename P::acc>* h0, const typename P::acc& scale,
                               Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht,
                               const ScanPlan& plan = ScanPlan::whole_sequence()) {
  using A = typename P::acc;
  Tensor<A> qn, kn, vn;
  const Tensor<A>& q = policy_operand<P>(q_in, qn);
  const Tensor<A>& k = policy_operand<P>(k_in, kn);
  const Tensor<A>& v = policy_operand<P>(v_in, vn);
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<A>({B, len, H, V}, from_double<A>(0.0));
  ht = h0 ? *h0 : Tensor<A>({B, H, K, V}, from_double<A>(0.0));
  GatedLinearScanWork<P> w;
  w.reserve(len, K, V);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_scan_sequence<P>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                                    g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, len, K, V, scale,
                                    h0 != nullptr, state_block(ht, b, h), seq(o, b, h), plan, w);
}

}  // namespace ttr
