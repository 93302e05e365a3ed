// The mutant switch on the device: the CUDA counterparts of the catalogue's bugs
// (gate/mutants.hpp, `cuda` entries) read the mutant their launch was handed
// (DeltaBackwardArgs::mutant, set by the binding from the host's thread-local
// switch, reference/core/mutant.hpp). A kernel-argument compare, uniform over the
// grid, taken once per tile or per chunk — never in an inner product loop.
//
// Compiled in with TTR_CUDA_MUTANTS (CMake option, ON by default: the test
// builds); without it `mutated` is constant false and every mutant branch is dead
// code, so a build for timing can leave them out (-DTTR_CUDA_MUTANTS=OFF).
#pragma once

#include "reference/core/mutant_id.hpp"

namespace ttr::gpu {

__host__ __device__ constexpr bool mutated([[maybe_unused]] Mutant active, [[maybe_unused]] Mutant m) {
#ifdef TTR_CUDA_MUTANTS
  return active == m;
#else
  return false;
#endif
}

}  // namespace ttr::gpu
