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
// errors a kernel does not make. Sums are the exception: whether a partial sum is
// representable depends on the order of the summation, which is the kernel's
// (Eigen's, a tensor core's, tl.cumsum's), not this run's. A sum of nonzero
// terms is therefore perturbed even where it happens to be exact in the order the
// model adds (a sum with a zero term is the other term in every order, and is left
// alone): the fp32 chunk backward of simple_gla summed do·v (16 products of
// bf16 numbers, cancelling 98-fold to −0.0698) exactly in the model's order and
// with one rounding of 28.7u relative in Eigen's, and was judged at 13.2 on dk
// (docs/error-model.md, "Sums: the order is the kernel's").
//
// One rounding per (operation, operands) within a run. A kernel's rounding is a
// function of the exact result, so a kernel that performs the same operation on
// the same operands twice gets the same rounded value twice; the model's
// perturbation of every operation result is therefore a hash of (the run's key,
// the operation, the operands' bits), and of every narrowed value a hash of
// (the run's key, the value's bits), rather than the next draw of a stream. At
// distinct operands the hashes are independent draws, as before; where operands
// repeat, the model's rounding errors add up coherently where a kernel's do:
//
//  * elementwise functions at a repeated argument: with a gate constant over the
//    sequence (g_t = −0.01) a bf16 kernel rounds e^{g} the same way at every
//    token, and the error of the state's geometric memory (~1/(1 − e^{g}) tokens)
//    grows linearly in that memory; independent draws average it away like a
//    random walk, and a correct bf16 sequential simple_gla backward was judged at
//    ratio 10.6 on dg (sweep-decay at δ = 0.01; docs/error-model.md, "Elementwise
//    functions"). This was the first case, keyed alone at first;
//  * arithmetic on repeated operands: KLA-K's whole-sequence scan with p̄ = 0 has a
//    gate f_t = ā/ā² that is the same quotient at every token, and its Blelloch
//    tree composes identical leaves into identical nodes (f², f⁴, … formed once per
//    node, each the same product of the same operands), so the kernel's error of
//    the cumulative gate f^t is a sum of t coherent roundings, ~t·u, where the
//    independent draws gave ~√t·u: a correct fp32 `scan` was judged at ratio 11.4
//    at T ≈ 250, ā = 0.75–0.8 (study kla-precision-growth; docs/error-model.md,
//    "Repeated operands").
//
// Absorption in 16-bit arithmetic. Rounding to nearest loses a term of a sum that is
// below half an ulp of the other term: the result is the larger term, in every run
// — a bias, not a random error, and a long sum of same-signed terms in bf16 comes
// out short by the small terms' total. Perturbing a + b by U(−u, u) around the exact
// sum is unbiased and misses it. Where the sum's terms are amplified afterwards the
// difference is the verdict: GKA's Chebyshev solve takes L = ‖H‖_F + λ as the upper
// end of the spectrum, which is tight when H is nearly rank one (strong decay); the
// bf16 sequential form's ‖H‖_F (256 squares summed in bf16) comes out 0.35–3.0 %
// short on random keys, every token's top eigenvalue falls outside [μ, L] and the
// iteration diverges, while the unbiased model's ‖H‖_F lands on either side: a correct
// bf16 sequential backward was judged at ratios up to 37.9 (study sweep-decay, seeds
// 0–3; docs/error-model.md, "Absorption"). So where the model's operations are 16-bit (the sequential forms in
// bf16/fp16: op_format bf16 or fp16) a term below half an ulp of the other is dropped,
// as rounding to nearest drops it, and the result is perturbed as any sum is (around
// the larger term instead of the exact sum: the model keeps its large-side spread and
// gains the bias; dropping the perturbation too took the spread of every long bf16 sum
// with small increments, and ratios of correct kernels rose, to 7.38 at one point of
// the same study). Not in fp32: a term must be below 2^-25 of the other there, and no
// sum the forms make is long enough for that to show next to the rest.
//
// The run's key is seeded explicitly (mca_seed): the same seed gives bit-identical
// runs, whatever the order of the operations. Operations in double add a relative
// 2^-53 of their own, negligible against the u_op of fp32 (2^-24) and bf16 (2^-8)
// that the model is used with.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "reference/core/intermediate.hpp"
#include "reference/core/matrix.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/pow2.hpp"
#include "reference/core/scalar.hpp"

