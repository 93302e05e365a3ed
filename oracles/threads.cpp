#include "oracles/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fmt/format.h>
#include <vector>

#include "oracles/error.hpp"

namespace ttr {
namespace {

int g_threads = 0;               // set_slice_threads
thread_local int t_threads = 0;  // SliceThreadsScope

}  // namespace

int slice_threads() {
  if (t_threads > 0) return t_threads;
  if (g_threads > 0) return g_threads;
  if (const char* e = std::getenv("TTR_THREADS"); e && *e) {
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (*end != '\0' || n < 1 || n > 4096)
      throw InputError(fmt::format("environment TTR_THREADS='{}' is not a thread count (1..4096)", e));
    return static_cast<int>(n);
  }
  return std::max(1, omp_get_max_threads());
}

void set_slice_threads(int n) { g_threads = n; }

SliceThreadsScope::SliceThreadsScope(int n) : saved_(t_threads) { t_threads = n; }
SliceThreadsScope::~SliceThreadsScope() { t_threads = saved_; }

void parallel_blocks(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body) {
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t most = n / grain;  // blocks of at least `grain`
  const int threads = most < 2 ? 1 : static_cast<int>(std::min<std::size_t>(most, slice_threads()));
  if (threads <= 1) {
    if (n > 0) body(0, n);
    return;
  }
  // One block per thread, equal sizes: the passes cost the same per element.
  const std::size_t blocks = static_cast<std::size_t>(threads);
  std::vector<std::exception_ptr> errors(blocks);
  const std::int64_t count = static_cast<std::int64_t>(blocks);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t b = static_cast<std::size_t>(i);
    try {
      body(n * b / blocks, n * (b + 1) / blocks);
    } catch (...) {
      errors[b] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ttr
