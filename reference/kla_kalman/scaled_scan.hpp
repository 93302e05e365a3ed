// Kalman linear attention (KLA-K), scaled scan forms (`scan`, `chunk`): the two
// prefix scans of scan.hpp (KLA-K §4.2, Alg. 1) in a representation that cannot
// overflow fp32/bf16 for any valid input. The paper's representation — Λ and η as
// plain numbers, each composed Möbius matrix only rescaled as a whole — stays
// available as the forms `scan_unscaled`, `chunk_unscaled` (scan.hpp); with p̄ = 0
// its Λ_t = ā^{-2t}(Λ_0 + Σ ā^{2s}φ_s) passes 3.4e38 within a few tokens at small ā
// and o = Σ q η/Λ becomes inf/inf = NaN while the truth is an ordinary number.
// Derivation and error analysis: docs/kla-scaled.md.
//
// Representation (reference/core/pow2.hpp: Scaled<T> = m·2^e, m ∈ [1/2, 1), e an int):
// every quantity of both tracks is a Scaled number — its own mantissa in acc and
// its own integer exponent.
//
//  * Precision track (Thm 1, eqs. (16)-(17); Cor. 1.1). Each entry of every Möbius
//    matrix M_t = [[1 + p̄φ_t, ā²φ_t], [p̄, ā²]] and of every composition
//    P = M_t ⋯ M_s. A common power of two of the four entries is irrelevant (a
//    Möbius map is projective), so after each composition the largest exponent is
//    subtracted from all four (exact). One shared exponent per matrix is not
//    enough: with p̄ = 0, P_t = [[1, β_t], [0, ā^{2t}]], and the spread between the
//    entries is Λ_t's own range, which no single scaling brings into fp32.
//    Λ_t = P_t(Λ_0) = (aΛ_0 + b)/(cΛ_0 + d), Scaled.
//  * Information mean (Thm 2, eq. (19); Cor. 2.1): the affine pairs
//    (f_t, k λv v), f_t = ā/(ā² + p̄Λ_{t−1}), and their compositions
//    (A2 A1, A2 B1 + B2), Scaled. Sharing Λ_t's exponent is not enough either:
//    with p̄ = 0, η_t ~ ā^{−t} while Λ_t ~ ā^{−2t}, so η_t/2^{E_t} ~ μ_t underflows
//    fp32 where η_t itself (the output eta_T) is an ordinary number, and eta_T
//    came back 0 or inf (fuzz case 132, seed 1: docs/kla-scaled.md).
//  * Readout: μ_t = η_t/Λ_t and q²/Λ_t as Scaled quotients, rounded into acc once
//    (a value below fp32's range underflows there, faithfully); o and o_var as the
//    sequential form. The final states Λ_T, η_T rounded into acc: ±inf exactly
//    where the true value exceeds the format.
//
// So nothing overflows or underflows before the single rounding of each output
// element into acc, for any valid input: an fp32 run is non-finite only where
// the true output is beyond fp32. Exponents are ints, growing by at most ~600
// per token for fp32 inputs: T < 3·10^6 tokens.
//
// Rounding: every Scaled product, quotient and sum rounds once in its mantissa
// (relative u of acc), as the unscaled form's operations do; the powers of two
// are exact (the alignment of a sum's smaller operand rounds only once it is
// below 2^-125 of the larger). Entries of the Möbius products are sums of
// non-negative terms, so their relative error is ≤ 3u per composition on their
// path, whatever their exponents: the unscaled form's error analysis
// (tests/kla_kalman/kla_scan_test.cpp) holds unchanged, now without its range
// restriction.
//
// Arithmetic policy P (reference/core/policy.hpp), as scan.hpp: narrowed to the
// 16-bit format are q, k, v, every composition the scans store (the four
// mantissas of a Möbius matrix and the mantissa of an affine pair's additive
// part — exponents are integers, stored exactly), o and o_var; in acc (fp32): λv,
// ā, p̄, the initial states, the gates' mantissas, the precision path Λ_t handed
// to the mean scan, the final states. With an exact policy every output equals
// the sequential form's in exact arithmetic (MPFR:
// tests/kla_kalman/kla_scaled_test.cpp, to 1e-60).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reference/core/intermediate.hpp"
#include "reference/core/mutant.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/pow2.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/gated_linear_scan.hpp"  // policy_operand
#include "reference/kla_kalman/sequential.hpp"
#include "reference/scan/blelloch.hpp"

