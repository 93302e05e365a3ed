// pdn_exact: binds the docs/layers.md names to reference/pdn_exact/ (spec in pdn_exact.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/pdn_exact/backward.hpp"
#include "reference/pdn_exact/sequential.hpp"

namespace ttr::layers {

struct pdn_exact {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    pdn_exact_sequential(qk.q, qk.k, in.at("v"), optional_input(in, "h0"), from_double<T>(cfg.number("lambda")),
                         scale_of(cfg, qk.q), out["o"], out["ht"]);
  }

  // The backward direction: the hand-derived adjoint of the sequential form.
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    Tensor<T> dh0;
    pdn_exact_backward(qk.q, qk.k, in.at("v"), optional_input(in, "h0"), from_double<T>(cfg.number("lambda")),
                       scale_of(cfg, qk.q), in.at("do"), optional_input(in, "dht"), out["dq"], out["dk"], out["dv"], dh0);
    qk_backward(in, cfg, out["dq"], out["dk"]);
    put_if_given(in, "h0", out, std::move(dh0));
  }
};

}  // namespace ttr::layers
