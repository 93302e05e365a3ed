// The double-double tier: QD's dd_real (Hida, Li & Bailey, "Library for
// double-double and quad-double arithmetic", 2008; Debian's libqd-dev). A value is
// an unevaluated sum hi + lo of two doubles with |lo| ≤ ulp(hi)/2: 106 significand
// bits, double's exponent range.
//
// Accuracy (what docs/oracle-tiers.md builds on). Debian builds QD
// without QD_IEEE_ADD and with QD_SLOPPY_MUL/QD_SLOPPY_DIV, so
//   a ± b  satisfies the Cray-style bound  fl(a ± b) = a(1 + δ1) ± b(1 + δ2),
//   a · b, a / b  fl(a ∘ b) = (a ∘ b)(1 + δ),
// with |δ| ≤ c·ε, ε = dd_real::_eps = 2^-104 and c a small constant (≤ 4 for the
// sloppy forms, QD paper §§4–5); sqrt is one Newton step from the double root
// (relative error a few ε); exp reduces by ln 2 and by 2^-9 and sums a Taylor
// series to ε·|r| before squaring nine times back; log takes one Newton step
// x − 1 + a·e^{−x} from the double log, so its absolute error is a few ε (relative
// to |log a| unless log a ≈ 0). Every bound is componentwise of the Cray kind at
// worst, so the recurrences' first-order error in this tier is that of a
// backward-stable evaluation with unit roundoff u_dd = κ·2^-104 for a small κ; the
// oracle never relies on κ: it measures the tier's error against float64's
// (oracles/oracle_tier.hpp).
//
// Range: double's. exp(x) returns 0 below x = −709 and +inf above 709, and a
// recurrence whose exact values leave double's range (KLA-K's unscaled precision)
// gives ±inf or NaN here; the oracle then escalates those slices to MPFR. There is
// no binary_scaling specialisation (exponents carried as 0: the scaled forms reduce
// to the plain arithmetic), which only matters for those same slices.
//
// Exact products. Every dd product starts from two_prod(a, b) = (fl(a·b), a·b −
// fl(a·b)); the error term is representable (barring underflow), so Dekker's
// splitting (QD's default: ~17 flops) and one fused multiply-subtract give the same
// bits. Where the target has a fast FMA (FP_FAST_FMA: every aarch64; x86-64 with
// -mfma, which CMake gives the dd runner TUs when the build machine runs FMA code,
// option TTR_DD_FMA) QD takes the FMA (QD_FMS, qd_config.h), which halves the dd
// tier's time (docs/oracle-tiers.md); elsewhere it splits. The
// compiler still contracts nothing (-ffp-contract=off): only these explicit fma
// calls fuse. oracles/tiers/dd_support.hpp says whether this machine can run them.
//
// Included only by the dd runner TUs (oracles/tiers/dd.hpp) and tests: QD's header
// is light, but keeping tiers apart keeps recompilation local.
#pragma once

#include <cmath>
#if defined(FP_FAST_FMA) && !defined(QD_FMS)
#define QD_FMS(a, b, c) std::fma((a), (b), -(c))
#endif
#include <qd/dd_real.h>

#include <string>

#include "reference/core/scalar.hpp"

namespace ttr {

using dd_real = ::dd_real;

// The unit roundoff the error estimates use for the dd tier: 2^-104 (QD's ε),
// two bits more pessimistic than the 2^-106 the representation allows.
inline constexpr double kDoubleDoubleEps = 0x1p-104;

template <>
struct scalar_traits<dd_real> {
  static std::string name() { return "dd"; }
  static dd_real from_double(double x) { return dd_real(x); }  // exact
  // hi + lo rounded once to the nearest double (normalised: hi already is, except
  // at a tie broken the other way).
  static double to_double(const dd_real& x) { return x.x[0] + x.x[1]; }
};

template <>
struct precision_control<dd_real> {
  static unsigned set_bits(unsigned) { return 106; }
  static unsigned working_bits() { return 106; }
};

}  // namespace ttr
