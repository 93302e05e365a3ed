// Runs one layer form in one scalar tier on double-valued inputs: converts the
// inputs into the tier (exactly for fp64/MPFR/MPFI; rounded to nearest for the
// narrower tiers, as a kernel receiving these inputs would see them), runs the
// recurrence, and rounds the outputs back to double (with an outward-rounded
// enclosure for interval tiers). Included only by the generated per-tier TUs.
#pragma once

#include "oracles/config.hpp"
#include "oracles/runner.hpp"
#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

template <class T, class Fn>
LayerResult run_in_tier(const TensorMap<double>& in, const Config& cfg, const RunOptions& opt, Fn&& fn) {
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

}  // namespace ttr

// Defines the runner of (layer, form, tier); see the generated TUs (CMake).
#define TTR_DEFINE_RUNNER(layer, form, tier)                                                          \
  namespace ttr::runners {                                                                             \
  LayerResult layer##__##form##__##tier(const TensorMap<double>& in, const Config& cfg,                \
                                        const RunOptions& opt) {                                       \
    return run_in_tier<tiers::tier>(in, cfg, opt,                                                      \
                                    [](const TensorMap<tiers::tier>& i, const Config& c, const RunOptions& o, \
                                       TensorMap<tiers::tier>& out) { layers::layer::form<tiers::tier>(i, c, o, out); }); \
  }                                                                                                    \
  }
