// gka: binds LAYERS.md names and config to reference/gka/ (spec in gka.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/gka/sequential.hpp"

namespace ttr::layers {

GkaOptions gka_options(const Config& cfg);

struct gka {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
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
    gka_sequential(gi, gka_options(cfg), scale_of(cfg, qk.q), r);
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
