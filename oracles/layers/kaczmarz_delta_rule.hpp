// kaczmarz_delta_rule: binds LAYERS.md names to reference/kaczmarz_delta_rule/
// (spec in kaczmarz_delta_rule.cpp). `beta` is the relaxation η of KLA-Z eq. (3).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kaczmarz_delta_rule/sequential.hpp"

namespace ttr::layers {

struct kaczmarz_delta_rule {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    kaczmarz_delta_rule_sequential(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"),
                                   from_double<T>(cfg.number("eps")), optional_input(in, "h0"),
                                   scale_of(cfg, qk.q), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
