// Kalman linear attention (KLA-K), the paper's scan forms `scan_unscaled` and
// `chunk_unscaled`: the sequential recursion of sequential.hpp evaluated as two
// associative prefix scans per state slot (n, d) (KLA-K §4.2, Alg. 1
// "Mobius-Scan" and "Linear-Scan"), with Λ and η carried as plain numbers, as the
// paper writes them. They overflow fp32 where the truth does not (p̄ = 0, small
// ā: "Range" below); the forms `scan` and `chunk` (scaled_scan.hpp) compute the
// same function in a representation that cannot. Kept so that the comparison,
// and the fuzzer's finding on this representation, stay reproducible.
//
// Precision (Thm 1, eqs. (16)-(17); Cor. 1.1). Λ_t = M_t(Λ_{t−1}) is the Möbius map
// of the 2×2 matrix
//
//   M_t = [[1 + p̄φ_t, ā²φ_t], [p̄, ā²]],   φ_t = k_{t,n}² λv_{t,d},
//   [[a, b], [c, d]](Λ) = (aΛ + b)/(cΛ + d),
//
// and Möbius maps compose by matrix product, so with the prefix products
// P_t = M_t ⋯ M_1 (the later matrix on the left): Λ_t = P_t(Λ_0).
//
// Information mean (Thm 2, eq. (19); Cor. 2.1). With Λ_{t−1} known from the
// precision scan, η_t = f_t η_{t−1} + k_{t,n} λv_{t,d} v_{t,d}, f_t = ā/(ā² + p̄Λ_{t−1}),
// is the affine map (f_t, k λv v); affine maps compose as
// (A2, b2) ∘ (A1, b1) = (A2 A1, A2 b1 + b2), and the prefix (A_{1:t}, b_{1:t})
// gives η_t = A_{1:t} η_0 + b_{1:t}. (DiagonalAffine of gated_linear_scan.hpp with
// one entry per slot: the mean track is a gated linear recurrence, KLA-K Table 3.)
//
// Outputs as the sequential form: o_{t,d} = scale Σ_n q_{t,n} η_{t,n,d}/Λ_{t,n,d},
// o_var_{t,d} = scale² Σ_n q_{t,n}²/Λ_{t,n,d} (n ascending), lambda_T, eta_T.
//
// Forms: `kla_kalman_scan` (`scan_unscaled`) runs one Blelloch scan over the whole
// sequence for each track, `kla_kalman_chunk` (`chunk_unscaled`) the two-level
// chunked scan with chunks of C tokens (reference/scan/blelloch.hpp fixes both
// bracketings).
//
// Range. A Möbius map is unchanged when its matrix is scaled, but the entries of
// P_t are not bounded: a_t ≥ 1 + p̄φ_t makes them grow geometrically (p̄φ = 1.5
// per token overflows fp32 after ~97 tokens) while Λ_t converges. In floating
// point every composed matrix is therefore scaled by a power of two that brings
// its largest entry into [1/2, 1): exact (barring underflow of entries below 2^-126
// of that largest one), so the form computes the same function (it is skipped
// where the scalar has no exponent access: rationals, MPFI intervals). What no scaling removes is the spread between the entries: with
// p̄ = 0, P_t = [[1, β_t], [0, ā^{2t}]], so Λ_t = (Λ_0 + β_t)/ā^{2t} grows like
// ā^{−2t} and overflows float where the sequential form's Λ_t does too.
//
// Arithmetic policy P (reference/core/policy.hpp). Narrowed to the 16-bit format:
// the inputs q, k, v; every composition the scans write to memory (each Blelloch
// level's results; in the chunked plan the chunk aggregates and the carries):
// all four entries of a Möbius matrix, the additive part b of an affine pair;
// the outputs o and o_var. In acc (fp32): λv, ā, p̄, the initial states, the
// forget-gate products A (gates, as g is elsewhere), the precision path Λ_t
// handed from the first scan to the second, the final states lambda_T and eta_T.
// With an exact policy (P::narrows false) every output equals the sequential
// form's in exact arithmetic.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "reference/core/intermediate.hpp"
#include "reference/core/mutant.hpp"
#include "reference/core/pow2.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/gated_linear_scan.hpp"
#include "reference/kla_kalman/sequential.hpp"
#include "reference/scan/blelloch.hpp"