namespace ttr {

// The format whose rounding a perturbation models (for the exactness test).
// tf32: the tensor cores' float32 mode (Triton's default for an fp32 tl.dot,
// torch's allow_tf32): fp32's 8-bit exponent with 10 explicit significand bits,
// a matrix-product operand of a "tf32" foreign kernel (gate/policies.hpp), perturbed by
// one TF32 ulp, 2^-10 (truncated or rounded).
enum class McaFormat { any, fp32, bf16, fp16, tf32 };

inline bool mca_representable(double x, McaFormat f) {
  switch (f) {
    case McaFormat::fp32: return static_cast<double>(static_cast<float>(x)) == x;
    case McaFormat::bf16: return BF16Format::round(x) == x;
    case McaFormat::fp16: return FP16Format::round(x) == x;
    case McaFormat::tf32: {  // an fp32 value whose 13 low significand bits are zero
      const float f = static_cast<float>(x);
      if (static_cast<double>(f) != x) return false;
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      return (b & 0x1FFFu) == 0;
    }
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
  // Range trace: when on, every operation result is compared with op_max and
  // every narrowed value with store_max (the formats' largest finite values),
  // and the first one beyond is kept. Off: one predictable branch per operation.
  bool trace_range = false;
  double op_max = 0.0, store_max = 0.0;
  McaRangeEvent first_beyond;
  std::uint64_t key = 0;  // of the run: every perturbation is a hash of it, the operation and the operands
};

inline McaContext& mca_context() {
  thread_local McaContext c;
  return c;
}

// splitmix64's finaliser: a bijection of 64-bit words whose outputs at nearby
// inputs are unrelated.
inline constexpr std::uint64_t kMcaMix1 = 0xBF58476D1CE4E5B9ull, kMcaMix2 = 0x94D049BB133111EBull;
inline std::uint64_t mca_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * kMcaMix1;
  z = (z ^ (z >> 27)) * kMcaMix2;
  return z ^ (z >> 31);
}

inline std::uint64_t mca_bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Seeds the thread's run key (splitmix64 of the seed, so nearby seeds give
// unrelated runs) and sets the two unit roundoffs.
inline void mca_seed(std::uint64_t seed, double u_op, McaFormat op_format, double u_store, McaFormat store_format) {
  McaContext& c = mca_context();
  c.u_op = u_op;
  c.u_store = u_store;
  c.op_format = op_format;
  c.store_format = store_format;
  c.key = mca_mix(seed + 0x9E3779B97F4A7C15ull) ^ (mca_mix(seed + 2 * 0x9E3779B97F4A7C15ull) * 0xD6E8FEB86659FD93ull);
}

// The key of one rounding: (the run, the operation's tag, its operands' bits).
// Commutative operations (+, *) pass their operands in either order: a kernel's
// a + b and b + a round alike. Each operand's bits go through its own odd
// multiplier (a bijection, so pairs that differ in one operand never share a
// word) and one splitmix64 finaliser spreads the word: a single finaliser,
// because the key of an accumulation a + b sits on the accumulator's dependency
// chain, and three chained finalisers made every perturbed sum ~25 % slower.
inline constexpr std::uint64_t kMcaTagMultiplier = 0x9E3779B97F4A7C15ull, kMcaFirstMultiplier = 0xD6E8FEB86659FD93ull,
                               kMcaSecondMultiplier = 0xBF58476D1CE4E5B9ull;
// The tags of + and × (the other operations' are literals at their operators): named
// because the model's matrix products (mca_gemm.cpp) key their roundings alike.
inline constexpr std::uint64_t kMcaTagAdd = 4, kMcaTagMul = 6;
inline std::uint64_t mca_key_of_bits(std::uint64_t run_key, std::uint64_t tag, std::uint64_t a, std::uint64_t b) {
  return mca_mix(run_key ^ (tag * kMcaTagMultiplier) ^ (a * kMcaFirstMultiplier) ^ ((b + tag) * kMcaSecondMultiplier));
}
inline std::uint64_t mca_key(const McaContext& c, std::uint64_t tag, double a, double b = 0.0) {
  return mca_key_of_bits(c.key, tag, mca_bits(a), mca_bits(b));
}
// The operands in the order of their bits, chosen by a select: which is smaller is a
// coin flip, and a branch on it, mispredicted half the time, was most of a perturbed
// product's time in the model's matrix products.
inline std::uint64_t mca_key_commutative(std::uint64_t run_key, std::uint64_t tag, double a, double b) {
  const std::uint64_t x = mca_bits(a), y = mca_bits(b);
  return mca_key_of_bits(run_key, tag, x < y ? x : y, x < y ? y : x);
}
inline std::uint64_t mca_key_commutative(const McaContext& c, std::uint64_t tag, double a, double b) {
  return mca_key_commutative(c.key, tag, a, b);
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
    case McaFormat::bf16:
    case McaFormat::tf32: return 0x1p-126;
    case McaFormat::fp16: return 0x1p-14;
    default: return 0.0;
  }
}

