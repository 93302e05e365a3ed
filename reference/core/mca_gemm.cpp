// The Monte Carlo model's matrix products (mca.hpp, "The model's matrix products").
//
// One step of an entry's sum is McaReal's `acc += a * b`, i.e. two perturbed
// operations (mca.hpp): the product x = a·b, perturbed where it moves (nonzero,
// finite, not representable in the op format) by the hash of (run key, tag 6, a, b);
// then the sum s = acc + x, perturbed where both terms are nonzero and s is nonzero
// and finite (with a zero term s is the other term, exactly) by the hash of (run key,
// tag 4, acc, x).
// The kernels below compute exactly that, in the in-order products' order of the
// reduction index, so every entry is the same double; what they change is only the
// schedule: the context is read once per product, the commutative key orders its
// operands without a branch (the comparison of two operands' bits is a coin flip,
// and its mispredictions were most of the scalar loop's time), and several entries'
// chains run side by side — eight columns per AVX-512 vector, four rows at a time.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/core/mca.hpp"
#include "reference/core/mca_products.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// GCC 12's AVX-512 intrinsics start their results from _mm512_undefined_*, which
// -Wmaybe-uninitialized reports once they are inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define TTR_MCA_HAVE_AVX512 1
#define TTR_MCA_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))
#endif

namespace ttr {
namespace {

// A product's operands in place: A(i, p) = a[i·a_row + p·a_col], B(p, j) (or Bᵀ's,
// packed) at b[p·b_row + j − b_col0], entry (i, j) of C at c[i·c_row + j].
struct Operands {
  const double* a;
  long a_row, a_col;
  const double* b;
  long b_row;
  int b_col0;
  double* c;
  long c_row;
  int rows, depth;
};

// ---- scalar: McaReal's two operations with the context hoisted --------------------

template <McaFormat F>
struct ScalarStep {
  double u;
  std::uint64_t key;

  std::uint64_t hash(std::uint64_t tag, double a, double b) const { return mca_key_commutative(key, tag, a, b); }
  double operator()(double acc, double a, double b) const {
    double x = a * b;
    if (mca_moves(x, u, F)) x = mca_perturb_moving(x, u, F, hash(kMcaTagMul, a, b));
    const double s = acc + x;
    if (acc != 0.0 && x != 0.0 && mca_moves(s, u, F, true)) return mca_perturb_moving(s, u, F, hash(kMcaTagAdd, acc, x));
    return s;
  }
};

// Columns [j0, j0 + width) of every row, eight accumulators at a time.
template <McaFormat F>
void scalar_columns(const ScalarStep<F>& step, const Operands& o, int j0, int width) {
  constexpr int kBlock = 8;
  for (int i = 0; i < o.rows; ++i) {
    double acc[kBlock];
    double* c = o.c + i * o.c_row + j0;
    for (int j = 0; j < width; ++j) acc[j] = c[j];
    for (int p = 0; p < o.depth; ++p) {
      const double a = o.a[i * o.a_row + p * o.a_col];
      const double* b = o.b + p * o.b_row + (j0 - o.b_col0);
      for (int j = 0; j < width; ++j) acc[j] = step(acc[j], a, b[j]);
    }
    for (int j = 0; j < width; ++j) c[j] = acc[j];
  }
}

// ---- AVX-512: the same two operations on eight lanes ------------------------------

#ifdef TTR_MCA_HAVE_AVX512
struct VectorConstants {
  __m512d u, one, min_normal, two_m52;
  __m512i key_mul, key_add, tag_mul, tag_add, operand_a, operand_b, mix1, mix2;
};

TTR_MCA_AVX512 VectorConstants vector_constants(const McaContext& c, McaFormat f) {
  return {_mm512_set1_pd(c.u_op),
          _mm512_set1_pd(1.0),
          _mm512_set1_pd(mca_min_normal(f)),
          _mm512_set1_pd(0x1.0p-52),
          _mm512_set1_epi64(static_cast<long long>(c.key ^ (kMcaTagMul * kMcaTagMultiplier))),
          _mm512_set1_epi64(static_cast<long long>(c.key ^ (kMcaTagAdd * kMcaTagMultiplier))),
          _mm512_set1_epi64(static_cast<long long>(kMcaTagMul)),
          _mm512_set1_epi64(static_cast<long long>(kMcaTagAdd)),
          _mm512_set1_epi64(static_cast<long long>(kMcaFirstMultiplier)),
          _mm512_set1_epi64(static_cast<long long>(kMcaSecondMultiplier)),
          _mm512_set1_epi64(static_cast<long long>(kMcaMix1)),
          _mm512_set1_epi64(static_cast<long long>(kMcaMix2))};
}

// mca_representable, lane by lane (the conversion rounds to nearest as static_cast does).
template <McaFormat F>
TTR_MCA_AVX512 inline __mmask8 representable(__m512d x) {
  if constexpr (F == McaFormat::any) {
    return 0;
  } else {
    static_assert(F == McaFormat::fp32 || F == McaFormat::tf32);
    const __m256 f = _mm512_cvtpd_ps(x);
    __mmask8 m = _mm512_cmp_pd_mask(_mm512_cvtps_pd(f), x, _CMP_EQ_OQ);
    if constexpr (F == McaFormat::tf32)
      m &= _mm256_cmpeq_epi32_mask(_mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x1FFF)),
                                   _mm256_setzero_si256());
    return m;
  }
}

