// The delta family's CUDA kernels (gpu/family/delta_chunk.cu, delta_sequential.cu,
// atk_chunk.cu, l2norm.cu) bound to layer inputs: what each layer of the family
// changes is one of these flags, set by its own gpu/<layer>/binding.cpp.
#pragma once

#include "oracles/config.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr::device {

struct DeltaBinding {
  enum class Decay { none, scalar, per_key } decay = Decay::scalar;  // input `g`: absent, [B,T,H], [B,T,H,K]
  bool kaczmarz = false;  // β_t/(‖k_t‖² + eps) (KLA-Z eq. (3)), config key `eps`
  bool precond = false;   // write key k̃ = B_t ⊙ k_t from PGDN's preconditioner (PDN eq. (9))
};

// Runs the family's chunk (form chunk) or sequential kernel in dtype bf16/fp32.
TensorMap<double> run_delta(const DeltaBinding& b, Form form, const TensorMap<double>& in, const Config& cfg,
                            Tier dtype, const KernelOptions& opt);

// The backward direction on the family's fused-recurrent (form sequential;
// gpu/family/delta_sequential_backward.cu) or chunk backward kernel (form chunk;
// gpu/family/delta_chunk_backward.cu): the forward inputs plus
// `do` and optional `dht` in, FLA's gradient names out (dq, dk, dv, dbeta, dg
// where g is given, dh0 where h0 is given). The preconditioned layers also take the
// optional cotangent `dfinal_A_state` and give dg_atk, dbeta_atk, and
// dinitial_A_state, dlog_atk_scale where those inputs are given.
TensorMap<double> run_delta_backward(const DeltaBinding& b, Form form, const TensorMap<double>& in, const Config& cfg,
                                     Tier dtype, const KernelOptions& opt);

}  // namespace ttr::device

// The registry's entry points of a delta-family layer (its TTR_KERNEL lines in
// oracles/layers/layers.def): the chunk and the sequential kernel with the
// layer's binding flags. Used once per gpu/<layer>/binding.cpp.
#define TTR_DELTA_BINDING(layer, ...)                                                                        \
  namespace ttr::kernels {                                                                                   \
  TensorMap<double> layer##__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype, \
                                                  const KernelOptions& opt) {                                \
    return device::run_delta(device::DeltaBinding{__VA_ARGS__}, Form::chunk, in, cfg, dtype, opt);          \
  }                                                                                                          \
  TensorMap<double> layer##__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg,      \
                                                       Tier dtype, const KernelOptions& opt) {              \
    return device::run_delta(device::DeltaBinding{__VA_ARGS__}, Form::sequential, in, cfg, dtype, opt);     \
  }                                                                                                          \
  }

// The backward kernels' entry points of a delta-family layer (its TTR_KERNEL(layer,
// cuda, sequential|chunk, backward) lines).
#define TTR_DELTA_BACKWARD_BINDING(layer, ...)                                                                     \
  namespace ttr::kernels {                                                                                         \
  TensorMap<double> layer##__cuda__sequential__backward(const TensorMap<double>& in, const Config& cfg,           \
                                                        Tier dtype, const KernelOptions& opt) {                   \
    return device::run_delta_backward(device::DeltaBinding{__VA_ARGS__}, Form::sequential, in, cfg, dtype, opt); \
  }                                                                                                                \
  TensorMap<double> layer##__cuda__chunk__backward(const TensorMap<double>& in, const Config& cfg, Tier dtype,    \
                                                   const KernelOptions& opt) {                                    \
    return device::run_delta_backward(device::DeltaBinding{__VA_ARGS__}, Form::chunk, in, cfg, dtype, opt);      \
  }                                                                                                                \
  }
