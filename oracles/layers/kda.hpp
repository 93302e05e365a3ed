// kda: binds the docs/layers.md names to reference/kda/ (spec in kda.cpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/kda/chunk.hpp"
#include "reference/kda/sequential.hpp"

namespace ttr::layers {

struct kda {
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const RunOptions&, TensorMap<T>& out) {
    const QK<T> qk = qk_of(in, cfg);
    kda_sequential(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"), scale_of(cfg, qk.q), out["o"], out["ht"]);
  }

  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const RunOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    const TensorMap<A> in = policy_inputs<P>(raw);
    const QK<A> qk = qk_of(in, cfg);
    kda_chunk<P>(qk.q, qk.k, in.at("v"), in.at("g"), in.at("beta"), optional_input(in, "h0"), scale_of(cfg, qk.q),
                 opt.chunk_size, out["o"], out["ht"]);
  }
};

}  // namespace ttr::layers