// Whether rounding to nearest in format f moves x: zeros, non-finite values and
// values representable in the format stay — unless `any_order` (a sum of nonzero
// terms: whether it is representable depends on the kernel's summation order,
// file comment).
inline bool mca_moves(double x, double u, McaFormat f, bool any_order = false) {
  return u != 0.0 && x != 0.0 && std::isfinite(x) && (any_order || !mca_representable(x, f));
}

// x·(1 + u·ξ), ξ uniform in [−1, 1) from the rounding's key (mca_key), or
// x + u·ξ·min_normal in the format's subnormal range (above). Callers test
// mca_moves first, so that the key is hashed only for values that do move.
inline double mca_perturb_moving(double x, double u, McaFormat f, std::uint64_t key) {
  const double xi = static_cast<double>(key >> 11) * 0x1.0p-52 - 1.0;  // [−1, 1)
  const double m = mca_min_normal(f);
  if (std::fabs(x) < m) return x + u * xi * m;
  return x * (1.0 + u * xi);
}

// x·(1 − u·η), η uniform in [0, 1) from the key: toward zero by up to u, as truncation
// errs (x − sign(x)·u·η·min_normal in the subnormal range). TF32 reads (reference/core/
// tf32_policy.hpp): a tensor core handed fp32 bits ignores the low 13, so with u = 2^-10,
// one TF32 ulp, the model's runs carry the bias of truncated like-signed terms (sums of
// squares: GKA's ‖H_c‖_F) as well as rounding's spread. A symmetric perturbation of the
// same size modelled the spread alone: a truncating tf32 arithmetic failed 33 of 1800
// forward gate checks under it (GKA's fro and λ, worst 13; 2026-12-07).
inline double mca_perturb_toward_zero(double x, double u, McaFormat f, std::uint64_t key) {
  const double eta = static_cast<double>(key >> 11) * 0x1.0p-53;  // [0, 1)
  const double m = mca_min_normal(f);
  if (std::fabs(x) < m) return x - std::copysign(u * eta * m, x);
  return x * (1.0 - u * eta);
}

// Whether rounding to nearest in the 16-bit format f loses `small` against `big`
// (file comment, "Absorption"): |small| below half an ulp of big, big in the normal
// range. Where the result may fall into the binade below (the magnitude decreases
// from a power of two), the threshold is half that binade's ulp.
inline bool mca_absorbs(double big, double small, McaFormat f) {
  int p;  // significand bits, the implicit one included
  switch (f) {
    case McaFormat::bf16: p = 8; break;
    case McaFormat::fp16: p = 11; break;
    default: return false;
  }
  const double a = std::fabs(big), b = std::fabs(small);
  if (b == 0.0 || !(b < a) || !std::isfinite(a) || a < mca_min_normal(f)) return false;
  int e;
  const double m = std::frexp(a, &e);  // a = m·2^e, m in [1/2, 1): ulp 2^(e−p)
  const bool shrinks = (big < 0.0) != (small < 0.0);
  return b < std::ldexp(1.0, e - p - (shrinks && m == 0.5 ? 2 : 1));
}

class McaReal {
 public:
  McaReal() = default;
  explicit McaReal(double x) : v_(x) {}
  double value() const { return v_; }

