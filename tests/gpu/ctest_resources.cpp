// Linked into ttr_gpu_tests: before main (and so before the first CUDA call),
// the GPU CTest allotted this test (tests/support/ctest_gpu.hpp) becomes the
// only visible device, so `ctest -L gpu -j N --resource-spec-file` runs N GPU
// tests on N different GPUs.
#include <cstdlib>

#include "tests/support/ctest_gpu.hpp"

namespace {

const bool kGpuSelected = [] {
  const auto id = ttr::test::ctest_gpu_id([](const char* n) -> const char* { return std::getenv(n); });
  if (!id) return false;
  ::setenv("CUDA_VISIBLE_DEVICES", id->c_str(), 1);
  return true;
}();

}  // namespace
