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