  // A sum rounds in some order of its terms (file comment): x ± 0 is exact in every
  // order, any other sum is perturbed even where this order makes it representable.
  // In 16-bit arithmetic a term below half an ulp of the other is lost (file
  // comment, "Absorption"): the sum is the larger term, perturbed as a sum is.
  friend McaReal operator+(McaReal a, McaReal b) {
    McaContext& c = mca_context();
    return sum<kCommutative>(c, absorbed_sum(c, a.v_, b.v_), "+", kMcaTagAdd, a.v_, b.v_);
  }
  friend McaReal operator-(McaReal a, McaReal b) {
    McaContext& c = mca_context();
    return sum<kOrdered>(c, absorbed_sum(c, a.v_, -b.v_), "-", 5, a.v_, b.v_);
  }
  friend McaReal operator*(McaReal a, McaReal b) { return op<kCommutative>(a.v_ * b.v_, "*", kMcaTagMul, a.v_, b.v_); }
  // x/0 is a division by zero, not a value beyond the range: never traced.
  friend McaReal operator/(McaReal a, McaReal b) {
    return op<kOrdered>(a.v_ / b.v_, b.v_ == 0.0 ? nullptr : "/", 7, a.v_, b.v_);
  }
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
  friend McaReal sqrt(McaReal a) { return op<kOrdered>(std::sqrt(a.v_), "sqrt", 1, a.v_); }
  friend McaReal exp(McaReal a) { return op<kOrdered>(std::exp(a.v_), "exp", 2, a.v_); }
  friend McaReal log(McaReal a) { return op<kOrdered>(std::log(a.v_), nullptr, 3, a.v_); }
  friend McaReal abs(McaReal a) { return McaReal(std::fabs(a.v_)); }
  friend McaReal fabs(McaReal a) { return McaReal(std::fabs(a.v_)); }
  friend bool isfinite(McaReal a) { return std::isfinite(a.v_); }

