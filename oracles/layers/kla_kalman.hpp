// kla_kalman: binds LAYERS.md names to reference/kla_kalman/ (spec in kla_kalman.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kla_kalman/sequential.hpp"

namespace ttr::layers {

struct kla_kalman {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const KlaInputs<T> ki{in.at("q"),      in.at("k"),      in.at("v"),
                          in.at("lambda_v"), in.at("a_bar"), in.at("p_bar"),
                          optional_input(in, "lambda_init"), optional_input(in, "eta_init")};
    KlaOutputs<T> r;
    kla_kalman_sequential(ki, from_double<T>(cfg.number("lambda0")), from_double<T>(cfg.number("scale")), r);
    out["o"] = std::move(r.o);
    out["o_var"] = std::move(r.o_var);
    out["lambda_T"] = std::move(r.lambda_T);
    out["eta_T"] = std::move(r.eta_T);
  }
};

}  // namespace ttr::layers
