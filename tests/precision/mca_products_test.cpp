// The Monte Carlo model's matrix products (reference/core/mca_gemm.cpp) against
// their definition: every entry is `acc += a * b` through McaReal's operators, left
// to right over the reduction index. The fast kernels (the hoisted scalar loop and
// the AVX-512 one) must give the same doubles, whatever the operands:
//
//  * products that are representable in the op format (not perturbed), products
//    that are not, zeros of both signs, products and sums in the subnormal range of
//    fp32 (perturbed absolutely), products that overflow, ±inf and NaN operands;
//  * shapes that leave a partial block of eight columns and of four rows, an empty
//    reduction, C accumulated onto or overwritten;
//  * every op format the kernels take (none with u = 0, fp32, tf32) and the ones
//    they hand to the in-order loops (bf16, fp16: absorption; a range trace).
//
// Then a whole model: the error model's per-row RMS of chunk forms forward and
// backward is the same with the in-order products as with the fast ones, and so is
// `ttrcheck check`'s report whichever kernel TTR_MCA_PRODUCTS names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/mca.hpp"
#include "reference/core/mca_products.hpp"
#include "tests/support/bytes.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

// The definition, written out: C(i, j) += Σ_p A(i, p)·B(p, j), left to right.
Matrix<McaReal> defining_product(const Matrix<McaReal>& A, const Matrix<McaReal>& B, const Matrix<McaReal>& C0) {
  Matrix<McaReal> C = C0;
  for (int i = 0; i < A.rows; ++i)
    for (int j = 0; j < B.cols; ++j) {
      McaReal acc = C(i, j);
      for (int p = 0; p < A.cols; ++p) acc += A(i, p) * B(p, j);
      C(i, j) = acc;
    }
  return C;
}

Matrix<McaReal> transposed(const Matrix<McaReal>& M) {
  Matrix<McaReal> T(M.cols, M.rows, McaReal(0.0));
  for (int i = 0; i < M.rows; ++i)
    for (int j = 0; j < M.cols; ++j) T(j, i) = M(i, j);
  return T;
}

// Operands of every kind the kernels branch on, drawn at random.
double draw(std::mt19937_64& g) {
  std::normal_distribution<double> n;
  std::uniform_int_distribution<int> kind(0, 99);
  const int k = kind(g);
  if (k < 30) return BF16Format::round(n(g));                  // products of two: exact in fp32
  if (k < 55) return static_cast<float>(n(g));                 // fp32 values
  if (k < 70) return n(g);                                     // doubles
  if (k < 76) return k % 2 ? 0.0 : -0.0;
  if (k < 84) return std::ldexp(BF16Format::round(n(g)), -70);  // products below 2^-126
  if (k < 88) return std::ldexp(static_cast<float>(n(g)), 70);  // products near/over fp32's range
  if (k < 92) return std::ldexp(n(g), 600);                     // products overflowing double
  if (k < 94) return k % 2 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  if (k < 95) return std::numeric_limits<double>::quiet_NaN();
  return 1.0;  // repeated operands: repeated hashes
}

Matrix<McaReal> random_matrix(int rows, int cols, std::mt19937_64& g) {
  Matrix<McaReal> M(rows, cols, McaReal(0.0));
  for (McaReal& x : M.a) x = McaReal(draw(g));
  return M;
}

// Equal doubles bit for bit; two NaNs are equal (a NaN's payload depends on which
// operand the hardware propagates, not on the model).
::testing::AssertionResult same(const Matrix<McaReal>& want, const Matrix<McaReal>& got) {
  if (want.rows != got.rows || want.cols != got.cols)
    return ::testing::AssertionFailure() << "shape " << got.rows << "x" << got.cols << ", want " << want.rows << "x"
                                         << want.cols;
  for (int i = 0; i < want.rows; ++i)
    for (int j = 0; j < want.cols; ++j) {
      const double w = want(i, j).value(), x = got(i, j).value();
      if (std::isnan(w) && std::isnan(x)) continue;
      if (mca_bits(w) != mca_bits(x)) {
        char text[160];
        std::snprintf(text, sizeof text, "entry (%d, %d): %.17g (bits %016llx), want %.17g (bits %016llx)", i, j, x,
                      static_cast<unsigned long long>(mca_bits(x)), w, static_cast<unsigned long long>(mca_bits(w)));
        return ::testing::AssertionFailure() << text;
      }
    }
  return ::testing::AssertionSuccess();
}

struct Format {
  const char* name;
  double u_op;
  McaFormat op;
};
const Format kFormats[] = {{"u=0", 0.0, McaFormat::fp32},
                           {"any", 0x1p-20, McaFormat::any},
                           {"fp32", 0x1p-24, McaFormat::fp32},
                           {"tf32", 0x1p-11, McaFormat::tf32},
                           {"bf16 (absorbs: in-order)", 0x1p-8, McaFormat::bf16},
                           {"fp16 (absorbs: in-order)", 0x1p-11, McaFormat::fp16}};