// x != 0 and finite (NaN: neither).
TTR_MCA_AVX512 inline __mmask8 finite_nonzero(__m512d x) {
  const __m512d ax = _mm512_abs_pd(x);
  return _mm512_cmp_pd_mask(ax, _mm512_set1_pd(std::numeric_limits<double>::infinity()), _CMP_LT_OQ) &
         _mm512_cmp_pd_mask(ax, _mm512_setzero_pd(), _CMP_GT_OQ);
}

// mca_perturb_moving on the lanes `moving` of x, keyed as mca_key_commutative(tag, a, b);
// key_tag is the run key xor tag·golden.
template <McaFormat F>
TTR_MCA_AVX512 inline __m512d perturb(__m512d x, __mmask8 moving, __m512d a, __m512d b, __m512i key_tag, __m512i tag,
                                      const VectorConstants& k) {
  const __m512i ba = _mm512_castpd_si512(a), bb = _mm512_castpd_si512(b);
  const __m512i lo = _mm512_min_epu64(ba, bb), hi = _mm512_max_epu64(ba, bb);
  __m512i z = _mm512_xor_si512(_mm512_xor_si512(key_tag, _mm512_mullo_epi64(lo, k.operand_a)),
                               _mm512_mullo_epi64(_mm512_add_epi64(hi, tag), k.operand_b));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), k.mix1);  // mca_mix
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), k.mix2);
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
  const __m512d xi = _mm512_sub_pd(_mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(z, 11)), k.two_m52), k.one);
  const __m512d uxi = _mm512_mul_pd(k.u, xi);
  __m512d r = _mm512_mul_pd(x, _mm512_add_pd(k.one, uxi));  // x·(1 + u·ξ)
  if constexpr (F != McaFormat::any) {
    const __mmask8 subnormal = _mm512_cmp_pd_mask(_mm512_abs_pd(x), k.min_normal, _CMP_LT_OQ) & moving;
    if (subnormal) r = _mm512_mask_blend_pd(subnormal, r, _mm512_add_pd(x, _mm512_mul_pd(uxi, k.min_normal)));
  }
  return _mm512_mask_blend_pd(moving, x, r);
}

template <McaFormat F>
TTR_MCA_AVX512 inline __m512d step(__m512d acc, __m512d a, __m512d b, const VectorConstants& k) {
  __m512d x = _mm512_mul_pd(a, b);
  if (const __mmask8 m = finite_nonzero(x) & static_cast<__mmask8>(~representable<F>(x)))
    x = perturb<F>(x, m, a, b, k.key_mul, k.tag_mul, k);
  const __m512d s = _mm512_add_pd(acc, x);
  const __m512d zero = _mm512_setzero_pd();
  const __mmask8 both_nonzero =
      _mm512_cmp_pd_mask(acc, zero, _CMP_NEQ_UQ) & _mm512_cmp_pd_mask(x, zero, _CMP_NEQ_UQ);
  if (const __mmask8 m = finite_nonzero(s) & both_nonzero)
    return perturb<F>(s, m, acc, x, k.key_add, k.tag_add, k);
  return s;
}

// Rows [i0, i0 + R) × the lanes of columns j0.. (`lanes`: those inside C).
template <McaFormat F, int R>
TTR_MCA_AVX512 inline void vector_tile(const VectorConstants& k, const Operands& o, int i0, int j0, __mmask8 lanes) {
  __m512d acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_maskz_loadu_pd(lanes, o.c + (i0 + r) * o.c_row + j0);
  for (int p = 0; p < o.depth; ++p) {
    const __m512d b = _mm512_maskz_loadu_pd(lanes, o.b + p * o.b_row + (j0 - o.b_col0));
    for (int r = 0; r < R; ++r) acc[r] = step<F>(acc[r], _mm512_set1_pd(o.a[(i0 + r) * o.a_row + p * o.a_col]), b, k);
  }
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_pd(o.c + (i0 + r) * o.c_row + j0, lanes, acc[r]);
}

template <McaFormat F>
TTR_MCA_AVX512 void vector_columns(const McaContext& c, const Operands& o, int j0, int width) {
  const VectorConstants k = vector_constants(c, F);
  const auto lanes = static_cast<__mmask8>((1u << width) - 1u);
  int i = 0;
  for (; i + 4 <= o.rows; i += 4) vector_tile<F, 4>(k, o, i, j0, lanes);
  for (; i < o.rows; ++i) vector_tile<F, 1>(k, o, i, j0, lanes);
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}
#else
bool cpu_has_avx512() { return false; }
#endif

thread_local int t_products = -1;  // McaProductsScope's choice on this thread; −1: the default
std::atomic<int> g_products{-1};    // set_default_mca_products; −1: the fastest the CPU runs

