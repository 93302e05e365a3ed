// How many threads the oracle, the model and their file passes use, and a parallel
// loop over contiguous blocks for the passes over whole tensors (widening an input
// file to float64, checking its values, narrowing an output back).
//
// The passes are the serial part of a run: at 16 threads the production oracle's
// slices take ~1.3 s and the conversions, zero-fills and file around them ~1.7 s
// (docs/varlen.md, "Thread scaling"). Each block writes its own elements and the
// loops report the lowest failing index, so results and error messages do not
// depend on the thread count.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <vector>

namespace ttr {

// Threads by default: set_slice_threads(n) when n > 0 (the CLI's --threads), else
// the environment variable TTR_THREADS, else OpenMP's default (OMP_NUM_THREADS or
// the number of cores).
int slice_threads();
void set_slice_threads(int n);
// Limits the slicer to `n` threads on this thread while the scope lives (callers
// that already run their own units on every core, such as the gate's workers).
class SliceThreadsScope {
 public:
  explicit SliceThreadsScope(int n);
  ~SliceThreadsScope();
  SliceThreadsScope(const SliceThreadsScope&) = delete;
  SliceThreadsScope& operator=(const SliceThreadsScope&) = delete;

 private:
  int saved_;
};

// body(begin, end) over [0, n) in contiguous blocks of at least `grain` elements, on
// up to slice_threads() threads; serially (one call) when n < 2·grain or one thread
// is asked for. Blocks must not write shared data. If bodies throw, the exception of
// the lowest block is rethrown after every block has run.
void parallel_blocks(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& body);

// Elements per block for the passes over whole tensors: ~1 MB of doubles, where a
// thread's start-up is a few microseconds against a ~0.3 ms pass.
inline constexpr std::size_t kTensorPassGrain = std::size_t{1} << 17;

// The lowest index i with pred(v[i]), or v.size() when there is none: each block
// scans up to its first hit (or to a lower block's), and the least hit wins — the
// serial loop's answer, whatever the thread count.
template <class T, class Pred>
std::size_t first_where(const std::vector<T>& v, Pred pred) {
  std::atomic<std::size_t> first{v.size()};
  parallel_blocks(v.size(), kTensorPassGrain, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e && i < first.load(std::memory_order_relaxed); ++i)
      if (pred(v[i])) {
        std::size_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
  });
  return first.load();
}

}  // namespace ttr
