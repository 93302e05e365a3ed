// kla_kalman: binds the docs/layers.md names to reference/kla_kalman/ (spec in kla_kalman.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kla_kalman/backward.hpp"
#include "reference/kla_kalman/scaled_scan.hpp"
#include "reference/kla_kalman/scan_backward.hpp"
#include "reference/kla_kalman/scan.hpp"
#include "reference/kla_kalman/sequential.hpp"

namespace ttr::layers {

struct kla_kalman {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    KlaOutputs<T> r;
    kla_kalman_sequential(inputs_of(in), from_double<T>(cfg.number("lambda0")), from_double<T>(cfg.number("scale")), r);
    emit(r, out);
  }

  // The backward direction: the hand-derived adjoint of the sequential form.
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    KlaGrads<T> g;
    kla_kalman_backward(inputs_of(in), from_double<T>(cfg.number("lambda0")), from_double<T>(cfg.number("scale")),
                        KlaCotangents<T>{in.at("do"), optional_input(in, "do_var"), optional_input(in, "dlambda_T"),
                                         optional_input(in, "deta_T")},
                        g);
    emit_grads(in, g, out);
  }

  // Backward forms `scan` and `chunk`: reverse mode of the scaled scans (the forward's
  // prefixes give the states, the adjoints are two reversed prefix scans;
  // reference/kla_kalman/scan_backward.hpp), one Blelloch tree or chunks of opt.chunk_size.
  template <class P>
  static void scan_backward(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions&,
                            TensorMap<typename P::acc>& out) {
    run_scan_backward<P>(in, cfg, ScanPlan::whole_sequence(), out);
  }
  template <class P>
  static void chunk_backward(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions& opt,
                             TensorMap<typename P::acc>& out) {
    run_scan_backward<P>(in, cfg, ScanPlan::chunked(opt.chunk_size), out);
  }

  // Form `scan`: Möbius and affine prefix scans, one Blelloch tree over the sequence
  // (KLA-K Cor. 1.1, 2.1), in the scaled representation that cannot overflow
  // (reference/kla_kalman/scaled_scan.hpp; it narrows under P itself).
  template <class P>
  static void scan(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions&,
                   TensorMap<typename P::acc>& out) {
    run_scan<P>(in, cfg, ScanPlan::whole_sequence(), kla_kalman_scaled_forward<P>, out);
  }

  // Form `chunk`: the same scans, two-level with chunks of opt.chunk_size tokens.
  template <class P>
  static void chunk(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    run_scan<P>(in, cfg, ScanPlan::chunked(opt.chunk_size), kla_kalman_scaled_forward<P>, out);
  }

  // Forms `scan_unscaled`, `chunk_unscaled`: the same scans with Λ and η as plain
  // numbers, as the paper writes them (reference/kla_kalman/scan.hpp): overflow
  // where p̄ = 0 and ā is small; kept for comparison.
  template <class P>
  static void scan_unscaled(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions&,
                            TensorMap<typename P::acc>& out) {
    run_scan<P>(in, cfg, ScanPlan::whole_sequence(), kla_kalman_scan_forward<P>, out);
  }
  template <class P>
  static void chunk_unscaled(const TensorMap<typename P::acc>& in, const Config& cfg, const FormOptions& opt,
                             TensorMap<typename P::acc>& out) {
    run_scan<P>(in, cfg, ScanPlan::chunked(opt.chunk_size), kla_kalman_scan_forward<P>, out);
  }

 private:
  template <class P>
  static void run_scan_backward(const TensorMap<typename P::acc>& in, const Config& cfg, const ScanPlan& plan,
                                TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    KlaGrads<A> g;
    kla_kalman_scaled_backward<P>(inputs_of(in), from_double<A>(cfg.number("lambda0")),
                                  from_double<A>(cfg.number("scale")),
                                  KlaCotangents<A>{in.at("do"), optional_input(in, "do_var"),
                                                   optional_input(in, "dlambda_T"), optional_input(in, "deta_T")},
                                  plan, g);
    emit_grads(in, g, out);
  }
  template <class T>
  static void emit_grads(const TensorMap<T>& in, KlaGrads<T>& g, TensorMap<T>& out) {
    out["dq"] = std::move(g.dq), out["dk"] = std::move(g.dk), out["dv"] = std::move(g.dv);
    out["dlambda_v"] = std::move(g.dlambda_v), out["da_bar"] = std::move(g.da_bar), out["dp_bar"] = std::move(g.dp_bar);
    put_if_given(in, "lambda_init", out, std::move(g.dlambda_init));
    put_if_given(in, "eta_init", out, std::move(g.deta_init));
  }
  template <class P, class Forward>
  static void run_scan(const TensorMap<typename P::acc>& in, const Config& cfg, const ScanPlan& plan,
                       Forward forward, TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    KlaOutputs<A> r;
    forward(inputs_of(in), from_double<A>(cfg.number("lambda0")), from_double<A>(cfg.number("scale")), plan, r);
    emit(r, out);
  }
  template <class T>
  static KlaInputs<T> inputs_of(const TensorMap<T>& in) {
    return {in.at("q"),     in.at("k"),     in.at("v"),
            in.at("lambda_v"), in.at("a_bar"), in.at("p_bar"),
            optional_input(in, "lambda_init"), optional_input(in, "eta_init")};
  }
  template <class T>
  static void emit(KlaOutputs<T>& r, TensorMap<T>& out) {
    out["o"] = std::move(r.o);
    out["o_var"] = std::move(r.o_var);
    out["lambda_T"] = std::move(r.lambda_T);
    out["eta_T"] = std::move(r.eta_T);
  }
};

}  // namespace ttr::layers
