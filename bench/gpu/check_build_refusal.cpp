// Linked into every GPU benchmark of a TTR_CUDA=CHECK build (gpu/CMakeLists.txt,
// cmake/Cuda.cmake): its kernels were compiled with the device code unoptimised
// (nvcc -G), as a compile check, so any timing of them would be meaningless. The
// program stops before main, with one line and exit code 2.
#include <cstdio>
#include <cstdlib>

namespace {
const int refused = [] {
  std::fprintf(stderr,
               "%s: this build's CUDA kernels are a compile check (TTR_CUDA=CHECK, or AUTO on a machine "
               "without a GPU: device code unoptimised); configure with -DTTR_CUDA=ON to time them\n",
               TTR_BENCH_NAME);
  std::exit(2);
  return 0;
}();
}  // namespace