std::vector<McaProducts> kernels() {
  std::vector<McaProducts> k{McaProducts::in_order, McaProducts::scalar};
  if (mca_products_vector_available()) k.push_back(McaProducts::vector);
  return k;
}

struct Shape {
  int m, k, n;
};
const Shape kShapes[] = {{1, 1, 1}, {5, 3, 7}, {4, 9, 8}, {13, 17, 9}, {6, 0, 11}, {33, 64, 20}};

TEST(McaProducts, EveryKernelIsTheDefinitionBitForBit) {
  std::mt19937_64 g(20261204);
  int compared = 0;
  for (const Format& f : kFormats)
    for (const Shape& s : kShapes)
      for (bool accumulate : {false, true})
        for (std::uint64_t seed : {1u, 2u}) {
          const Matrix<McaReal> A = random_matrix(s.m, s.k, g), B = random_matrix(s.k, s.n, g),
                                C0 = random_matrix(s.m, s.n, g);
          mca_seed(seed, f.u_op, f.op, 0x1p-8, McaFormat::bf16);
          const Matrix<McaReal> want =
              defining_product(A, B, accumulate ? C0 : Matrix<McaReal>(s.m, s.n, McaReal(0.0)));
          const Matrix<McaReal> At = transposed(A), Bt = transposed(B);
          for (McaProducts k : kernels()) {
            McaProductsScope scope(k);
            ASSERT_EQ(mca_products(), k);
            const std::string where = std::string(f.name) + " kernel " + std::to_string(static_cast<int>(k)) + " " +
                                      std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                                      (accumulate ? " C +=" : " C =");
            Matrix<McaReal> C = C0;
            gemm_nn(A, B, C, accumulate);
            EXPECT_TRUE(same(want, C)) << "gemm_nn " << where;
            C = C0;
            gemm_nt(A, Bt, C, accumulate);
            EXPECT_TRUE(same(want, C)) << "gemm_nt " << where;
            C = C0;
            gemm_tn(At, B, C, accumulate);
            EXPECT_TRUE(same(want, C)) << "gemm_tn " << where;
            compared += 3;
          }
        }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
  RecordProperty("vector_kernel", mca_products_vector_available() ? "yes" : "no (AVX-512 absent)");
  std::printf("%d products compared; AVX-512 kernel %s\n", compared,
              mca_products_vector_available() ? "compared" : "absent on this CPU");
}