McaProducts chosen() {
  int p = t_products >= 0 ? t_products : g_products.load(std::memory_order_relaxed);
  if (p < 0) p = static_cast<int>(McaProducts::vector);
  return p == static_cast<int>(McaProducts::vector) && !cpu_has_avx512() ? McaProducts::scalar
                                                                          : static_cast<McaProducts>(p);
}

// C's columns in blocks of eight through the chosen kernel. `transpose_b`: B is n×k
// and its block's rows are packed as columns first.
template <McaFormat F>
void run(const McaContext& c, Operands o, int cols, const double* b_rows, bool transpose_b, McaProducts kernel) {
  thread_local std::vector<double> packed;
  const ScalarStep<F> scalar{c.u_op, c.key};
  for (int j0 = 0; j0 < cols; j0 += 8) {
    const int width = std::min(8, cols - j0);
    Operands block = o;
    if (transpose_b) {
      packed.assign(static_cast<std::size_t>(o.depth) * 8, 0.0);
      for (int j = 0; j < width; ++j)
        for (int p = 0; p < o.depth; ++p) packed[static_cast<std::size_t>(p) * 8 + j] = b_rows[(j0 + j) * static_cast<long>(o.depth) + p];
      block.b = packed.data();  // B(p, j0 + j) at packed[p·8 + j]
      block.b_row = 8;
      block.b_col0 = j0;
    }
#ifdef TTR_MCA_HAVE_AVX512
    if (kernel == McaProducts::vector) {
      vector_columns<F>(c, block, j0, width);
      continue;
    }
#endif
    (void)kernel;
    scalar_columns<F>(scalar, block, j0, width);
  }
}

const double* raw(const Matrix<McaReal>& m) { return reinterpret_cast<const double*>(m.a.data()); }
double* raw(Matrix<McaReal>& m) { return reinterpret_cast<double*>(m.a.data()); }
static_assert(sizeof(McaReal) == sizeof(double));

// The fast kernels' domain: no range trace (it records the first operation beyond the
// format with McaReal's own bookkeeping) and no absorption (16-bit op formats).
// Returns false where the in-order products must run.
bool fast(const Operands& o, int cols, const double* b_rows, bool transpose_b) {
  const McaContext& c = mca_context();
  const McaProducts kernel = chosen();
  if (kernel == McaProducts::in_order || c.trace_range) return false;
  switch (c.u_op != 0.0 ? c.op_format : McaFormat::any) {
    case McaFormat::any: run<McaFormat::any>(c, o, cols, b_rows, transpose_b, kernel); return true;
    case McaFormat::fp32: run<McaFormat::fp32>(c, o, cols, b_rows, transpose_b, kernel); return true;
    case McaFormat::tf32: run<McaFormat::tf32>(c, o, cols, b_rows, transpose_b, kernel); return true;
    default: return false;
  }
}

}  // namespace

template <>
void gemm_nn<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate) {
  if (!accumulate) C.assign(A.rows, B.cols, McaReal(0.0));
  const Operands o{raw(A), A.cols, 1, raw(B), B.cols, 0, raw(C), C.cols, A.rows, A.cols};
  if (!fast(o, B.cols, nullptr, false)) gemm_nn_in_order(A, B, C, true);
}

template <>
void gemm_nt<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate) {
  if (!accumulate) C.assign(A.rows, B.rows, McaReal(0.0));
  const Operands o{raw(A), A.cols, 1, nullptr, 0, 0, raw(C), C.cols, A.rows, A.cols};
  if (!fast(o, B.rows, raw(B), true)) gemm_nt_in_order(A, B, C, true);
}

template <>
void gemm_tn<McaReal>(const Matrix<McaReal>& A, const Matrix<McaReal>& B, Matrix<McaReal>& C, bool accumulate) {
  if (!accumulate) C.assign(A.cols, B.cols, McaReal(0.0));
  const Operands o{raw(A), 1, A.cols, raw(B), B.cols, 0, raw(C), C.cols, A.cols, A.rows};
  if (!fast(o, B.cols, nullptr, false)) gemm_tn_in_order(A, B, C, true);
}

McaProducts mca_products() { return chosen(); }
bool mca_products_vector_available() { return cpu_has_avx512(); }

const char* mca_products_name(McaProducts p) {
  switch (p) {
    case McaProducts::in_order: return "in_order";
    case McaProducts::scalar: return "scalar";
    case McaProducts::vector: return "vector";
  }
  return "?";
}

std::optional<McaProducts> parse_mca_products(std::string_view name) {
  for (McaProducts p : {McaProducts::in_order, McaProducts::scalar, McaProducts::vector})
    if (name == mca_products_name(p)) return p;
  return std::nullopt;
}

void set_default_mca_products(McaProducts p) { g_products.store(static_cast<int>(p), std::memory_order_relaxed); }

McaProductsScope::McaProductsScope(McaProducts p) : saved_(t_products) { t_products = static_cast<int>(p); }
McaProductsScope::~McaProductsScope() { t_products = saved_; }

}  // namespace ttr