namespace ttr {

// One 2×2 Möbius matrix [[a, b], [c, d]] per state slot.
template <class T>
struct MobiusBlock {
  std::vector<T> a, b, c, d;

  static MobiusBlock identity(std::size_t slots) {
    const T one = from_double<T>(1.0), zero = from_double<T>(0.0);
    return {std::vector<T>(slots, one), std::vector<T>(slots, zero), std::vector<T>(slots, zero),
            std::vector<T>(slots, one)};
  }
  std::size_t slots() const { return a.size(); }
};

// Scales [[a, b], [c, d]] by the power of two that puts its largest entry in
// [1/2, 1) (see "Range" above); leaves zero and non-finite matrices alone.
template <class T>
void rescale_by_power_of_two(T& a, T& b, T& c, T& d) {
  using std::abs;
  using std::isfinite;
  const T m = std::max({T(abs(a)), T(abs(b)), T(abs(c)), T(abs(d))});
  if (!(m > from_double<T>(0.0)) || !isfinite(m)) return;
  using Pow2 = binary_scaling<T>;
  const int e = Pow2::exponent(m);
  a = Pow2::ldexp(a, -e);
  b = Pow2::ldexp(b, -e);
  c = Pow2::ldexp(c, -e);
  d = Pow2::ldexp(d, -e);
}

// out = later · earlier (the map `later ∘ earlier`), slot by slot, without temporaries;
// `out` aliases neither operand.
template <class T>
void compose_mobius(const MobiusBlock<T>& earlier, const MobiusBlock<T>& later, MobiusBlock<T>& out) {
  for (std::size_t s = 0; s < later.slots(); ++s) {
    const auto entry = [&](T& o, const T& l1, const T& e1, const T& l2, const T& e2) {  // o = l1 e1 + l2 e2
      o = l1;
      scale_by(o, e1);
      mul_add_to(o, l2, e2);
    };
    entry(out.a[s], later.a[s], earlier.a[s], later.b[s], earlier.c[s]);
    entry(out.b[s], later.a[s], earlier.b[s], later.b[s], earlier.d[s]);
    entry(out.c[s], later.c[s], earlier.a[s], later.d[s], earlier.c[s]);
    entry(out.d[s], later.c[s], earlier.b[s], later.d[s], earlier.d[s]);
    if constexpr (binary_scaling<T>::enabled) rescale_by_power_of_two(out.a[s], out.b[s], out.c[s], out.d[s]);
  }
}

// out = (a Λ + b)/(c Λ + d) for slot s; den is scratch.
template <class T>
void apply_mobius(const MobiusBlock<T>& m, std::size_t s, const T& lam, T& out, T& den) {
  out = m.b[s];
  mul_add_to(out, m.a[s], lam);
  den = m.d[s];
  mul_add_to(den, m.c[s], lam);
  out /= den;
}

// The store hook of the precision scan: a Möbius matrix written to memory is narrowed.
template <class P>
struct StoreMobius {
  void operator()(MobiusBlock<typename P::acc>& m) const {
    narrow_all<P>(m.a);
    narrow_all<P>(m.b);
    narrow_all<P>(m.c);
    narrow_all<P>(m.d);
  }
};

template <class P>
struct KlaScanWork {
  using A = typename P::acc;
  MobiusBlock<A> mobius_identity;
  DiagonalAffine<A> affine_identity;
  std::vector<MobiusBlock<A>> precision;  // M_t, then P_t = M_t ⋯ M_1
  std::vector<DiagonalAffine<A>> mean;    // (f_t, k λv v), then their prefix compositions
  ScanWorkspace<MobiusBlock<A>> mobius_scan;
  ScanWorkspace<DiagonalAffine<A>> affine_scan;
  std::vector<A> lam;  // Λ_t of every slot, t = 0 … len: lam[t·S + s]
  std::vector<A> a2;   // ā² per slot
  A x, y, o, ov;       // scratch scalars

