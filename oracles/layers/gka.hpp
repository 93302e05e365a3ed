// gka: binds the docs/layers.md names and config to reference/gka/ (spec in gka.cpp).
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "oracles/layers/adapter.hpp"
#include "reference/gka/backward.hpp"
#include "reference/gka/chunk.hpp"
#include "reference/gka/chunk_backward.hpp"
#include "oracles/error.hpp"
#include "reference/gka/sequential.hpp"

namespace ttr::layers {

GkaOptions gka_options(const Config& cfg);

struct gka {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    certifiable_or_refuse<T>(cfg, [&] {
      run(in, cfg, out, [](const GkaInputs<T>& gi, const GkaOptions& o, const T& scale, GkaOutputs<T>& r) {
        gka_sequential(gi, o, scale, r);
      });
    });
  }

  // The backward direction: the exact solve by implicit differentiation (GKA
  // eq. (6), Lemma 1), Chebyshev by the reverse pass over its stored iterates or by
  // GKA Alg. 2 as derived (chebyshev_backward), CG by reverse mode over its
  // recorded iterates, with the gradient through λ_t = a‖H_t‖_F
  // (reference/gka/backward.hpp).
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const GkaOptions o = gka_options(cfg);
    const QK<T> qk = qk_of(in, cfg);
    const GkaInputs<T> gi{qk.q, qk.k, in.at("v"), in.at("g"), optional_input(in, "beta"), optional_input(in, "alpha"),
                          optional_input(in, "h0"), optional_input(in, "hkk0")};
    GkaGrads<T> g;
    GkaBackwardOptions bo;
    bo.chebyshev = cfg.text("chebyshev_backward") == "alg2" ? GkaChebyshevBackward::alg2 : GkaChebyshevBackward::unrolled;
    certifiable_or_refuse<T>(cfg, [&] {
      gka_backward(gi, o, scale_of(cfg, qk.q),
                   GkaCotangents<T>{in.at("do"), optional_input(in, "dht"), optional_input(in, "dhkk")}, g, bo);
      if constexpr (is_interval_v<T>)
        if (o.solver == GkaSolver::cg)
          for (const auto* gt : {&g.dq, &g.dk, &g.dv, &g.dg})
            for (const T& e : gt->data)
              if (!std::isfinite(scalar_traits<T>::lower(e)) || !std::isfinite(scalar_traits<T>::upper(e)))
                throw std::runtime_error("a gradient's enclosure is unbounded");
    });
    emit_grads(in, cfg, g, out);
  }

  // The chunkwise form (GKA §4.2) under arithmetic policy P, chunks of opt.chunk_size tokens.
  template <class P>
  static void chunk(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using T = typename P::acc;
    run(policy_inputs<P>(in), cfg, out, [&](const GkaInputs<T>& gi, const GkaOptions& o, const T& scale, GkaOutputs<T>& r) {
      gka_chunk<P>(gi, o, scale, opt.chunk_size, r);
    });
  }

  // The chunkwise backward (reference/gka/chunk_backward.hpp) under arithmetic policy
  // P: the chunk form's adjoint, chunk by chunk from the last, the Chebyshev solve by
  // GKA Alg. 2 as derived for all tokens of a chunk at once, with the gradient
  // through λ_t = a‖H_t‖_F by eq. (5)'s adjoint (TTR_FORM(gka, chunk, backward);
  // docs/gradients.md, "GKA's chunk backward").
  template <class P>
  static void chunk_backward(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                             TensorMap<typename P::acc>& out) {
    using T = typename P::acc;
    const TensorMap<T> in = policy_inputs<P>(raw);
    const GkaOptions o = gka_options(cfg);
    const QK<T> qk = qk_of(in, cfg);
    const GkaInputs<T> gi{qk.q, qk.k, in.at("v"), in.at("g"), optional_input(in, "beta"), optional_input(in, "alpha"),
                          optional_input(in, "h0"), optional_input(in, "hkk0")};
    GkaGrads<T> g;
    certifiable_or_refuse<T>(cfg, [&] {
      gka_chunk_backward<P>(gi, o, scale_of(cfg, qk.q), opt.chunk_size,
                            GkaCotangents<T>{in.at("do"), optional_input(in, "dht"), optional_input(in, "dhkk")}, g);
    });
    emit_grads(in, cfg, g, out);
  }

 private:
  // The gradients by name: the L2 norm of q and k chained (qk_backward), the
  // optional inputs' gradients where the inputs were given.
  template <class T>
  static void emit_grads(const TensorMap<T>& in, const Config& cfg, GkaGrads<T>& g, TensorMap<T>& out) {
    qk_backward(in, cfg, g.dq, g.dk);
    out["dq"] = std::move(g.dq), out["dk"] = std::move(g.dk), out["dv"] = std::move(g.dv), out["dg"] = std::move(g.dg);
    put_if_given(in, "beta", out, std::move(g.dbeta));
    put_if_given(in, "alpha", out, std::move(g.dalpha));
    put_if_given(in, "h0", out, std::move(g.dh0));
    // hkk0 is a symmetric input: its gradient is that of f((H0 + H0ᵀ)/2), the
    // symmetric part (G + Gᵀ)/2 of the adjoint's general-matrix gradient, which
    // does not depend on which triangle the solve reads.
    if (in.count("hkk0")) {
      Tensor<T>& d = g.dhkk0;
      const std::int64_t K = d.dim(3), blocks = d.numel() / (K * K);
      for (std::int64_t b = 0; b < blocks; ++b)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < i; ++j) {
            T& x = d.data[(b * K + i) * K + j];
            T& y = d.data[(b * K + j) * K + i];
            const T m = (x + y) / from_double<T>(2.0);
            x = m;
            y = m;
          }
    }
    put_if_given(in, "hkk0", out, std::move(g.dhkk0));
  }

  // CG divides by ‖r_i‖² and p_iᵀAp_i and branches on them (rr ≠ 0, pᵀAp = 0). In
  // interval arithmetic every CG step widens the enclosures (the dependency
  // problem: the same r_i, p_i enter numerators and divisors), so on all but short
  // runs a divisor's enclosure comes to contain 0: the branch is undecidable
  // (conjugate_gradient throws, cg_divisor_is_zero) or a quotient unbounded. Then no
  // enclosure exists to write: refuse with one line (exit 2) instead of aborting or
  // writing [−∞, ∞]. Exact and Chebyshev divide only by the data-independent L + μ
  // and by Cholesky pivots, and are unaffected.
  template <class T, class Fn>
  static void certifiable_or_refuse(const Config& cfg, Fn&& fn) {
    if constexpr (is_interval_v<T>) {
      if (gka_options(cfg).solver == GkaSolver::cg) {
        try {
          fn();
        } catch (const InputError&) {
          throw;
        } catch (const std::runtime_error& e) {
          throw InputError(std::string("gka --certified with solver=cg: no enclosure (") + e.what() +
                           "): CG's divisions by ‖r_i‖² and p_iᵀAp_i widen the intervals by about κ per step until "
                           "a divisor's enclosure contains 0; use fewer iters or tokens, more --bits, or solver=exact|"
                           "chebyshev");
        }
        return;
      }
    }
    fn();
  }

  // Binds the named tensors and config to a form's arguments and its results to names.
  template <class T, class Form>
  static void run(const TensorMap<T>& in, const Config& cfg, TensorMap<T>& out, Form&& form) {
    const QK<T> qk = qk_of(in, cfg);
    const GkaInputs<T> gi{qk.q,
                          qk.k,
                          in.at("v"),
                          in.at("g"),
                          optional_input(in, "beta"),
                          optional_input(in, "alpha"),
                          optional_input(in, "h0"),
                          optional_input(in, "hkk0")};
    GkaOutputs<T> r;
    form(gi, gka_options(cfg), scale_of(cfg, qk.q), r);
    out["o"] = std::move(r.o);
    out["ht"] = std::move(r.ht);
    out["hkk"] = std::move(r.hkk);
    out["lambda"] = std::move(r.lambda);
    out["fro"] = std::move(r.fro);
    out["kappa"] = std::move(r.kappa);
    out["resid"] = std::move(r.resid);
  }
};

}  // namespace ttr::layers
