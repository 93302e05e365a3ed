// linear_attn: binds LAYERS.md names to reference/linear_attn/ (spec in linear_attn.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/linear_attn/sequential.hpp"

namespace ttr::layers {

struct linear_attn {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    linear_attn_sequential(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
