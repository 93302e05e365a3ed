// linear_attn: binds the docs/layers.md names to reference/linear_attn/ (spec in linear_attn.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/linear_attn/chunk.hpp"
#include "reference/linear_attn/scan.hpp"
#include "reference/linear_attn/sequential.hpp"

namespace ttr::layers {

struct linear_attn {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    linear_attn_sequential(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }

  // Form `scan`: prefix scan over the affine pairs (reference/family/gated_linear_scan.hpp,
  // which narrows the inputs and stored compositions itself under P).
  template <class P>
  static void scan(const TensorMap<typename P::acc>& in, const Config& cfg, const RunOptions&,
                   TensorMap<typename P::acc>& out) {
    linear_attn_scan<P>(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                        out["o"], out["ht"]);
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const RunOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    linear_attn_chunk<P>(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                         opt.chunk_size, out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
