// The CUDA chunk kernels as the fuzzer's kernel under test (`ttrcheck fuzz
// --target cuda:bf16|cuda:fp32`): oracles/fuzz/target.hpp's interface over
// cuda::run, so campaigns, minimiser and reproducers work unchanged.
#pragma once

#include <memory>

#include "oracles/fuzz/target.hpp"

namespace ttr::cuda {

// InputError when the kernels are not built or no device is present (the
// reason named), the layer has no CUDA kernel, the form is not `chunk`, the
// chunk size is not the kernels' 64, or a mutant is asked for (mutants live in
// the CPU forms).
std::unique_ptr<fuzz::Target> make_fuzz_target(const fuzz::TargetSpec& spec, const LayerEntry& layer, Form form,
                                                int chunk, Mutant mutant);

}  // namespace ttr::cuda
