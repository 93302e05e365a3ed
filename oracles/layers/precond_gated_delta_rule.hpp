// precond_gated_delta_rule: binds FLA's argument names (g, beta, g_atk, beta_atk, initial_A_state,
// log_atk_scale, x, eps) to reference/precond_gated_delta_rule/ (spec in precond_gated_delta_rule.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "oracles/layers/precond_common.hpp"
#include "reference/precond_gated_delta_rule/chunk.hpp"
#include "reference/precond_gated_delta_rule/sequential.hpp"

namespace ttr::layers {

struct precond_gated_delta_rule {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    const PrecondArgs<T> p = precond_args(in, cfg, qk.k);
    precond_gated_delta_rule_sequential(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), in.at("g_atk"), in.at("beta_atk"),
                    p.center, optional_input(in, "h0"), optional_input(in, "initial_A_state"), p.log_x, p.eps,
                    scale_of(cfg, qk.q), out["o"], out["ht"], out["final_A_state"]);
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const RunOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    const QK<A> qk = qk_of(in, cfg);
    const PrecondArgs<A> p = precond_args(in, cfg, qk.k);
    precond_delta_chunk<P>(Decay::scalar, qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), in.at("g_atk"),
                           in.at("beta_atk"), p.center, optional_input(in, "h0"), optional_input(in, "initial_A_state"),
                           p.log_x, p.eps, scale_of(cfg, qk.q), opt.chunk_size, out["o"], out["ht"],
                           out["final_A_state"]);
  }
};

}  // namespace ttr::layers