// The perturbations actually happen in the fast kernels (a kernel that skipped them
// would still equal a definition run with u = 0, not this one).
TEST(McaProducts, FastKernelsPerturbAsTheModelDoes) {
  Matrix<McaReal> A(1, 3, McaReal(1.0 / 3)), B(3, 1, McaReal(1.0 / 7));
  mca_seed(3, 0x1p-24, McaFormat::fp32, 0.0, McaFormat::any);
  for (McaProducts k : kernels()) {
    McaProductsScope scope(k);
    Matrix<McaReal> C;
    gemm_nn(A, B, C);
    const double plain = (1.0 / 3) * (1.0 / 7) * 3;
    EXPECT_NE(C(0, 0).value(), plain) << static_cast<int>(k);
    EXPECT_LE(std::fabs(C(0, 0).value() / plain - 1.0), 4 * 0x1p-24) << static_cast<int>(k);
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// Zero terms add exactly in the fast kernels too: C = [a 0 0]·[b c d]ᵀ is the model's
// product a·b (keyed by its operands, so McaReal computes the same draw), neither
// re-rounded as 0 + a·b nor as a·b + 0.
TEST(McaProducts, ZeroTermsAddExactly) {
  const double a = 1.0 / 3, b = 1.0 / 7;
  Matrix<McaReal> A(1, 3, McaReal(0.0)), B(3, 1, McaReal(1.0 / 11));
  A(0, 0) = McaReal(a), B(0, 0) = McaReal(b);
  mca_seed(6, 0x1p-24, McaFormat::fp32, 0.0, McaFormat::any);
  const double ab = (McaReal(a) * McaReal(b)).value();
  ASSERT_NE(ab, a * b);  // the product itself is perturbed
  for (McaProducts k : kernels()) {
    McaProductsScope scope(k);
    Matrix<McaReal> C;
    gemm_nn(A, B, C);
    EXPECT_EQ(C(0, 0).value(), ab) << static_cast<int>(k);
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// A range trace is McaReal's bookkeeping: with it on, the products keep recording the
// first value beyond the format.
TEST(McaProducts, RangeTraceStillRecordsTheFirstValueBeyond) {
  Matrix<McaReal> A(2, 2, McaReal(0x1p100)), B(2, 2, McaReal(0x1p100));
  for (McaProducts k : kernels()) {
    McaProductsScope scope(k);
    mca_seed(4, 0x1p-24, McaFormat::fp32, 0.0, McaFormat::any);
    McaContext& c = mca_context();
    c.trace_range = true;
    c.op_max = std::numeric_limits<float>::max();
    c.first_beyond = {};
    Matrix<McaReal> C;
    gemm_nt(A, B, C);
    EXPECT_TRUE(c.first_beyond.exceeded) << static_cast<int>(k);
    EXPECT_STREQ(c.first_beyond.operation, "*") << static_cast<int>(k);
    c.trace_range = false;
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// Whole models: the per-row RMS the judge compares against is the same with the
// in-order products as with the default (fastest) kernel, for chunk forms whose
// time is in these products, forward and backward, bf16 and fp32.
TEST(McaProducts, ChunkFormModelsAreUnchanged) {
  struct Run {
    const char* layer;
    Direction dir;
    Tier dtype;
  };
  const Run runs[] = {{"gated_delta_rule", Direction::forward, Tier::bf16},
                      {"gated_delta_rule", Direction::backward, Tier::fp32},
                      {"kda", Direction::backward, Tier::bf16},
                      {"gla", Direction::forward, Tier::fp32}};
  SliceThreadsScope one_thread(1);  // the kernel choice is per thread
  for (const Run& r : runs) {
    const LayerEntry& e = find_layer(r.layer);
    const VectorCase vc{"mca_products", "", {{"B", 1}, {"T", 40}, {"H", 2}, {"K", 12}, {"V", 10}}, Regime{}, {}};
    const TensorMap<double> in =
        r.dir == Direction::backward ? generate_backward_inputs(e.spec, vc, 7) : generate_inputs(e.spec, vc, 7);
    const Config cfg = Config::make(e.spec, {});
    const TensorMap<double> oracle = run_layer(e, Form::sequential, Arith{Tier::fp64, 0}, in, cfg, 64, r.dir).values;
    ModelSpec ms;
    ms.direction = r.dir;
    ms.dtype = r.dtype;
    ms.chunk_size = 16;
    ms.samples = 3;
    ErrorModel in_order, fast;
    {
      McaProductsScope scope(McaProducts::in_order);
      in_order = model_errors(e, in, cfg, oracle, ms);
    }
    fast = model_errors(e, in, cfg, oracle, ms);
    ASSERT_EQ(in_order.rms.size(), fast.rms.size());
    for (const auto& [name, t] : in_order.rms) {
      const std::vector<double>& f = fast.rms.at(name).data;
      ASSERT_EQ(t.data.size(), f.size()) << r.layer << " " << name;
      EXPECT_TRUE(same_bytes(t.data.data(), f.data(), f.size() * sizeof(double))) << r.layer << " " << name;
      double largest = 0.0;
      for (double x : f) largest = std::max(largest, x);
      EXPECT_GT(largest, 0.0) << r.layer << " " << name << ": a model with no spread compares nothing";
    }
  }
}

TEST(McaProducts, CheckReportIsTheSameWhicheverKernel) {
  TempDir dir;
  ASSERT_EQ(run_cli({"vectors", "--layer", "gated_delta_rule", "--suite", "tiny", "--out", dir.path().string(),
                     "--no-oracle"})
                .exit_code,
            0);
  const std::string in = dir / "gated_delta_rule.tiny.with_state.inputs.safetensors";
  ASSERT_EQ(run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", dir / "cand.st", "--arith", "bf16",
                     "--form", "chunk", "--chunk-size", "4"})
                .exit_code,
            0);
  std::vector<std::string> reports;
  for (const char* kernel : {"in_order", "scalar", "vector"}) {
    ::setenv("TTR_MCA_PRODUCTS", kernel, 1);
    const std::string rep = dir / (std::string("report.") + kernel + ".json");
    const CliResult c = run_cli({"check", "--layer", "gated_delta_rule", "--in", in, "--candidate", dir / "cand.st",
                                 "--form", "chunk", "--chunk-size", "4", "--report", rep});
    EXPECT_EQ(c.exit_code, 0) << kernel << ": " << c.err;
    reports.push_back(io::read_text_file(rep));
  }
  ::setenv("TTR_MCA_PRODUCTS", "blas", 1);
  const CliResult bad = run_cli({"check", "--layer", "gated_delta_rule", "--in", in, "--candidate", dir / "cand.st"});
  ::unsetenv("TTR_MCA_PRODUCTS");
  ASSERT_FALSE(reports[0].empty());
  EXPECT_EQ(reports[0], reports[1]);
  EXPECT_EQ(reports[0], reports[2]);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("TTR_MCA_PRODUCTS='blas'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace
}  // namespace ttr::test
