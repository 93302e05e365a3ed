// gated_delta_rule: binds the docs/layers.md names to reference/gated_delta_rule/ (spec in gated_delta_rule.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "oracles/layers/delta_backward_forms.hpp"
#include "oracles/layers/delta_tf32_intra_form.hpp"
#include "reference/gated_delta_rule/backward.hpp"
#include "reference/gated_delta_rule/chunk.hpp"
#include "reference/gated_delta_rule/sequential.hpp"

namespace ttr::layers {

// chunk_tf32_intra: FLA's chunk_gated_delta_rule backward, whose chunk_bwd_kernel_dqkwg
// forms the score pairs' dq and dk as two TF32 products (delta_tf32_intra_form.hpp).
struct gated_delta_rule : delta_backward_forms<gated_delta_rule>, delta_tf32_intra_form<gated_delta_rule> {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    gated_delta_rule_sequential(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"), scale_of(cfg, qk.q), out["o"], out["ht"]);
  }

  // The backward direction, both forms (delta_backward_forms): the chain rule
  // around the delta core.
  template <class T, class Core>
  static void backward(const TensorMap<T>& in, const Config& cfg, const Core& core, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg, core);
    Tensor<T> dh0;
    gated_delta_rule_backward(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"), scale_of(cfg, qk.q),
                 in.at("do"), optional_input(in, "dht"), out["dq"], out["dk"], out["dv"], out["dg"], out["dbeta"], dh0, core);
    qk_backward(in, cfg, out["dq"], out["dk"]);
    put_if_given(in, "h0", out, std::move(dh0));
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    const QK<A> qk = qk_of_stored<P>(in, cfg);
    gated_delta_rule_chunk<P>(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"),
                              scale_of(cfg, qk.q), opt.chunk_size, out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
