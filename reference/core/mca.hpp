// Monte Carlo arithmetic (D. S. Parker, "Monte Carlo Arithmetic: exploiting
// randomness in floating-point arithmetic", UCLA CSD-970002, 1997; the model
// behind Verificarlo): a double whose every operation result x becomes
// x·(1 + δ), δ ~ U(−u_op, u_op), and a policy whose narrow() does the same with
// u_store. Run a form a few times with independent δ streams and the spread of
// the results is the forward error that rounding at those unit roundoffs causes,
// to first order, through this very computation — the error model's scale
// (gate/error_model.hpp, docs/error-model.md).
//
// A value exactly representable in the modelled format is left alone: rounding to
// nearest does not move it (a product of two bf16 numbers is exact in fp32, a
// bf16 input narrowed to bf16 is unchanged), and perturbing it would model
// errors a kernel does not make.
//
// Elementwise functions (exp, log, sqrt) are the exception to independent draws:
// a kernel that evaluates exp at the same argument twice gets the same rounded
// value twice (rounding is a function of the exact value), so their perturbation
// is a hash of (run, function, argument) rather than the next draw. It matters
// where arguments repeat: with a gate constant over the sequence (g_t = −0.01)
// a bf16 kernel rounds e^{g} the same way at every token, and the error of the
// state's geometric memory (~1/(1 − e^{g}) tokens) grows coherently, linearly in
// that memory; independent draws average it away like a random walk, and a
// correct bf16 sequential simple_gla backward was judged at ratio 10.6 on dg
// (sweep-decay at δ = 0.01; docs/error-model.md, "Elementwise functions").
//
// The perturbation stream is thread-local, seeded explicitly (mca_seed), and
// drawn in program order: the same seed gives bit-identical runs. Operations
// in double add a relative 2^-53 of their own, negligible against the u_op of
// fp32 (2^-24) and bf16 (2^-8) that the model is used with.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "reference/core/intermediate.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/pow2.hpp"
#include "reference/core/scalar.hpp"

