// pdn_exact: binds the docs/layers.md names to reference/pdn_exact/ (spec in pdn_exact.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/pdn_exact/sequential.hpp"

namespace ttr::layers {

struct pdn_exact {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    pdn_exact_sequential(qk.q, qk.k, in.at("v"), optional_input(in, "h0"), from_double<T>(cfg.number("lambda")),
                         scale_of(cfg, qk.q), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
