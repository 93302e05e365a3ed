// simple_gla: binds the docs/layers.md names to reference/simple_gla/ (spec in simple_gla.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "oracles/layers/gated_linear_backward_forms.hpp"
#include "oracles/layers/gated_linear_dg_sum_form.hpp"
#include "reference/simple_gla/backward.hpp"
#include "reference/simple_gla/chunk.hpp"
#include "reference/simple_gla/scan.hpp"
#include "reference/simple_gla/sequential.hpp"

namespace ttr::layers {

// sequential_dg_sum: FLA's fused-recurrent backward (gated_linear_dg_sum_form.hpp).
struct simple_gla : gated_linear_backward_forms<simple_gla>, gated_linear_dg_sum_form<simple_gla> {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    simple_gla_sequential(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"), scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }

  // The backward direction, every form (gated_linear_backward_forms): the
  // sequential adjoint, the chunk or the scan backward, as `core` says.
  template <class T, class Core>
  static void backward(const TensorMap<T>& in, const Config& cfg, const Core& core, TensorMap<T>& out) {
    Tensor<T> dh0;
    simple_gla_backward(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"), scale_of(cfg, in.at("q")),
                 in.at("do"), optional_input(in, "dht"), out["dq"], out["dk"], out["dv"], out["dg"], dh0, core);
    put_if_given(in, "h0", out, std::move(dh0));
  }

  // Form `scan`: prefix scan over the affine pairs (reference/family/gated_linear_scan.hpp,
  // which narrows the inputs and stored compositions itself under P).
  template <class P>
  static void scan(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions&,
                   TensorMap<typename P::acc>& out) {
    simple_gla_scan<P>(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"),
                       scale_of(cfg, in.at("q")), out["o"], out["ht"]);
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    simple_gla_chunk<P>(in.at("q"), in.at("k"), in.at("v"), in.at("g"), optional_input(in, "h0"),
                        scale_of(cfg, in.at("q")), opt.chunk_size, out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
