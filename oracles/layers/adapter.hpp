// Shared pieces of the layer adapters: they bind the tensor names of docs/layers.md and
// config keys to the arguments of the reference/ recurrences.
#pragma once

#include <cmath>

#include "oracles/config.hpp"
#include "oracles/runner.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/l2norm.hpp"
#include "reference/family/l2norm_backward.hpp"

namespace ttr::layers {

template <class T>
const Tensor<T>* optional_input(const TensorMap<T>& in, const char* name) {
  const auto it = in.find(name);
  return it == in.end() ? nullptr : &it->second;
}

// `scale` if set, else K^-1/2 computed in the working precision.
template <class T>
T scale_of(const Config& cfg, const Tensor<T>& q) {
  using std::sqrt;
  if (cfg.has("scale")) return from_double<T>(cfg.number("scale"));
  return from_double<T>(1.0) / sqrt(from_double<T>(static_cast<double>(q.shape.back())));
}

// q and k as the recurrence sees them: L2-normalised when use_qk_l2norm_in_kernel.
template <class T>
struct QK {
  Tensor<T> q, k;
};
template <class T>
QK<T> qk_of(const TensorMap<T>& in, const Config& cfg) {
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    const T eps = from_double<T>(1e-6);
    return {l2normalize_rows(in.at("q"), eps), l2normalize_rows(in.at("k"), eps)};
  }
  return {in.at("q"), in.at("k")};
}

// q and k as a chunk kernel under policy P reads them. FLA's chunk ops normalise q and k
// in a kernel of their own (l2norm_fwd) and store the rows in the input's dtype, so the
// normalised rows are narrowed to P's storage format before the chunk form reads them; the
// fused-recurrent ops normalise inside the kernel in fp32 (the sequential form: qk_of).
// The preconditioner reads the stored key too: without this rounding FLA's fp16
// chunk_precond_gated_delta_rule failed dbeta_atk at 16.6 on the varlen suite while an fp32
// run with its normalised keys rounded to fp16 reproduced the 16.6 at the same row
// (docs/validating-fla/failures.md). An identity for exact policies and without the flag.
template <class P>
QK<typename P::acc> qk_of_stored(const TensorMap<typename P::acc>& in, const Config& cfg) {
  QK<typename P::acc> qk = qk_of(in, cfg);
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    narrow_all<P>(qk.q.data);
    narrow_all<P>(qk.k.data);
  }
  return qk;
}

}  // namespace ttr::layers
namespace ttr {
template <class P>
struct ChunkDeltaCore;  // reference/family/delta_backward_core.hpp
}  // namespace ttr
namespace ttr::layers {

// q and k as a layer's backward reads them, by its delta core: stored (qk_of_stored)
// around the chunkwise core, normalised in the working precision around the sequential one.
template <class T, class Core>
QK<T> qk_of(const TensorMap<T>& in, const Config& cfg, const Core&) {
  return qk_of(in, cfg);
}
template <class T, class P>
QK<T> qk_of(const TensorMap<T>& in, const Config& cfg, const ChunkDeltaCore<P>&) {
  return qk_of_stored<P>(in, cfg);
}

// The backward of qk_of: gradients with respect to the normalised q, k become
// gradients of the raw q, k (use_qk_l2norm_in_kernel), in place; identity otherwise.
template <class T>
void qk_backward(const TensorMap<T>& in, const Config& cfg, Tensor<T>& dq, Tensor<T>& dk) {
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    const T eps = from_double<T>(1e-6);
    dq = l2normalize_rows_backward(in.at("q"), dq, eps);
    dk = l2normalize_rows_backward(in.at("k"), dk, eps);
  }
}

// The gradient of an optional input is an output only when the input was given
// (FLA returns dh0 only for an initial_state).
template <class T>
void put_if_given(const TensorMap<T>& in, const char* input, TensorMap<T>& out, Tensor<T>&& grad) {
  if (in.count(input)) out[std::string("d") + input] = std::move(grad);
}

// The inputs as a kernel under arithmetic policy P receives them: the activations
// q, k, v and beta rounded to its storage format (bf16/fp16), everything else
// (gates, initial states, parameters) in acc. Identity for exact policies.
template <class P>
TensorMap<typename P::acc> policy_inputs(const TensorMap<typename P::acc>& in) {
  TensorMap<typename P::acc> out = in;
  for (const char* name : {"q", "k", "v", "beta"})
    if (auto it = out.find(name); it != out.end()) narrow_all<P>(it->second.data);
  return out;
}

}  // namespace ttr::layers
