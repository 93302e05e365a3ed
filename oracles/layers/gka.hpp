// gka: binds the docs/layers.md names and config to reference/gka/ (spec in gka.cpp).
#pragma once

#include <utility>

#include "oracles/layers/adapter.hpp"
#include "reference/gka/chunk.hpp"
#include "reference/gka/sequential.hpp"

namespace ttr::layers {

GkaOptions gka_options(const Config& cfg);

struct gka {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    run(in, cfg, out, [](const GkaInputs<T>& gi, const GkaOptions& o, const T& scale, GkaOutputs<T>& r) {
      gka_sequential(gi, o, scale, r);
    });
  }

  // The chunkwise form (GKA §4.2) under arithmetic policy P, chunks of opt.chunk_size tokens.
  template <class P>
  static void chunk(const TensorMap<typename P::acc>& in, const Config& cfg, const RunOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using T = typename P::acc;
    run(policy_inputs<P>(in), cfg, out, [&](const GkaInputs<T>& gi, const GkaOptions& o, const T& scale, GkaOutputs<T>& r) {
      gka_chunk<P>(gi, o, scale, opt.chunk_size, r);
    });
  }

 private:
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
