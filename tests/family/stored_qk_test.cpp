// The chunk forms read q and k, when use_qk_l2norm_in_kernel, as flash-linear-attention's
// chunk ops store them: normalised in fp32 by a kernel of their own (l2norm_fwd) and
// rounded to the input's dtype (oracles/layers/adapter.hpp, qk_of_stored). Without that
// rounding ttrcheck's model missed it, and FLA's fp16 chunk_precond_gated_delta_rule
// failed dbeta_atk at 16.6 (docs/validating-fla/failures.md).
//   1. qk_of_stored under the fp16 policy: every element on the fp16 grid and within half
//      an fp16 ulp (2^-11 relative) of the exact normalisation x/sqrt(‖x‖² + 1e-6),
//      computed here in double; without the flag, the inputs untouched.
//   2. The backward picks it by core: the chunkwise core reads the stored rows, the
//      sequential one (the oracle's, FLA's fused-recurrent kernels) the unrounded ones.
//   3. End to end through the registry, forward and backward, for gated_delta_rule and
//      precond_gated_delta_rule (whose preconditioner reads the key too): the fp16 chunk
//      form with the flag on gives bit for bit what it gives with the flag off on the
//      stored rows given as q and k. Every output but dq and dk (which chain the
//      normalisation's backward) is compared.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "oracles/config.hpp"
#include "oracles/layers/adapter.hpp"
#include "oracles/registry.hpp"
#include "reference/family/delta_backward_core.hpp"
#include "tests/support/make_inputs.hpp"

