// simple_gla: binds LAYERS.md names to reference/simple_gla/ (spec in simple_gla.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/simple_gla/sequential.hpp"

namespace ttr::layers {

struct simple_gla {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    simple_gla_sequential(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