namespace ttr {

// One 2×2 Möbius matrix [[a, b], [c, d]] per state slot, every entry a Scaled number.
template <class T>
struct ScaledMobiusBlock {
  std::vector<Scaled<T>> a, b, c, d;

  static ScaledMobiusBlock identity(std::size_t slots) {
    const Scaled<T> one = normalised(from_double<T>(1.0)), zero{from_double<T>(0.0), 0};
    return {std::vector<Scaled<T>>(slots, one), std::vector<Scaled<T>>(slots, zero),
            std::vector<Scaled<T>>(slots, zero), std::vector<Scaled<T>>(slots, one)};
  }
  std::size_t slots() const { return a.size(); }
};

// Divides slot s's matrix by the power of two of its largest entry (a Möbius map
// is projective): exact, keeps the exponents at most 0 and bounded by the spread.
template <class T>
void drop_common_exponent(ScaledMobiusBlock<T>& m, std::size_t s) {
  if constexpr (binary_scaling<T>::enabled) {
    int top = 0;
    bool any = false;
    for (const Scaled<T>* x : {&m.a[s], &m.b[s], &m.c[s], &m.d[s]}) {
      if (is_zero(x->m)) continue;
      top = any ? std::max(top, x->e) : x->e;
      any = true;
    }
    for (Scaled<T>* x : {&m.a[s], &m.b[s], &m.c[s], &m.d[s]})
      if (!is_zero(x->m)) x->e -= top;
  }
}

// out = later · earlier (the map `later ∘ earlier`), slot by slot; `out` aliases neither.
template <class T>
void compose_scaled_mobius(const ScaledMobiusBlock<T>& earlier, const ScaledMobiusBlock<T>& later,
                           ScaledMobiusBlock<T>& out) {
  for (std::size_t s = 0; s < later.slots(); ++s) {
    out.a[s] = later.a[s] * earlier.a[s] + later.b[s] * earlier.c[s];
    out.b[s] = later.a[s] * earlier.b[s] + later.b[s] * earlier.d[s];
    out.c[s] = later.c[s] * earlier.a[s] + later.d[s] * earlier.c[s];
    out.d[s] = later.c[s] * earlier.b[s] + later.d[s] * earlier.d[s];
    drop_common_exponent(out, s);
  }
}

// The store hook of the precision scan: the mantissas a kernel writes are narrowed
// (a narrowed mantissa may round up to 1: still a valid Scaled value).
template <class P>
struct StoreScaledMobius {
  void operator()(ScaledMobiusBlock<typename P::acc>& m) const {
    if constexpr (P::narrows)
      for (auto* entries : {&m.a, &m.b, &m.c, &m.d})
        for (auto& x : *entries) x.m = P::narrow(x.m);
  }
};

// One affine map (A, B): η ↦ Aη + B per state slot, both Scaled.
template <class T>
struct ScaledAffine {
  std::vector<Scaled<T>> A, B;

  static ScaledAffine identity(std::size_t slots) {
    return {std::vector<Scaled<T>>(slots, normalised(from_double<T>(1.0))),
            std::vector<Scaled<T>>(slots, Scaled<T>{from_double<T>(0.0), 0})};
  }
};

// out = later ∘ earlier = (A2 A1, A2 B1 + B2), slot by slot; `out` aliases neither.
template <class T>
void compose_scaled_affine(const ScaledAffine<T>& earlier, const ScaledAffine<T>& later, ScaledAffine<T>& out) {
  for (std::size_t s = 0; s < later.A.size(); ++s) {
    out.A[s] = later.A[s] * earlier.A[s];
    out.B[s] = later.A[s] * earlier.B[s] + later.B[s];
  }
}

// The store hook of the mean scan: the additive part's mantissas are narrowed; the
// gates A stay in acc, as the unscaled form's (and every cumulative gate) do.
template <class P>
struct StoreScaledAffine {
  void operator()(ScaledAffine<typename P::acc>& e) const {
    if constexpr (P::narrows)
      for (auto& x : e.B) x.m = P::narrow(x.m);
  }
};

template <class P>
struct KlaScaledScanWork {
  using A = typename P::acc;
  ScaledMobiusBlock<A> mobius_identity;
  ScaledAffine<A> affine_identity;
  std::vector<ScaledMobiusBlock<A>> precision;  // M_t, then P_t = M_t ⋯ M_1
  std::vector<ScaledAffine<A>> mean;            // (f_t, k λv v), then their prefix compositions
  ScanWorkspace<ScaledMobiusBlock<A>> mobius_scan;
  ScanWorkspace<ScaledAffine<A>> affine_scan;
  std::vector<Scaled<A>> lam;       // Λ_t of every slot, t = 0 … len: lam[t·S + s]
  std::vector<Scaled<A>> abar, a2;  // ā, ā² per slot
  std::vector<Scaled<A>> eta0;      // η_0 per slot
  A o, ov;                          // scratch