namespace {

using ttr::Config;
using ttr::TensorMap;
using FP16 = ttr::Mixed16Policy<ttr::FP16Format>;
constexpr const char* kFlag = "use_qk_l2norm_in_kernel";

TensorMap<float> as_float(const TensorMap<double>& in) {
  TensorMap<float> out;
  for (const auto& [name, t] : in) {
    ttr::Tensor<float> f(t.shape, 0.0f);
    for (std::size_t i = 0; i < t.data.size(); ++i) f.data[i] = static_cast<float>(t.data[i]);
    out[name] = f;
  }
  return out;
}

// x/sqrt(‖x‖² + 1e-6) row by row (rows of the last axis), in double.
ttr::Tensor<double> normalised(const ttr::Tensor<double>& x) {
  ttr::Tensor<double> y = x;
  const auto K = static_cast<std::size_t>(x.shape.back());
  for (std::size_t r = 0; r < x.data.size(); r += K) {
    double s = 0;
    for (std::size_t i = 0; i < K; ++i) s += x.data[r + i] * x.data[r + i];
    for (std::size_t i = 0; i < K; ++i) y.data[r + i] = x.data[r + i] / std::sqrt(s + 1e-6);
  }
  return y;
}

TensorMap<double> qk_inputs(std::uint64_t seed) {
  return ttr::test::gated_inputs(1, 9, 2, 8, 4, seed, {});
}

TEST(StoredQk, Fp16PolicyStoresTheNormalisedRowsRoundedToNearest) {
  const TensorMap<double> raw = qk_inputs(7101);
  const auto& layer = ttr::find_layer("gated_delta_rule");
  const TensorMap<float> in = as_float(raw);
  const auto on = ttr::layers::qk_of_stored<FP16>(in, Config::make(layer.spec, {{kFlag, "true"}}));
  const auto unrounded = ttr::layers::qk_of(in, Config::make(layer.spec, {{kFlag, "true"}}));
  for (const char* name : {"q", "k"}) {
    const ttr::Tensor<float>& got = std::string(name) == "q" ? on.q : on.k;
    const ttr::Tensor<float>& free = std::string(name) == "q" ? unrounded.q : unrounded.k;
    const ttr::Tensor<double> exact = normalised(raw.at(name));
    int moved = 0;
    for (std::size_t i = 0; i < got.data.size(); ++i) {
      SCOPED_TRACE(std::string(name) + "[" + std::to_string(i) + "]");
      EXPECT_EQ(FP16::narrow(got.data[i]), got.data[i]);  // on the fp16 grid
      // Round to nearest: within half an ulp, 2^-11 relative (plus the fp32 normalisation's own error).
      EXPECT_LE(std::fabs(got.data[i] - exact.data[i]), (0x1p-11 + 1e-6) * std::fabs(exact.data[i]) + 1e-30);
      moved += got.data[i] != free.data[i];
    }
    EXPECT_GT(moved, static_cast<int>(got.data.size()) / 2) << name << ": the rounding happened";
  }
  const auto off = ttr::layers::qk_of_stored<FP16>(in, Config::make(layer.spec, {{kFlag, "false"}}));
  EXPECT_EQ(off.q.data, in.at("q").data);
  EXPECT_EQ(off.k.data, in.at("k").data);
}

TEST(StoredQk, BackwardReadsStoredRowsAroundTheChunkCoreOnly) {
  const TensorMap<float> in = as_float(qk_inputs(7102));
  const auto& layer = ttr::find_layer("gated_delta_rule");
  const Config cfg = Config::make(layer.spec, {{kFlag, "true"}});
  const auto stored = ttr::layers::qk_of_stored<FP16>(in, cfg);
  const auto chunk = ttr::layers::qk_of(in, cfg, ttr::ChunkDeltaCore<FP16>{64});
  const auto sequential = ttr::layers::qk_of(in, cfg, ttr::SequentialDeltaCore{});
  const auto unrounded = ttr::layers::qk_of(in, cfg);
  EXPECT_EQ(chunk.q.data, stored.q.data);
  EXPECT_EQ(chunk.k.data, stored.k.data);
  EXPECT_EQ(sequential.q.data, unrounded.q.data);
  EXPECT_EQ(sequential.k.data, unrounded.k.data);
  EXPECT_NE(sequential.k.data, stored.k.data);
}

void expect_chunk_reads_stored_rows(const char* layer_name, bool atk) {
  SCOPED_TRACE(layer_name);
  const auto& layer = ttr::find_layer(layer_name);
  TensorMap<double> in = ttr::test::gated_inputs(1, 70, 2, 8, 4, 7103, {.k_lo = -0.6, .k_hi = 0.6, .atk = atk});
  in["do"] = ttr::test::uniform({1, 70, 2, 4}, 7104, -1, 1);
  const Config on = Config::make(layer.spec, {{kFlag, "true"}});
  const Config off = Config::make(layer.spec, {{kFlag, "false"}});
  // As the chunk form receives them: q and k in fp16 (policy_inputs), then normalised and stored.
  const auto stored = ttr::layers::qk_of_stored<FP16>(ttr::layers::policy_inputs<FP16>(as_float(in)), on);
  const auto unrounded = ttr::layers::qk_of(ttr::layers::policy_inputs<FP16>(as_float(in)), on);
  const auto giving = [&](const ttr::layers::QK<float>& qk) {
    TensorMap<double> g = in;
    for (std::size_t i = 0; i < qk.q.data.size(); ++i) g["q"].data[i] = qk.q.data[i];
    for (std::size_t i = 0; i < qk.k.data.size(); ++i) g["k"].data[i] = qk.k.data[i];
    return g;
  };
  const TensorMap<double> given = giving(stored);
  // What the chunk forms read before they stored the rows.
  const TensorMap<double> given_unrounded = giving(unrounded);
  const ttr::Arith fp16{ttr::Tier::fp16, 0};
  for (const auto dir : {ttr::Direction::forward, ttr::Direction::backward}) {
    const auto a = ttr::run_layer(layer, ttr::Form::chunk, fp16, in, on, 16, dir);
    const auto b = ttr::run_layer(layer, ttr::Form::chunk, fp16, given, off, 16, dir);
    int compared = 0;
    for (const auto& [name, t] : a.values) {
      if (name == "dq" || name == "dk") continue;
      EXPECT_EQ(t.data, b.values.at(name).data) << name;
      ++compared;
    }
    EXPECT_GE(compared, dir == ttr::Direction::forward ? 2 : 3);
    // The comparison can fail: the unrounded rows give other outputs (under the fp32 tier,
    // which takes its inputs as given; the fp16 tier would round them on the way in).
    const auto c = ttr::run_layer(layer, ttr::Form::chunk, {ttr::Tier::fp32, 0}, given_unrounded, off, 16, dir);
    const auto d = ttr::run_layer(layer, ttr::Form::chunk, {ttr::Tier::fp32, 0}, given, off, 16, dir);
    EXPECT_NE(c.values.at(dir == ttr::Direction::forward ? "o" : "dv").data,
              d.values.at(dir == ttr::Direction::forward ? "o" : "dv").data);
  }
}

TEST(StoredQk, ChunkFormsReadTheStoredRowsForwardAndBackward) {
  expect_chunk_reads_stored_rows("gated_delta_rule", false);
  expect_chunk_reads_stored_rows("precond_gated_delta_rule", true);
}

}  // namespace
