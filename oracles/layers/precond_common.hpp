// Shared by the precond_* adapters (precond_gated_delta_rule, precond_kda, which
// differ only in the decay): the preconditioner's parameters in the working
// precision, and the adapter itself. The centre c per head comes from the
// optional tensor `log_atk_scale` [H] (FLA's learnable parameter) or else the
// config key of the same name (FLA's default -0.2).
#pragma once

#include <cmath>
#include <vector>

#include "oracles/layers/adapter.hpp"
#include "oracles/layers/delta_backward_forms.hpp"
#include "reference/precond_gated_delta_rule/backward.hpp"
#include "reference/precond_gated_delta_rule/chunk.hpp"
#include "reference/precond_gated_delta_rule/sequential.hpp"

namespace ttr::layers {

template <class T>
struct PrecondArgs {
  std::vector<T> center;
  T log_x, eps;
};

template <class T>
PrecondArgs<T> precond_args(const TensorMap<T>& in, const Config& cfg, const Tensor<T>& k) {
  using std::log;
  const std::int64_t H = k.dim(2);
  PrecondArgs<T> p{{}, log(from_double<T>(cfg.number("x"))), from_double<T>(cfg.number("eps"))};
  if (const Tensor<T>* c = optional_input(in, "log_atk_scale")) p.center = c->data;
  else p.center.assign(static_cast<std::size_t>(H), from_double<T>(cfg.number("log_atk_scale")));
  return p;
}

// The inputs of a precond_* layer, bound from its tensors and config.
template <class T>
struct PrecondBound {
  QK<T> qk;
  PrecondArgs<T> p;
  PrecondDelta<T> args(Decay decay, const TensorMap<T>& in, const Config& cfg) const {
    return {decay,      qk.q,         qk.k,          in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"),
            scale_of(cfg, qk.q), in.at("g_atk"), in.at("beta_atk"), p.center, optional_input(in, "initial_A_state"),
            p.log_x,    p.eps};
  }
};
// The preconditioner and the delta core read the same normalised key: stored
// (qk_of_stored) in the chunk forms, as FLA's chunk ops hand their l2norm_fwd output to both.
template <class T>
PrecondBound<T> bind_precond(const TensorMap<T>& in, const Config& cfg, QK<T> qk) {
  PrecondArgs<T> p = precond_args(in, cfg, qk.k);
  return {std::move(qk), std::move(p)};
}
template <class T>
PrecondBound<T> bind_precond(const TensorMap<T>& in, const Config& cfg) {
  return bind_precond(in, cfg, qk_of(in, cfg));
}

// The adapter of a preconditioned delta layer with the given decay.
template <Decay kDecay>
struct precond_delta_adapter : delta_backward_forms<precond_delta_adapter<kDecay>> {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const PrecondBound<T> b = bind_precond(in, cfg);
    precond_delta_sequential<T>(b.args(kDecay, in, cfg), {out["o"], out["ht"], out["final_A_state"]});
  }

  // The backward direction, both forms (delta_backward_forms): the delta core,
  // then the preconditioner, then the L2 norm.
  template <class T, class Core>
  static void backward(const TensorMap<T>& in, const Config& cfg, const Core& core, TensorMap<T>& out) {
    const PrecondBound<T> b = bind_precond(in, cfg, qk_of(in, cfg, core));
    PrecondDeltaGrads<T> g;
    precond_delta_backward<T>(b.args(kDecay, in, cfg),
                              {in.at("do"), optional_input(in, "dht"), optional_input(in, "dfinal_A_state")}, g, core);
    qk_backward(in, cfg, g.dq, g.dk);
    out["dq"] = std::move(g.dq), out["dk"] = std::move(g.dk), out["dv"] = std::move(g.dv);
    out["dg"] = std::move(g.dg), out["dbeta"] = std::move(g.dbeta);
    out["dg_atk"] = std::move(g.dg_atk), out["dbeta_atk"] = std::move(g.dbeta_atk);
    put_if_given(in, "h0", out, std::move(g.dh0));
    put_if_given(in, "initial_A_state", out, std::move(g.dA0));
    put_if_given(in, "log_atk_scale", out, std::move(g.dlog_atk_scale));
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    const PrecondBound<A> b = bind_precond(in, cfg, qk_of_stored<P>(in, cfg));
    precond_delta_chunk<P>(b.args(kDecay, in, cfg), opt.chunk_size, {out["o"], out["ht"], out["final_A_state"]});
  }
};

}  // namespace ttr::layers