 private:
  static constexpr bool kCommutative = true, kOrdered = false;
  // x + y, or the larger term where the run's 16-bit op format absorbs the smaller
  // (u_op = 0: no rounding modelled, nothing absorbed).
  static double absorbed_sum(const McaContext& c, double x, double y) {
    const McaFormat f = c.u_op != 0.0 ? c.op_format : McaFormat::any;
    if (mca_absorbs(x, y, f)) return x;
    if (mca_absorbs(y, x, f)) return y;
    return x + y;
  }
  // x = a ± b. With a zero term x is the other term, which is already a value of
  // the format (an input as stored, or an operation's result, perturbed as its
  // rounding): a kernel adds 0 exactly, so nothing is perturbed. (Testing whether
  // x is representable instead re-rounded every perturbed value that met a zero —
  // the first term of every dot product, each zero product along it.)
  template <bool commutative>
  static McaReal sum(McaContext& c, double x, const char* what, std::uint64_t tag, double a, double b) {
    if (a == 0.0 || b == 0.0) {
      if (c.trace_range) trace(c, x, c.op_max, what);
      return McaReal(x);
    }
    return op<commutative>(c, x, what, tag, a, b, true);
  }
  // x, the result of operation `tag` on (a, b), rounded at u_op; the key is hashed
  // only where the rounding moves x (most products of bf16 inputs do not).
  template <bool commutative>
  static McaReal op(double x, const char* what, std::uint64_t tag, double a, double b = 0.0,
                    bool sum_of_nonzero_terms = false) {
    return op<commutative>(mca_context(), x, what, tag, a, b, sum_of_nonzero_terms);
  }
  template <bool commutative>
  static McaReal op(McaContext& c, double x, const char* what, std::uint64_t tag, double a, double b,
                    bool sum_of_nonzero_terms) {
    if (c.trace_range) trace(c, x, c.op_max, what);
    if (!mca_moves(x, c.u_op, c.op_format, sum_of_nonzero_terms)) return McaReal(x);
    const std::uint64_t key = commutative ? mca_key_commutative(c, tag, a, b) : mca_key(c, tag, a, b);
    return McaReal(mca_perturb_moving(x, c.u_op, c.op_format, key));
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

// std::frexp's exponent and std::ldexp of a double, read and written in its exponent
// field where the value and the result are normal doubles (the same exact results);
// the library calls for zeros, subnormals, non-finite values and results beyond the
// normal range. KLA-K's scaled forms rescale after every operation, and under the Monte
// Carlo model the library calls were ~30 % of their time (perf, the gate's
// kla_kalman backward on `realistic`).
inline int mca_exponent(double x) {
  const int field = static_cast<int>((mca_bits(x) >> 52) & 0x7FF);
  return field != 0 && field != 0x7FF ? field - 1022 : native_binary_scaling<double>::exponent(x);
}
inline double mca_ldexp(double x, int e) {
  const std::uint64_t b = mca_bits(x);
  const int field = static_cast<int>((b >> 52) & 0x7FF);
  if (field == 0 || field == 0x7FF || e <= -field || e >= 0x7FF - field) return std::ldexp(x, e);
  const std::uint64_t r = b + (static_cast<std::uint64_t>(static_cast<std::int64_t>(e)) << 52);
  double y;
  std::memcpy(&y, &r, sizeof y);
  return y;
}

// Scaling by powers of two (pow2.hpp) is exact in a kernel's format except below
// its smallest normal number, where ldexp rounds once: perturbed there only,
// as the absolute rounding of gradual underflow (mca_perturb_moving).
template <>
struct binary_scaling<McaReal> {
  static constexpr bool enabled = true;
  static int exponent(const McaReal& x) { return mca_exponent(x.value()); }
  static McaReal ldexp(const McaReal& x, int e) {
    const double r = mca_ldexp(x.value(), e);
    McaContext& c = mca_context();
    if (c.trace_range) McaReal::trace(c, r, c.op_max, "ldexp");
    if (std::fabs(r) < mca_min_normal(c.op_format) && mca_moves(r, c.u_op, c.op_format))
      return McaReal(mca_perturb_moving(r, c.u_op, c.op_format, mca_key(c, 8, x.value(), static_cast<double>(e))));
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
    if (!mca_moves(x.value(), c.u_store, c.store_format)) return x;
    const std::uint64_t key = mca_key(c, 9, x.value());
    if (c.store_format == McaFormat::tf32)  // a TF32 read: truncated or rounded (mca_perturb_toward_zero)
      return McaReal(mca_perturb_toward_zero(x.value(), c.u_store, c.store_format, key));
    return McaReal(mca_perturb_moving(x.value(), c.u_store, c.store_format, key));
  }
  static std::string name() { return "mca"; }
};
template <>
struct policy_for<McaReal> {
  using type = McaPolicy;
};
// A TF32 operand (policy.hpp, tf32_operand): an fp32 value a kernel hands to a tensor-
// core product without storing it, e.g. the sub-chunk operands of FLA's
// chunk_kda_bwd_intra (delta_chunk_backward.hpp). Perturbed where the run's
// products read TF32: the bf16/fp16 models (a 16-bit kernel's fp32 operands) and the
// foreign tf32 policy (store format tf32: an fp32 kernel's every tl.dot). Unchanged
// under a native fp32 model, whose products are fp32's. The tf32 policy used to leave
// these operands exact, as if only the values it narrows met a product: FLA's fp32
// chunk_kda backward left a TF32-sized residue at the row where the exact dg is 0
// and was judged at 718 on dg (docs/validating-fla.md, "Failures").
// Keyed by the value, like narrow(): an operand read by two products rounds alike.
// Perturbed toward zero by up to one TF32 ulp, 2^-10 (mca_perturb_toward_zero): a tensor
// core handed fp32 bits ignores the low 13 (truncation: Triton's tl.dot, reference/core/
// tf32_policy.hpp), and truncated operands of like-signed products err alike; half an ulp
// either way failed a truncating tf32 arithmetic on 2 of 600 gate checks (worst 9.34,
// tests/gate/tf32_truncation_slow_test.cpp, 2026-12-07). Rounded operands are inside it.
template <>
struct tf32_operand<McaPolicy> {
  static McaReal round(const McaReal& x) {
    const McaContext& c = mca_context();
    if (c.store_format != McaFormat::bf16 && c.store_format != McaFormat::fp16 && c.store_format != McaFormat::tf32)
      return x;
    constexpr double u = 0x1p-10;
    if (!mca_moves(x.value(), u, McaFormat::tf32)) return x;
    return McaReal(mca_perturb_toward_zero(x.value(), u, McaFormat::tf32, mca_key(c, 11, x.value())));
  }
};

// The model's matrix products (mca_gemm.cpp). A chunk form's time under the model
// is almost all in gemm_nn/nt/tn (75 % for the GDN chunk forward, perf), and the
// operators above leave a product one long dependency chain of data-dependent
// branches. These specialisations compute every entry as matrix.hpp's in-order
// products do — the same sum order, each product and each partial sum perturbed by
// the same hash of the same operands — so their results are the in-order products'
// bit for bit (NaN payloads aside), with the run's context read once and, where the
// CPU has AVX-512 (F, DQ, VL), eight output columns at a time. Range tracing and the
// 16-bit op formats (absorption) take the in-order products themselves. Which kernel
// runs: mca_products.hpp.
template <>
void gemm_nn<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate);
template <>
void gemm_nt<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate);
template <>
void gemm_tn<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate);

}  // namespace ttr
