// A device's kernels under the judge: each (layer, input set) computes the MPFR
// oracle once (sequential form, 128 bits, as the CPU gate) and, per dtype, the
// error model of each kernel, then judges every kernel the registry declares for
// the backend (oracles/layers/layers.def, TTR_KERNEL lines).
//
// The model of a kernel is the model of the CPU form it implements, at the
// kernels' chunk size 64 and in its dtype (docs/error-model.md), except for the
// sequential kernel in fp32: the quadrature sum of the sequential form's fp32
// model (the kernel is that form for the delta recurrence: every operation fp32)
// and the chunk form's fp32 model (for precond_*, the write key k̃ comes from the
// chunkwise preconditioner). Neither alone bounds it: on the gate's `edges` case
// (β ∈ {0, 1}, decays of 1e-30) GDN's sequential fp32 kernel reached ratio 34.9
// under the chunk model, and PGDN's 18.1 under the sequential model (H100). In
// bf16 the sequential kernel rounds to bf16 only its inputs and o, a subset of
// the chunk form's narrowing points: the chunk form's bf16 model (ratios ≤ 1.2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gate/gate.hpp"
#include "gpu/binding/device.hpp"
#include "reference/core/mutant_id.hpp"

namespace ttr {

inline constexpr int kKernelChunkSize = 64;

// The model a backend kernel of `form` makes in `dtype` (see above), in either
// direction: a backward kernel is modelled by the backward forms of the same
// names (the delta family's fused-recurrent backward kernel rounds its inputs,
// `do` and the gradients as written, a subset of the chunk backward form's
// narrowing points; in fp32, as forward, the sequential and chunk backward
// forms' models in quadrature).
ModelSpec kernel_model(Form form, Tier dtype, int samples, std::uint64_t seed,
                       Direction direction = Direction::forward);
// The model of `layer`'s kernel: as above, except for a recurrent kernel of a
// layer that declares no CPU chunk form in the kernel's direction, or whose chunk
// form there is another algorithm (TTR_OWN_ALGORITHM in layers.def; gka's
// backward: the chunk backward reverses the Chebyshev iteration, GKA Alg. 2,
// where the recurrent kernel stores it; docs/gradients.md). That kernel is modelled by the sequential form alone, in the
// kernel's dtype. In fp32 that form
// is the kernel's arithmetic (every operation fp32, as the form's fp32 model
// perturbs each). In bf16 the model perturbs every operation by u = 2⁻⁸, where
// the kernel rounds to bf16 only its inputs q, k, v, do (each enters the form
// through an operation the model perturbs by u) and dq, dk, dv once when written
// (the last operation of each, perturbed by u), everything else fp32: the
// model bounds the kernel's error with room to spare — a looser judge than the
// chunk form's bf16 model would be (it catches what exceeds bf16 errors at every
// operation; the fp32 check is the tight one).
ModelSpec kernel_model(const LayerEntry& layer, Form form, Tier dtype, int samples, std::uint64_t seed,
                       Direction direction = Direction::forward);

struct KernelCheckOptions {
  Backend backend = Backend::cuda;
  std::vector<Form> forms = {Form::chunk, Form::sequential};  // the kernels judged, when declared
  std::vector<Tier> dtypes = {Tier::bf16, Tier::fp32};
  int samples = 8;
  // Also judge the chunk kernel against the sequential kernel directly (same
  // dtype), their models in quadrature: id ".../cuda-chunk-vs-sequential/...".
  bool cross = false;
  bool strict_range = false;  // range findings fail (gate/range.hpp)
  // backward: the backward kernels on inputs holding the cotangents, judged against
  // the backward oracle; ids ".../<kernel>-backward/...".
  Direction direction = Direction::forward;
  OracleMode oracle_mode = OracleMode::fast;  // oracles/oracle_tier.hpp
  KernelOptions launch;
  // A catalogued bug switched on around the kernels' runs alone (never the oracle
  // or the model): the CUDA counterparts of gate/mutants.hpp's `cuda` entries.
  Mutant mutant = Mutant::none;
};

// One layer on one input set: checks in (dtype, kernel) order, ids
// "layer/<kernel>/<dtype>/<case>/<seed>".
std::vector<GateCheck> check_kernels(const LayerEntry& layer, const TensorMap<double>& in, const Config& cfg,
                                     const std::string& case_name, std::uint64_t seed, const KernelCheckOptions& opt);

}  // namespace ttr
