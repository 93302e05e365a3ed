// Shared by the precond_* adapters: the preconditioner's parameters in the
// working precision. The centre c per head comes from the optional tensor
// `log_atk_scale` [H] (FLA's learnable parameter) or else the config key of the
// same name (FLA's default -0.2).
#pragma once

#include <cmath>
#include <vector>

#include "oracles/layers/adapter.hpp"

namespace ttr::layers {

template <class T>
struct PrecondArgs {
  std::vector<T> center;
  T log_x, eps;
};

template <class T>
PrecondArgs<T> precond_args(const TensorMap<T>& in, const Config& cfg, const Tensor<T>& k) {
  using std::log;
  const std::int64_t H = k.dim(2);
  PrecondArgs<T> p{{}, log(from_double<T>(cfg.number("x"))), from_double<T>(cfg.number("eps"))};
  if (const Tensor<T>* c = optional_input(in, "log_atk_scale")) p.center = c->data;
  else p.center.assign(static_cast<std::size_t>(H), from_double<T>(cfg.number("log_atk_scale")));
  return p;
}

}  // namespace ttr::layers
