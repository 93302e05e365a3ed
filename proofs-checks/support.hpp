// Shared by the catalogue entries: the MPFR scalar, per-entry random streams,
// tolerances derived from the working precision, and Evidence builders (the
// dense linear algebra is support/dense.hpp).
// Heavy (Boost.Multiprecision): included only by the entry translation units.
#pragma once

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "proofs-checks/catalogue.hpp"
#include "reference/core/multiprecision.hpp"

namespace ttr::proofs {

using mp = mpfr_real;

// Sets this thread's default MPFR precision for the scope of one check.
class MpPrecision {
 public:
  explicit MpPrecision(unsigned bits) : old_(mpfr_real::default_precision()) {
    precision_control<mpfr_real>::set_bits(bits);
  }
  ~MpPrecision() { mpfr_real::default_precision(old_); }
  MpPrecision(const MpPrecision&) = delete;
  MpPrecision& operator=(const MpPrecision&) = delete;

 private:
  unsigned old_;
};

// A stream that depends only on (seed, id): entries never share randomness,
// and adding an entry changes no other entry's evidence.
inline std::mt19937_64 entry_rng(const ProofOptions& opt, std::string_view id) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::seed_seq seq{static_cast<std::uint32_t>(opt.seed), static_cast<std::uint32_t>(opt.seed >> 32),
                    static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)};
  return std::mt19937_64(seq);
}

inline double to_d(const mp& x) { return scalar_traits<mp>::to_double(x); }

// A double for evidence text: 4 significant digits, scientific when small or large.
inline std::string sci(double x) {
  std::ostringstream o;
  o.precision(4);
  o << x;
  return o.str();
}

// Accepted relative discrepancy of an exact identity evaluated in `bits`-bit
// arithmetic: 2^(48 - bits) leaves 48 bits for condition numbers and
// accumulated rounding of the sizes we use (n <= 64, T <= 64); at 256 bits
// that is ~3.5e-63, so "holds" means agreement to ~62 digits.
inline double exact_tolerance(unsigned bits) { return std::ldexp(1.0, 48 - static_cast<int>(bits)); }

// A printed formula "fails" when it misses by more than this (relative):
// ~50 orders of magnitude above exact_tolerance(256), so never rounding.
inline constexpr double kPrintedFailure = 1e-8;

inline Evidence holds_if(double discrepancy, double tolerance, std::string measure, std::string witness,
                         std::string detail = {}) {
  Evidence e;
  e.reproduced = std::isfinite(discrepancy) && discrepancy <= tolerance;
  e.discrepancy = discrepancy;
  e.tolerance = tolerance;
  e.measure = std::move(measure);
  e.witness = std::move(witness);
  e.detail = std::move(detail);
  return e;
}

// fails_as_printed / holds_with_correction: the printed form misses by at
// least kPrintedFailure (NaN/Inf count as missing) and the corrected form holds.
inline Evidence printed_fails(double printed, double corrected, double tolerance, std::string measure,
                              std::string witness, std::string detail = {}) {
  Evidence e = holds_if(corrected, tolerance, std::move(measure), std::move(witness), std::move(detail));
  e.printed_discrepancy = printed;
  e.reproduced = e.reproduced && !(printed < kPrintedFailure);
  return e;
}

}  // namespace ttr::proofs
