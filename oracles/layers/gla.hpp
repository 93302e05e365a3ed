// gla: binds LAYERS.md names to reference/gla/ (spec in gla.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/gla/sequential.hpp"

namespace ttr::layers {

struct gla {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    gla_sequential(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
