// Which kernel the Monte Carlo model's matrix products run (mca.hpp, mca_gemm.cpp):
//   in_order  matrix.hpp's loops through McaReal's operators (the definition),
//   scalar    the run's context hoisted, eight output columns per pass,
//   vector    AVX-512 (F, DQ, VL), eight columns per vector, four rows at a time.
// All three give the same doubles (tests/precision/mca_products_test.cpp), so the
// choice is for tests and benchmarks: the default is `vector` where the CPU has it,
// else `scalar`; the CLI takes TTR_MCA_PRODUCTS=in_order|scalar|vector (cli/main.cpp).
#pragma once

#include <optional>
#include <string_view>

namespace ttr {

enum class McaProducts { in_order, scalar, vector };

// The kernel products run on this thread now (`vector` asked for where the CPU lacks
// AVX-512 runs `scalar`).
McaProducts mca_products();
bool mca_products_vector_available();
const char* mca_products_name(McaProducts p);
std::optional<McaProducts> parse_mca_products(std::string_view name);

// The process's default (every thread without a scope below).
void set_default_mca_products(McaProducts p);

// This thread's kernel for the scope's lifetime.
class McaProductsScope {
 public:
  explicit McaProductsScope(McaProducts p);
  ~McaProductsScope();
  McaProductsScope(const McaProductsScope&) = delete;
  McaProductsScope& operator=(const McaProductsScope&) = delete;

 private:
  int saved_;
};

}  // namespace ttr
