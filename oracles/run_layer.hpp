// Runs one layer form in one scalar tier on double-valued inputs: converts the
// inputs into the tier (exactly for fp64/MPFR/MPFI; rounded to nearest for the
// narrower tiers, as a kernel receiving these inputs would see them), runs the
// recurrence, and rounds the outputs back to double (with an outward-rounded
// enclosure for interval tiers). Included only by the generated per-tier TUs.
#pragma once

#include "oracles/config.hpp"
#include "oracles/runner.hpp"
#include "reference/core/policy.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

template <class T, class Fn>
LayerResult run_in_tier(const TensorMap<double>& in, const Config& cfg, const FormOptions& opt, Fn&& fn) {
  LayerResult r;
  r.working_bits = precision_control<T>::set_bits(opt.bits);
  TensorMap<T> tin, tout;
  for (const auto& [name, x] : in) {
    Tensor<T>& y = tin[name];
    y.shape = x.shape;
    y.data.reserve(x.data.size());
    for (double d : x.data) y.data.push_back(from_double<T>(d));
  }
  fn(tin, cfg, opt, tout);
  for (const auto& [name, y] : tout) {
    auto convert = [&](TensorMap<double>& dst, auto f) {
      Tensor<double>& x = dst[name];
      x.shape = y.shape;
      x.data.reserve(y.data.size());
      for (const T& e : y.data) x.data.push_back(f(e));
    };
    convert(r.values, [](const T& e) { return to_double(e); });
    if constexpr (is_interval_v<T>) {
      convert(r.lower, [](const T& e) { return scalar_traits<T>::lower(e); });
      convert(r.upper, [](const T& e) { return scalar_traits<T>::upper(e); });
    }
  }
  return r;
}

// What a form's template parameter is, per tier. The sequential form is the
// definition and runs every operation in the tier's scalar (bf16 tier: every
// operation rounded to bf16). The chunk and scan forms are the kernels' algorithms
// and run under the tier's arithmetic policy (bf16 tier: fp32 compute, bf16
// operands and stored intermediates; reference/core/policy.hpp): their tensors
// are in the policy's acc type and the form narrows what a kernel would.
namespace forms {
struct sequential {
  template <class Tier>
  using scalar = Tier;
  template <class Tier>
  using arg = Tier;
};
struct chunk {
  template <class Tier>
  using scalar = typename policy_for_t<Tier>::acc;
  template <class Tier>
  using arg = policy_for_t<Tier>;
};
struct scan : chunk {};
struct chunk_unscaled : chunk {};
struct scan_unscaled : chunk {};
}  // namespace forms

}  // namespace ttr

// The adapter method of a (form, direction): `chunk` computes the forward
// outputs, `chunk_backward` the gradients (oracles/layers/<layer>.hpp).
#define TTR_ADAPTER_METHOD(form, direction) TTR_ADAPTER_METHOD_##direction(form)
#define TTR_ADAPTER_METHOD_forward(form) form
#define TTR_ADAPTER_METHOD_backward(form) form##_backward

// Defines the runner of (layer, form, direction, tier); see the generated TUs (CMake).
#define TTR_DEFINE_RUNNER(layer, form, direction, tier)                                                  \
  namespace ttr::runners::layer##__##form##__##direction {                                              \
  LayerResult tier(const TensorMap<double>& in, const Config& cfg, const FormOptions& opt) {             \
    using S = forms::form::scalar<tiers::tier>;                                                          \
    return run_in_tier<S>(in, cfg, opt, [](const TensorMap<S>& i, const Config& c, const FormOptions& o, \
                                           TensorMap<S>& out) {                                          \
      layers::layer::template TTR_ADAPTER_METHOD(form, direction)<forms::form::arg<tiers::tier>>(i, c, o, out); \
    });                                                                                                  \
  }                                                                                                      \
  }
