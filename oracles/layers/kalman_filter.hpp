// kalman_filter: binds the docs/layers.md names to reference/kalman_filter/ (spec in kalman_filter.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kalman_filter/sequential.hpp"

namespace ttr::layers {

struct kalman_filter {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    kalman_filter_sequential(qk.q, qk.k, in.at("v"), optional_input(in, "eta"), optional_input(in, "h0"),
                             from_double<T>(cfg.number("lambda")), scale_of(cfg, qk.q), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
