// MPFR keeps caches per thread in thread-local storage: the constants it has
// computed (log 2, π, Euler's γ at the precisions used so far), the tables of
// mpfr_exp_2 and friends, and a pool of mpz_t limbs. A thread that exits with
// them still allocated leaks them (LeakSanitizer reports every worker of a
// gate run). Every thread that may run MPFR or MPFI arithmetic and then exits
// holds one ThreadCaches for its whole life; the destructor frees that
// thread's caches only (MPFR_FREE_LOCAL_CACHE), so other threads are untouched.
#pragma once

namespace ttr {

void release_thread_caches() noexcept;

struct ThreadCaches {
  ThreadCaches() = default;
  ThreadCaches(const ThreadCaches&) = delete;
  ThreadCaches& operator=(const ThreadCaches&) = delete;
  ~ThreadCaches() { release_thread_caches(); }
};

}  // namespace ttr