  void reserve(std::int64_t len, std::size_t slots) {
    mobius_identity = ScaledMobiusBlock<A>::identity(slots);
    affine_identity = ScaledAffine<A>::identity(slots);
    precision.resize(static_cast<std::size_t>(len), mobius_identity);
    mean.resize(static_cast<std::size_t>(len), affine_identity);
    lam.resize(static_cast<std::size_t>(len + 1) * slots);
    abar.resize(slots);
    a2.resize(slots);
    eta0.resize(slots);
  }
};

// One (batch, head) sequence (w reserved for len and N·D slots); Lam and Eta hold
// Λ_0, η_0 on entry and Λ_len, η_len on exit.
template <class P>
void kla_scaled_scan_sequence(SeqView<const typename P::acc> q, SeqView<const typename P::acc> k,
                              SeqView<const typename P::acc> v, SeqView<const typename P::acc> lv,
                              const typename P::acc* a, const typename P::acc* p, std::int64_t len, int N, int D,
                              const typename P::acc& scale, typename P::acc* Lam, typename P::acc* Eta,
                              SeqView<typename P::acc> o, SeqView<typename P::acc> o_var, const ScanPlan& plan,
                              KlaScaledScanWork<P>& w) {
  using A = typename P::acc;
  using S = Scaled<A>;
  const std::size_t slots = static_cast<std::size_t>(N) * D;
  const auto slot = [D](int n, int d) { return static_cast<std::size_t>(n) * D + d; };
  const A zero = from_double<A>(0.0);
  const S one = normalised(from_double<A>(1.0));
  const std::span<ScaledMobiusBlock<A>> precision(w.precision.data(), static_cast<std::size_t>(len));
  const std::span<ScaledAffine<A>> mean(w.mean.data(), static_cast<std::size_t>(len));
  for (std::size_t s = 0; s < slots; ++s) {
    w.abar[s] = normalised(a[s]);
    w.a2[s] = w.abar[s] * w.abar[s];
    w.lam[s] = normalised(Lam[s]);
    w.eta0[s] = normalised(Eta[s]);
  }

  // Precision track: M_t (eq. (17)) entry by entry in Scaled arithmetic, prefix
  // products, Λ_t = P_t(Λ_0) (Cor. 1.1).
  std::optional<NamedIntermediate> phase;
  phase.emplace("Möbius matrix M_t = [[1 + p̄φ, ā²φ], [p̄, ā²]], φ = k²λv (scaled entries)");
  for (std::int64_t t = 0; t < len; ++t)
    for (int n = 0; n < N; ++n) {
      const S kn = normalised(k.row(t)[n]);
      const S k2 = kn * kn;
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        ScaledMobiusBlock<A>& m = precision[t];
        const S phi = k2 * normalised(lv.row(t)[d]);  // φ = k_n² λv_d
        const S pb = normalised(p[s]);
        m.a[s] = one + pb * phi;
        m.b[s] = w.a2[s] * phi;
        m.c[s] = pb;
        m.d[s] = w.a2[s];
        drop_common_exponent(m, s);
      }
    }
  phase.emplace("Möbius prefix products P_t = M_t ⋯ M_1 (scaled entries)");
  prefix_scan(precision, plan, w.mobius_identity, compose_scaled_mobius<A>, StoreScaledMobius<P>{}, w.mobius_scan);
  phase.emplace("precision Λ_t = P_t(Λ_0) (scaled)");
  for (std::int64_t t = 0; t < len; ++t)
    for (std::size_t s = 0; s < slots; ++s) {
      const ScaledMobiusBlock<A>& m = precision[t];
      const S& lam0 = w.lam[s];
      w.lam[(t + 1) * slots + s] = (m.a[s] * lam0 + m.b[s]) / (m.c[s] * lam0 + m.d[s]);
    }