  void reserve(std::int64_t len, std::size_t slots) {
    mobius_identity = MobiusBlock<A>::identity(slots);
    affine_identity = DiagonalAffine<A>::identity(static_cast<int>(slots), 1);
    precision.resize(static_cast<std::size_t>(len), mobius_identity);
    mean.resize(static_cast<std::size_t>(len), affine_identity);
    lam.resize(static_cast<std::size_t>(len + 1) * slots);
    a2.resize(slots);
  }
};

// One (batch, head) sequence (w reserved for len and N·D slots); Lam and Eta hold
// Λ_0, η_0 on entry and Λ_len, η_len on exit.
template <class P>
void kla_scan_sequence(SeqView<const typename P::acc> q, SeqView<const typename P::acc> k,
                       SeqView<const typename P::acc> v, SeqView<const typename P::acc> lv,
                       const typename P::acc* a, const typename P::acc* p, std::int64_t len, int N, int D,
                       const typename P::acc& scale, typename P::acc* Lam, typename P::acc* Eta,
                       SeqView<typename P::acc> o, SeqView<typename P::acc> o_var, const ScanPlan& plan,
                       KlaScanWork<P>& w) {
  using A = typename P::acc;
  const std::size_t S = static_cast<std::size_t>(N) * D;
  const auto slot = [D](int n, int d) { return static_cast<std::size_t>(n) * D + d; };
  const A one = from_double<A>(1.0), zero = from_double<A>(0.0);
  const std::span<MobiusBlock<A>> precision(w.precision.data(), static_cast<std::size_t>(len));
  const std::span<DiagonalAffine<A>> mean(w.mean.data(), static_cast<std::size_t>(len));
  for (std::size_t s = 0; s < S; ++s) {
    w.a2[s] = a[s];
    scale_by(w.a2[s], a[s]);
    w.lam[s] = Lam[s];
  }

  // Precision track: M_t (eq. (17)), prefix products, Λ_t = P_t(Λ_0) (Cor. 1.1).
  std::optional<NamedIntermediate> phase;
  phase.emplace("Möbius matrix M_t = [[1 + p̄φ, ā²φ], [p̄, ā²]], φ = k²λv");
  for (std::int64_t t = 0; t < len; ++t)
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        MobiusBlock<A>& m = precision[t];
        w.x = k.row(t)[n];  // φ = k_n² λv_d
        scale_by(w.x, k.row(t)[n]);
        scale_by(w.x, lv.row(t)[d]);
        m.a[s] = one;
        mul_add_to(m.a[s], p[s], w.x);
        m.b[s] = w.a2[s];
        scale_by(m.b[s], w.x);
        m.c[s] = p[s];
        m.d[s] = w.a2[s];
      }
  phase.emplace("Möbius prefix products P_t = M_t ⋯ M_1");
  prefix_scan(precision, plan, w.mobius_identity, compose_mobius<A>, StoreMobius<P>{}, w.mobius_scan);
  phase.emplace("precision Λ_t = P_t(Λ_0)");
  for (std::int64_t t = 0; t < len; ++t)
    for (std::size_t s = 0; s < S; ++s)
      apply_mobius(precision[t], s, Lam[s], w.lam[(t + 1) * S + s], w.y);

