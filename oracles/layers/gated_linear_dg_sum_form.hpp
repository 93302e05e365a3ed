// The backward form `sequential_dg_sum` of the gated layers (gla, simple_gla): the
// sequential adjoint with dg formed by flash-linear-attention's reverse running sum,
// the model of its fused_recurrent_gla/simple_gla backward
// (reference/family/gated_linear_dg_sum.hpp; docs/validating-fla.md, "Failures").
// A mixin beside gated_linear_backward_forms, from the adapter's same one
// `backward(in, cfg, core, out)`, run around a fourth core. Every operation in the
// tier's scalar, as the `sequential` form; only dg is formed differently.
#pragma once

#include <type_traits>

#include "oracles/layers/adapter.hpp"
#include "oracles/run_layer.hpp"
#include "reference/family/gated_linear_backward.hpp"
#include "reference/family/gated_linear_dg_sum.hpp"

// The form's template parameter per tier (oracles/run_layer.hpp, forms::): as the
// sequential form's. Declared here, beside the only adapters that have the form, so
// that adding it did not touch the header every generated runner includes.
namespace ttr::forms {
struct sequential_dg_sum : sequential {};
}  // namespace ttr::forms

namespace ttr {

// The adjoint as FLA's fused-recurrent backward runs it: dq, dk, dv, dh0 as the
// sequential core's, dg by Σ_v S_T ⊙ dht + Σ_{s≥t} (q_s ⊙ dq_s − k_s ⊙ dk_s).
struct SequentialDgSumGatedLinearCore {
  template <class T>
  void operator()(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                  const std::type_identity_t<Tensor<T>>* g, const Tensor<T>* h0, const T& scale, const Tensor<T>& do_,
                  const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg,
                  Tensor<T>& dh0) const {
    gated_linear_backward<T>(kind, q, k, v, g, h0, scale, do_, dht, dq, dk, dv, dg, dh0);
    if (g) gated_linear_dg_by_running_sum<T>(kind, q, k, v, *g, h0, scale, dht, dq, dk, dg);
  }
};

namespace layers {

template <class Layer>
struct gated_linear_dg_sum_form {
  template <class T>
  static void sequential_dg_sum_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&,
                                         TensorMap<T>& out) {
    Layer::backward(in, cfg, SequentialDgSumGatedLinearCore{}, out);
  }
};

}  // namespace layers
}  // namespace ttr
