#include "reference/core/thread_caches.hpp"

#include <mpfr.h>

namespace ttr {

void release_thread_caches() noexcept { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }

}  // namespace ttr
