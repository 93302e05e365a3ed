// kalman_filter: binds the docs/layers.md names to reference/kalman_filter/ (spec in kalman_filter.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kalman_filter/backward.hpp"
#include "reference/kalman_filter/sequential.hpp"

namespace ttr::layers {

struct kalman_filter {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    kalman_filter_sequential(qk.q, qk.k, in.at("v"), optional_input(in, "eta"), optional_input(in, "h0"),
                             from_double<T>(cfg.number("lambda")), scale_of(cfg, qk.q), out["o"], out["ht"]);
  }

  // The backward direction: the hand-derived adjoint of the sequential form.
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    Tensor<T> deta, dh0;
    kalman_filter_backward(qk.q, qk.k, in.at("v"), optional_input(in, "eta"), optional_input(in, "h0"),
                           from_double<T>(cfg.number("lambda")), scale_of(cfg, qk.q), in.at("do"),
                           optional_input(in, "dht"), out["dq"], out["dk"], out["dv"], deta, dh0);
    qk_backward(in, cfg, out["dq"], out["dk"]);
    put_if_given(in, "eta", out, std::move(deta));
    put_if_given(in, "h0", out, std::move(dh0));
  }
};

}  // namespace ttr::layers