  // Mean track: (f_t, k λv v) with f_t = ā/(ā² + p̄Λ_{t−1}) (eq. (19)), prefix compositions (Cor. 2.1).
  // mutant kla-gate-current-precision: f_t formed from Λ_t, the precision scan's
  // output at the same index t (an off-by-one between the two scans' buffers),
  // instead of Λ_{t−1}.
  const std::size_t lag = mutated(Mutant::kla_gate_current_precision) ? 1 : 0;
  phase.emplace("mean-scan gate f_t = ā/(ā² + p̄Λ_{t-1}) and write kλv v");
  for (std::int64_t t = 0; t < len; ++t)
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        DiagonalAffine<A>& e = mean[t];
        w.y = w.a2[s];
        mul_add_to(w.y, p[s], w.lam[(t + lag) * S + s]);
        e.A[s] = a[s];
        e.A[s] /= w.y;
        w.x = lv.row(t)[d];  // k_n (λv_d v_d)
        scale_by(w.x, v.row(t)[d]);
        e.B[s] = k.row(t)[n];
        scale_by(e.B[s], w.x);
      }
  phase.emplace("information mean η_t = A_{1:t} η_0 + b_{1:t} (affine prefix compositions)");
  prefix_scan(mean, plan, w.affine_identity, compose_affine<A>, StoreAffine<P>{}, w.affine_scan);

  phase.emplace("readout o = scale Σ q η/Λ, o_var = scale² Σ q²/Λ");
  // Readout with η_t = A_{1:t} η_0 + b_{1:t} and Λ_t.
  // mutant accumulate-in-16bit: the readout's running sums over n are held in the
  // storage format (a bf16/fp16 accumulator) instead of fp32.
  bool acc16 = false;
  if constexpr (P::narrows) acc16 = mutated(Mutant::accumulate_in_16bit);
  const A scale2 = scale * scale;
  for (std::int64_t t = 0; t < len; ++t) {
    const A* lam_t = w.lam.data() + (t + 1) * S;
    const DiagonalAffine<A>& e = mean[t];
    for (int d = 0; d < D; ++d) {
      w.o = zero;
      w.ov = zero;
      for (int n = 0; n < N; ++n) {
        const std::size_t s = slot(n, d);
        const A& qn = q.row(t)[n];
        w.x = e.B[s];  // μ = η_t/Λ_t
        mul_add_to(w.x, e.A[s], Eta[s]);
        w.x /= lam_t[s];
        mul_add_to(w.o, qn, w.x);
        w.x = qn;  // q_n²/Λ_t
        scale_by(w.x, qn);
        w.x /= lam_t[s];
        w.ov += w.x;
        if (acc16) {
          w.o = P::narrow(w.o);
          w.ov = P::narrow(w.ov);
        }
      }
      scale_by(w.o, scale);
      scale_by(w.ov, scale2);
      o.row(t)[d] = P::narrow(w.o);
      o_var.row(t)[d] = P::narrow(w.ov);
    }
  }
  if (len > 0) {
    const DiagonalAffine<A>& last = mean[len - 1];
    for (std::size_t s = 0; s < S; ++s) {
      Lam[s] = w.lam[static_cast<std::size_t>(len) * S + s];
      w.x = last.B[s];
      mul_add_to(w.x, last.A[s], Eta[s]);
      Eta[s] = w.x;
    }
  }
}

// Both forms: inputs and outputs as kla_kalman_sequential.
template <class P>
void kla_kalman_scan_forward(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                             const typename P::acc& scale, const ScanPlan& plan, KlaOutputs<typename P::acc>& out) {
  using A = typename P::acc;
  Tensor<A> qn, kn, vn;
  const KlaInputs<A> kin{policy_operand<P>(in.q, qn), policy_operand<P>(in.k, kn), policy_operand<P>(in.v, vn),
                         in.lambda_v, in.a_bar, in.p_bar, in.lambda_init, in.eta_init};
  const std::int64_t B = kin.q.dim(0), len = kin.q.dim(1), H = kin.q.dim(2);
  const int N = static_cast<int>(kin.q.dim(3)), D = static_cast<int>(kin.v.dim(3));
  const A zero = from_double<A>(0.0);
  kla_initial_state(kin, lambda0, out.lambda_T, out.eta_T);
  out.o = Tensor<A>({B, len, H, D}, zero);
  out.o_var = Tensor<A>({B, len, H, D}, zero);
  KlaScanWork<P> w;
  w.reserve(len, static_cast<std::size_t>(N) * D);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      kla_scan_sequence<P>(seq(kin.q, b, h), seq(kin.k, b, h), seq(kin.v, b, h), seq(kin.lambda_v, b, h),
                           kin.a_bar.data.data() + h * N * D, kin.p_bar.data.data() + h * N * D, len, N, D, scale,
                           state_block(out.lambda_T, b, h), state_block(out.eta_T, b, h), seq(out.o, b, h),
                           seq(out.o_var, b, h), plan, w);
}

// Form `scan`: one Blelloch scan over the whole sequence per track.
template <class P>
void kla_kalman_scan(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                     const typename P::acc& scale, KlaOutputs<typename P::acc>& out) {
  kla_kalman_scan_forward<P>(in, lambda0, scale, ScanPlan::whole_sequence(), out);
}

// Form `chunk`: the two-level chunked scan with chunks of `chunk` tokens (any T).
template <class P>
void kla_kalman_chunk(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                      const typename P::acc& scale, int chunk, KlaOutputs<typename P::acc>& out) {
  kla_kalman_scan_forward<P>(in, lambda0, scale, ScanPlan::chunked(chunk), out);
}

}  // namespace ttr
