// Property checks shared by the per-layer tests, run through the registry
// (ttr::run_layer) in fp64 and MPFR 256: state left unchanged by a zero step,
// exact forgetting under a tiny decay, and bit-identity of two layers on
// equivalent inputs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "tests/support/make_inputs.hpp"

namespace ttr::test {

inline const ttr::Arith kFp64AndMpfr256[] = {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}};

// ht == h0 bit for bit in fp64 and MPFR (default config).
inline void expect_state_unchanged(const char* layer_name, const TensorMap<double>& in) {
  const auto& layer = ttr::find_layer(layer_name);
  for (const ttr::Arith a : kFp64AndMpfr256) {
    const auto r = ttr::run_layer(layer, ttr::Form::sequential, a, in, ttr::Config::make(layer.spec, {}));
    EXPECT_EQ(r.values.at("ht").data, in.at("h0").data) << ttr::arith_name(a);
  }
}

// In fp64 (default config), every o_t of the full [B=1, T, H, ·] run equals the
// output of a run on token t alone (the named per-token inputs, no h0), and the
// final state equals that of the run on the last token.
inline void expect_forgets_each_token(const char* layer_name, const TensorMap<double>& in,
                                      std::initializer_list<const char*> token_inputs, std::int64_t T,
                                      std::int64_t H, std::int64_t V) {
  const auto& layer = ttr::find_layer(layer_name);
  const auto cfg = ttr::Config::make(layer.spec, {});
  const auto full = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  for (std::int64_t t = 0; t < T; ++t) {
    const auto one = token_slice(in, token_inputs, t, T);
    const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, one, cfg);
    const std::int64_t per_token = H * V;
    const std::vector<double> o_t(full.values.at("o").data.begin() + t * per_token,
                                  full.values.at("o").data.begin() + (t + 1) * per_token);
    EXPECT_EQ(o_t, r.values.at("o").data) << "token " << t;
    if (t == T - 1) {
      EXPECT_EQ(full.values.at("ht").data, r.values.at("ht").data);
    }
  }
}

// Layer a on in_a and layer b on in_b (default configs) give bit-identical outputs
// in fp64 and MPFR.
inline void expect_same_outputs(const char* layer_a, const TensorMap<double>& in_a, const char* layer_b,
                                const TensorMap<double>& in_b,
                                std::initializer_list<const char*> names = {"o", "ht"}) {
  const auto& la = ttr::find_layer(layer_a);
  const auto& lb = ttr::find_layer(layer_b);
  for (const ttr::Arith a : kFp64AndMpfr256) {
    const auto r1 = ttr::run_layer(la, ttr::Form::sequential, a, in_a, ttr::Config::make(la.spec, {}));
    const auto r2 = ttr::run_layer(lb, ttr::Form::sequential, a, in_b, ttr::Config::make(lb.spec, {}));
    for (const char* name : names)
      EXPECT_EQ(r1.values.at(name).data, r2.values.at(name).data) << name << " " << ttr::arith_name(a);
  }
}

// A per-key gate [B,T,H,K] that repeats a per-head gate [B,T,H] across the K channels.
inline Tensor<double> repeat_over_keys(const Tensor<double>& g, std::int64_t K) {
  Tensor<double> out({g.dim(0), g.dim(1), g.dim(2), K}, 0.0);
  for (std::int64_t r = 0; r < g.numel(); ++r)
    for (std::int64_t i = 0; i < K; ++i) out.data[static_cast<std::size_t>(r * K + i)] = g.data[static_cast<std::size_t>(r)];
  return out;
}

}  // namespace ttr::test
