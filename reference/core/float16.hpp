// 16-bit floating-point formats emulated on the CPU: bfloat16 and IEEE binary16.
//
// A value is held as a float that is exactly representable in the format; every
// arithmetic result is computed in double and rounded once to the format with
// round-to-nearest-even, gradual underflow (subnormals) and overflow to +-inf.
// Computing in double and rounding again is innocuous ("double rounding" cannot
// change the result) because 53 >= 2p + 2 for p = 8 (bf16) and p = 11 (fp16):
// S. Figueroa, "When is double rounding innocuous?", SIGNUM 1995, for + - * / sqrt.
// exp/log/etc. are the double results rounded once: faithful, and correctly rounded
// unless the double value lies within one double ulp of a format midpoint.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ttr {

// A binary floating-point format: p significant bits (implicit bit included),
// smallest normal exponent emin, largest exponent emax.
template <int P, int Emin, int Emax>
struct BinaryFormat {
  static constexpr int p = P;
  static constexpr int emin = Emin;
  static constexpr int emax = Emax;
  // Largest finite value (2 - 2^(1-p)) * 2^emax.
  static double max_finite() { return std::ldexp(2.0 - std::ldexp(1.0, 1 - P), Emax); }
  // Unit roundoff u = 2^-p (the bound on relative rounding error of RNE).
  static double unit_roundoff() { return std::ldexp(1.0, -P); }

  // Rounds x to the nearest value of the format, ties to even.
  static double round(double x) {
    if (!std::isfinite(x) || x == 0.0) return x;
    const int e = std::ilogb(x);                  // |x| in [2^e, 2^(e+1))
    const int q = (e > Emin ? e : Emin) - (P - 1); // exponent of one ulp (fixed below emin)
    // Scaling by a power of two is exact; nearbyint rounds to nearest even in the
    // default rounding mode, which we never change.
    const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
    if (std::fabs(r) > max_finite()) return std::copysign(std::numeric_limits<double>::infinity(), x);
    return r == 0.0 ? std::copysign(0.0, x) : r;
  }
};

using BF16Format = BinaryFormat<8, -126, 127>;
using FP16Format = BinaryFormat<11, -14, 15>;

// Bit encodings (for file I/O). The value must already be representable.
inline std::uint16_t bf16_bits(double representable) {
  const float f = static_cast<float>(representable);  // exact: bf16 values are floats
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // keep quiet NaN
  return static_cast<std::uint16_t>(u >> 16);
}
inline double bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t fp16_bits(double representable) {
  const std::uint16_t sign = std::signbit(representable) ? 0x8000u : 0u;
  const double a = std::fabs(representable);
  if (std::isnan(a)) return 0x7E00u;
  if (std::isinf(a)) return sign | 0x7C00u;
  if (a == 0.0) return sign;
  const int e = std::ilogb(a);
  if (e < FP16Format::emin)  // subnormal: multiples of 2^-24
    return sign | static_cast<std::uint16_t>(std::ldexp(a, 24));
  const auto mant = static_cast<std::uint16_t>(std::ldexp(a, 10 - e) - 1024.0);
  return sign | static_cast<std::uint16_t>((e + 15) << 10) | mant;
}
inline double fp16_value(std::uint16_t bits) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  const int ef = (bits >> 10) & 0x1F;
  const int mf = bits & 0x3FF;
  if (ef == 0x1F) return mf ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (ef == 0) return sign * std::ldexp(mf, -24);
  return sign * std::ldexp(1024 + mf, ef - 25);
}

// A scalar of a 16-bit format: every operation rounds once to the format.
template <class Format>
class Float16 {
 public:
  using format = Format;
  Float16() = default;
  explicit Float16(double x) : v_(static_cast<float>(Format::round(x))) {}
  explicit operator double() const { return v_; }
  double value() const { return v_; }

  friend Float16 operator+(Float16 a, Float16 b) { return Float16(double(a.v_) + double(b.v_)); }
  friend Float16 operator-(Float16 a, Float16 b) { return Float16(double(a.v_) - double(b.v_)); }
  friend Float16 operator*(Float16 a, Float16 b) { return Float16(double(a.v_) * double(b.v_)); }
  friend Float16 operator/(Float16 a, Float16 b) { return Float16(double(a.v_) / double(b.v_)); }
  friend Float16 operator-(Float16 a) { return from_exact(-a.v_); }
  Float16& operator+=(Float16 b) { return *this = *this + b; }
  Float16& operator-=(Float16 b) { return *this = *this - b; }
  Float16& operator*=(Float16 b) { return *this = *this * b; }
  Float16& operator/=(Float16 b) { return *this = *this / b; }
  friend bool operator==(Float16 a, Float16 b) { return a.v_ == b.v_; }
  friend bool operator!=(Float16 a, Float16 b) { return a.v_ != b.v_; }
  friend bool operator<(Float16 a, Float16 b) { return a.v_ < b.v_; }
  friend bool operator>(Float16 a, Float16 b) { return a.v_ > b.v_; }
  friend bool operator<=(Float16 a, Float16 b) { return a.v_ <= b.v_; }
  friend bool operator>=(Float16 a, Float16 b) { return a.v_ >= b.v_; }

  friend Float16 sqrt(Float16 a) { return Float16(std::sqrt(double(a.v_))); }
  friend Float16 exp(Float16 a) { return Float16(std::exp(double(a.v_))); }
  friend Float16 log(Float16 a) { return Float16(std::log(double(a.v_))); }
  friend Float16 abs(Float16 a) { return from_exact(std::fabs(a.v_)); }
  friend Float16 fabs(Float16 a) { return from_exact(std::fabs(a.v_)); }
  friend bool isfinite(Float16 a) { return std::isfinite(a.v_); }

 private:
  static Float16 from_exact(float v) { Float16 r; r.v_ = v; return r; }
  float v_ = 0.0f;
};

using bfloat16 = Float16<BF16Format>;
using float16 = Float16<FP16Format>;

}  // namespace ttr