namespace ttr {

// The format whose rounding a perturbation models (for the exactness test).
enum class McaFormat { any, fp32, bf16, fp16 };

inline bool mca_representable(double x, McaFormat f) {
  switch (f) {
    case McaFormat::fp32: return static_cast<double>(static_cast<float>(x)) == x;
    case McaFormat::bf16: return BF16Format::round(x) == x;
    case McaFormat::fp16: return FP16Format::round(x) == x;
    default: return false;
  }
}

// The first value of a traced run beyond the largest finite value of the format
// it is rounded to (gate/range.hpp): which intermediate (the form's name for it,
// reference/core/intermediate.hpp), which operation, the value and the limit.
struct McaRangeEvent {
  bool exceeded = false;
  const char* intermediate = nullptr;  // nullptr: the form names none there
  const char* operation = "";          // "+", "-", "*", "/", "exp", "sqrt", "log", "ldexp", "store"
  double value = 0.0, limit = 0.0;
};

struct McaContext {
  double u_op = 0.0;     // relative perturbation bound of every arithmetic result
  double u_store = 0.0;  // ... of every value the policy narrows (storage, operands)
  McaFormat op_format = McaFormat::any, store_format = McaFormat::any;
  std::uint64_t s[2] = {0x9E3779B97F4A7C15ull, 0xBF58476D1CE4E5B9ull};
  // Range trace: when on, every operation result is compared with op_max and
  // every narrowed value with store_max (the formats' largest finite values),
  // and the first one beyond is kept. Off: one predictable branch per operation.
  bool trace_range = false;
  double op_max = 0.0, store_max = 0.0;
  McaRangeEvent first_beyond;
  std::uint64_t key = 0;  // of the run: the elementwise functions' value-keyed perturbations
};

inline McaContext& mca_context() {
  thread_local McaContext c;
  return c;
}

// Seeds the thread's stream (splitmix64 of the seed, so nearby seeds give
// unrelated streams) and sets the two unit roundoffs.
inline void mca_seed(std::uint64_t seed, double u_op, McaFormat op_format, double u_store, McaFormat store_format) {
  McaContext& c = mca_context();
  c.u_op = u_op;
  c.u_store = u_store;
  c.op_format = op_format;
  c.store_format = store_format;
  for (auto& w : c.s) {
    std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    w = z ^ (z >> 31);
  }
  c.key = c.s[0] ^ (c.s[1] * 0xD6E8FEB86659FD93ull);
}

// The format's smallest normal number: below it the format's numbers are
// evenly spaced (gradual underflow), so rounding to nearest moves a value by at
// most half that spacing, u·min_normal — an absolute bound, where the relative
// u|x| would claim ever more precision for ever smaller values (a kernel's
// e^{b_t} with b_t < −87 in fp32, or a product that small stored in bf16, keeps
// only the bits above 2^-149, resp. 2^-133). 0 for McaFormat::any.
inline double mca_min_normal(McaFormat f) {
  switch (f) {
    case McaFormat::fp32:
    case McaFormat::bf16: return 0x1p-126;
    case McaFormat::fp16: return 0x1p-14;
    default: return 0.0;
  }
}

// x·(1 + u·ξ), ξ uniform in [−1, 1) from xoroshiro128+, or x + u·ξ·min_normal in
// the format's subnormal range (above); zeros, non-finite values and values
// representable in the format are left alone (rounding to nearest does not move
// them).
//
// keyed (the elementwise functions): ξ is instead a hash of (the run's key, `tag`,
// the argument's bits), so equal arguments get equal perturbations within a run;
// the stream is still advanced, so every other operation draws what it drew before.
inline double mca_perturb(double x, double u, McaFormat f, const double* keyed_arg = nullptr,
                          std::uint64_t tag = 0) {
  if (u == 0.0 || x == 0.0 || !std::isfinite(x) || mca_representable(x, f)) return x;
  McaContext& c = mca_context();
  const std::uint64_t s0 = c.s[0];
  std::uint64_t s1 = c.s[1];
  std::uint64_t r = s0 + s1;
  s1 ^= s0;
  c.s[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
  c.s[1] = (s1 << 37) | (s1 >> 27);
  if (keyed_arg) {  // splitmix64 of (key, tag, argument)
    std::uint64_t bits;
    std::memcpy(&bits, keyed_arg, sizeof bits);
    std::uint64_t z = c.key ^ (tag * 0x9E3779B97F4A7C15ull) ^ (bits * 0xBF58476D1CE4E5B9ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r = z ^ (z >> 31);
  }
  const double xi = static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0;  // [−1, 1)
  const double m = mca_min_normal(f);
  if (std::fabs(x) < m) return x + u * xi * m;
  return x * (1.0 + u * xi);
}

class McaReal {
 public:
  McaReal() = default;
  explicit McaReal(double x) : v_(x) {}
  double value() const { return v_; }

  friend McaReal operator+(McaReal a, McaReal b) { return op(a.v_ + b.v_, "+"); }
  friend McaReal operator-(McaReal a, McaReal b) { return op(a.v_ - b.v_, "-"); }
  friend McaReal operator*(McaReal a, McaReal b) { return op(a.v_ * b.v_, "*"); }
  // x/0 is a division by zero, not a value beyond the range: never traced.
  friend McaReal operator/(McaReal a, McaReal b) { return op(a.v_ / b.v_, b.v_ == 0.0 ? nullptr : "/"); }
  friend McaReal operator-(McaReal a) { return McaReal(-a.v_); }
  McaReal& operator+=(McaReal b) { return *this = *this + b; }
  McaReal& operator-=(McaReal b) { return *this = *this - b; }
  McaReal& operator*=(McaReal b) { return *this = *this * b; }
  McaReal& operator/=(McaReal b) { return *this = *this / b; }
  friend bool operator==(McaReal a, McaReal b) { return a.v_ == b.v_; }
  friend bool operator!=(McaReal a, McaReal b) { return a.v_ != b.v_; }
  friend bool operator<(McaReal a, McaReal b) { return a.v_ < b.v_; }
  friend bool operator>(McaReal a, McaReal b) { return a.v_ > b.v_; }
  friend bool operator<=(McaReal a, McaReal b) { return a.v_ <= b.v_; }
  friend bool operator>=(McaReal a, McaReal b) { return a.v_ >= b.v_; }

  // Elementwise functions: one rounding per (function, argument) within a run (file comment).
  friend McaReal sqrt(McaReal a) { return keyed(std::sqrt(a.v_), a.v_, 1, "sqrt"); }
  friend McaReal exp(McaReal a) { return keyed(std::exp(a.v_), a.v_, 2, "exp"); }
  friend McaReal log(McaReal a) { return keyed(std::log(a.v_), a.v_, 3, nullptr); }
  friend McaReal abs(McaReal a) { return McaReal(std::fabs(a.v_)); }
  friend McaReal fabs(McaReal a) { return McaReal(std::fabs(a.v_)); }
  friend bool isfinite(McaReal a) { return std::isfinite(a.v_); }

 private:
  static McaReal op(double x, const char* what) {
    McaContext& c = mca_context();
    if (c.trace_range) trace(c, x, c.op_max, what);
    return McaReal(mca_perturb(x, c.u_op, c.op_format));
  }
  static McaReal keyed(double x, double arg, std::uint64_t tag, const char* what) {
    McaContext& c = mca_context();
    if (c.trace_range) trace(c, x, c.op_max, what);
    return McaReal(mca_perturb(x, c.u_op, c.op_format, &arg, tag));
  }
 public:
  // Records x as the first value beyond `limit` (what == nullptr: not traced).
  static void trace(McaContext& c, double x, double limit, const char* what) {
    if (c.first_beyond.exceeded || !what || !(std::fabs(x) > limit)) return;
    if (const IntermediateName& n = current_intermediate(); n.output_of_the_layer) return;
    c.first_beyond = {true, current_intermediate().name, what, x, limit};
  }

 private:
  double v_ = 0.0;
};

// Scaling by powers of two (pow2.hpp) is exact in a kernel's format except below
// its smallest normal number, where ldexp rounds once: perturbed there only,
// as the absolute rounding of gradual underflow (mca_perturb).
template <>
struct binary_scaling<McaReal> {
  static constexpr bool enabled = true;
  static int exponent(const McaReal& x) { return native_binary_scaling<double>::exponent(x.value()); }
  static McaReal ldexp(const McaReal& x, int e) {
    const double r = std::ldexp(x.value(), e);
    McaContext& c = mca_context();
    if (c.trace_range) McaReal::trace(c, r, c.op_max, "ldexp");
    if (std::fabs(r) < mca_min_normal(c.op_format)) return McaReal(mca_perturb(r, c.u_op, c.op_format));
    return McaReal(r);
  }
};

template <>
struct scalar_traits<McaReal> {
  static std::string name() { return "mca"; }
  static McaReal from_double(double x) { return McaReal(x); }
  static double to_double(McaReal x) { return x.value(); }
};
template <>
struct precision_control<McaReal> {
  static unsigned set_bits(unsigned) { return 53; }
};

// The chunk and scan forms under Monte Carlo arithmetic: computing in McaReal,
// with narrow() perturbing at u_store where a kernel stores or feeds a 16-bit value.
struct McaPolicy {
  using acc = McaReal;
  static constexpr bool narrows = true;
  static McaReal narrow(const McaReal& x) {
    McaContext& c = mca_context();
    if (c.trace_range) McaReal::trace(c, x.value(), c.store_max, "store");
    return McaReal(mca_perturb(x.value(), c.u_store, c.store_format));
  }
  static std::string name() { return "mca"; }
};
template <>
struct policy_for<McaReal> {
  using type = McaPolicy;
};

}  // namespace ttr
