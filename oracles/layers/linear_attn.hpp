// linear_attn: binds the docs/layers.md names to reference/linear_attn/ (spec in linear_attn.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "oracles/layers/gated_linear_backward_forms.hpp"
#include "reference/linear_attn/backward.hpp"
#include "reference/linear_attn/chunk.hpp"
#include "reference/linear_attn/scan.hpp"
#include "reference/linear_attn/sequential.hpp"

namespace ttr::layers {

struct linear_attn : gated_linear_backward_forms<linear_attn> {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    linear_attn_sequential(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }

  // The backward direction, every form (gated_linear_backward_forms): the
  // sequential adjoint, the chunk or the scan backward, as `core` says.
  template <class T, class Core>
  static void backward(const TensorMap<T>& in, const Config& cfg, const Core& core, TensorMap<T>& out) {
    Tensor<T> dh0;
    linear_attn_backward(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                         in.at("do"), optional_input(in, "dht"), out["dq"], out["dk"], out["dv"], dh0, core);
    put_if_given(in, "h0", out, std::move(dh0));
  }

  // Form `scan`: prefix scan over the affine pairs (reference/family/gated_linear_scan.hpp,
  // which narrows the inputs and stored compositions itself under P).
  template <class P>
  static void scan(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions&,
                   TensorMap<typename P::acc>& out) {
    linear_attn_scan<P>(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                        out["o"], out["ht"]);
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    linear_attn_chunk<P>(in.at("q"), in.at("k"), in.at("v"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                         opt.chunk_size, out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