  // Mean track: (f_t, k λv v) (eq. (19)) in Scaled arithmetic, prefix compositions (Cor. 2.1).
  // mutant kla-gate-current-precision: f_t formed from Λ_t, the precision scan's
  // output at the same index t (an off-by-one between the two scans' buffers),
  // instead of Λ_{t−1}.
  const std::size_t lag = mutated(Mutant::kla_gate_current_precision) ? 1 : 0;
  phase.emplace("mean-scan gate f_t = ā/(ā² + p̄Λ_{t-1}) and write kλv v (scaled)");
  for (std::int64_t t = 0; t < len; ++t)
    for (int n = 0; n < N; ++n) {
      const S kn = normalised(k.row(t)[n]);
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        ScaledAffine<A>& e = mean[t];
        e.A[s] = w.abar[s] / (w.a2[s] + normalised(p[s]) * w.lam[(t + lag) * slots + s]);
        e.B[s] = kn * (normalised(lv.row(t)[d]) * normalised(v.row(t)[d]));  // k_n (λv_d v_d)
      }
    }
  phase.emplace("information mean η_t = f_{1:t} η_0 + b_{1:t} (scaled prefix compositions)");
  prefix_scan(mean, plan, w.affine_identity, compose_scaled_affine<A>, StoreScaledAffine<P>{}, w.affine_scan);

  phase.emplace("readout o = scale Σ q η/Λ, o_var = scale² Σ q²/Λ (scaled quotients)");
  // Readout: μ_t = η_t/Λ_t and q²/Λ_t as Scaled quotients, rounded into acc once
  // (below fp32's normal range: gradual underflow, the faithful tiny value).
  // mutant accumulate-in-16bit: the readout's running sums over n are held in the
  // storage format (a bf16/fp16 accumulator) instead of fp32.
  bool acc16 = false;
  if constexpr (P::narrows) acc16 = mutated(Mutant::accumulate_in_16bit);
  const A scale2 = scale * scale;
  for (std::int64_t t = 0; t < len; ++t) {
    const S* lam_t = w.lam.data() + (t + 1) * slots;
    const ScaledAffine<A>& e = mean[t];
    for (int d = 0; d < D; ++d) {
      w.o = zero;
      w.ov = zero;
      for (int n = 0; n < N; ++n) {
        const std::size_t s = slot(n, d);
        const A& qn = q.row(t)[n];
        const S eta = e.A[s] * w.eta0[s] + e.B[s];
        mul_add_to(w.o, qn, value_of(eta / lam_t[s]));
        const S qs = normalised(qn);
        w.ov += value_of(qs * qs / lam_t[s]);
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
  // The final states: ±inf exactly where the true value is beyond the format.
  phase.emplace("final states lambda_T = Λ_T, eta_T = η_T", true);
  if (len > 0) {
    const ScaledAffine<A>& last = mean[len - 1];
    for (std::size_t s = 0; s < slots; ++s) {
      Lam[s] = value_of(w.lam[static_cast<std::size_t>(len) * slots + s]);
      Eta[s] = value_of(last.A[s] * w.eta0[s] + last.B[s]);
    }
  }
}

// Both scaled forms: inputs and outputs as kla_kalman_sequential.
template <class P>
void kla_kalman_scaled_forward(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
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
  KlaScaledScanWork<P> w;
  w.reserve(len, static_cast<std::size_t>(N) * D);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      kla_scaled_scan_sequence<P>(seq(kin.q, b, h), seq(kin.k, b, h), seq(kin.v, b, h), seq(kin.lambda_v, b, h),
                                  kin.a_bar.data.data() + h * N * D, kin.p_bar.data.data() + h * N * D, len, N, D,
                                  scale, state_block(out.lambda_T, b, h), state_block(out.eta_T, b, h),
                                  seq(out.o, b, h), seq(out.o_var, b, h), plan, w);
}

// Form `scan`: one Blelloch scan over the whole sequence per track.
template <class P>
void kla_kalman_scaled_scan(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                            const typename P::acc& scale, KlaOutputs<typename P::acc>& out) {
  kla_kalman_scaled_forward<P>(in, lambda0, scale, ScanPlan::whole_sequence(), out);
}

// Form `chunk`: the two-level chunked scan with chunks of `chunk` tokens (any T).
template <class P>
void kla_kalman_scaled_chunk(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                             const typename P::acc& scale, int chunk, KlaOutputs<typename P::acc>& out) {
  kla_kalman_scaled_forward<P>(in, lambda0, scale, ScanPlan::chunked(chunk), out);
}

}  // namespace ttr
