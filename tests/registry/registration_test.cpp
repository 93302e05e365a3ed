// Adding a layer through the public registration path (docs/architecture.md,
// "How to add a layer"), exercised end to end with a test-only layer:
//
//   decayed_sum:  S_t = γ S_{t−1} + v_t,  o_t = S_t        (S ∈ R^V per (b, h); S_0 = h0 or 0)
//
// Its three implementations are written the way a real layer's are — a generic
// sequential form, a chunk form under an arithmetic policy, and the sequential
// backward — instantiated per tier with TTR_DEFINE_RUNNER and registered with
// register_layer. The test then checks what the rest of ttrcheck derives from
// that one entry: lookup, dispatch per form/direction/tier, the backward spec,
// generated inputs, and the judge's verdicts against hand-derived values.
#include <gtest/gtest.h>

#include <cmath>

#include "gate/judge.hpp"
#include "oracles/error.hpp"
#include "oracles/registry.hpp"
#include "oracles/run_layer.hpp"
#include "oracles/tiers/bf16.hpp"
#include "oracles/tiers/fp32.hpp"
#include "oracles/tiers/fp64.hpp"
#include "oracles/tiers/mca.hpp"
#include "oracles/tiers/mpfr.hpp"
#include "oracles/vectors.hpp"

namespace ttr::layers {

struct decayed_sum {
  // The definition, generic over the scalar (every tier).
  template <class T>
  static void sequential(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const Tensor<T>& v = in.at("v");
    const std::int64_t B = v.dim(0), L = v.dim(1), H = v.dim(2), V = v.dim(3);
    const T gamma = from_double<T>(cfg.number("gamma"));
    Tensor<T>& o = out["o"];
    Tensor<T>& ht = out["ht"];
    o = Tensor<T>(v.shape, from_double<T>(0.0));
    ht = Tensor<T>({B, H, V}, from_double<T>(0.0));
    const auto h0 = in.find("h0");
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t j = 0; j < V; ++j) {
          T s = h0 != in.end() ? h0->second.data[(b * H + h) * V + j] : from_double<T>(0.0);
          for (std::int64_t t = 0; t < L; ++t) {
            s = gamma * s + v.data[((b * L + t) * H + h) * V + j];
            o.data[((b * L + t) * H + h) * V + j] = s;
          }
          ht.data[(b * H + h) * V + j] = s;
        }
  }

  // The chunkwise algorithm under arithmetic policy P: within a chunk every
  // output is γ^{i+1} S_start + Σ_{s≤i} γ^{i−s} v_s (a sum a kernel evaluates in
  // parallel), the state carried across chunks; v narrowed as a kernel stores it.
  template <class P>
  static void chunk(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                    TensorMap<typename P::acc>& out) {
    using A = typename P::acc;
    TensorMap<A> in = raw;
    narrow_all<P>(in.at("v").data);
    const Tensor<A>& v = in.at("v");
    const std::int64_t B = v.dim(0), L = v.dim(1), H = v.dim(2), V = v.dim(3), C = opt.chunk_size;
    const A gamma = from_double<A>(cfg.number("gamma"));
    Tensor<A>& o = out["o"];
    Tensor<A>& ht = out["ht"];
    o = Tensor<A>(v.shape, from_double<A>(0.0));
    ht = Tensor<A>({B, H, V}, from_double<A>(0.0));
    const auto h0 = in.find("h0");
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t j = 0; j < V; ++j) {
          A start = h0 != in.end() ? h0->second.data[(b * H + h) * V + j] : from_double<A>(0.0);
          for (std::int64_t c0 = 0; c0 < L; c0 += C) {
            const std::int64_t n = std::min(C, L - c0);
            A last = start;
            for (std::int64_t i = 0; i < n; ++i) {
              A sum = from_double<A>(0.0), pw = from_double<A>(1.0);
              for (std::int64_t s = i; s >= 0; --s, pw = pw * gamma) sum = sum + pw * v.data[((b * L + c0 + s) * H + h) * V + j];
              last = pw * start + sum;
              o.data[((b * L + c0 + i) * H + h) * V + j] = last;
            }
            start = last;
          }
          ht.data[(b * H + h) * V + j] = start;
        }
  }

  // The backward direction: dv_t = Σ_{s≥t} γ^{s−t} do_s + γ^{T−1−t} dht (the
  // adjoint recursion λ_t = γ λ_{t+1} + do_t, λ_{T−1} = do_{T−1} + dht), and
  // dh0 = γ λ_0.
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    const Tensor<T>& dout = in.at("do");
    const std::int64_t B = dout.dim(0), L = dout.dim(1), H = dout.dim(2), V = dout.dim(3);
    const T gamma = from_double<T>(cfg.number("gamma"));
    Tensor<T>& dv = out["dv"];
    dv = Tensor<T>(dout.shape, from_double<T>(0.0));
    const bool has_h0 = in.count("h0") != 0;
    Tensor<T> dh0({B, H, V}, from_double<T>(0.0));
    const auto dht = in.find("dht");
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t j = 0; j < V; ++j) {
          T lambda = dht != in.end() ? dht->second.data[(b * H + h) * V + j] : from_double<T>(0.0);
          for (std::int64_t t = L - 1; t >= 0; --t) {
            lambda = lambda + dout.data[((b * L + t) * H + h) * V + j];
            dv.data[((b * L + t) * H + h) * V + j] = lambda;
            lambda = gamma * lambda;
          }
          dh0.data[(b * H + h) * V + j] = lambda;
        }
    if (has_h0) out["dh0"] = std::move(dh0);
  }
};

}  // namespace ttr::layers

TTR_DEFINE_RUNNER(decayed_sum, sequential, forward, fp32)
TTR_DEFINE_RUNNER(decayed_sum, sequential, forward, fp64)
TTR_DEFINE_RUNNER(decayed_sum, sequential, forward, mpfr)
TTR_DEFINE_RUNNER(decayed_sum, chunk, forward, fp32)
TTR_DEFINE_RUNNER(decayed_sum, chunk, forward, bf16)
TTR_DEFINE_RUNNER(decayed_sum, chunk, forward, mca)
TTR_DEFINE_RUNNER(decayed_sum, sequential, backward, fp32)
TTR_DEFINE_RUNNER(decayed_sum, sequential, backward, mpfr)
TTR_DEFINE_RUNNER(decayed_sum, sequential, backward, mca)

namespace ttr::test {
namespace {

LayerSpec decayed_sum_spec() {
  LayerSpec s;
  s.name = "decayed_sum";
  s.summary = "test-only: a decayed running sum of the values";
  s.recurrence = "S_t = γ S_{t−1} + v_t;  o_t = S_t";
  s.inputs = {{"v", {"B", "T", "H", "V"}, true, Range::any(), Role::value, "values"},
              {"h0", {"B", "H", "V"}, false, Range::any(), Role::state, "initial state (default 0)"}};
  s.outputs = {{"o", {"B", "T", "H", "V"}, true, Range::any(), Role::value, "outputs o_t = S_t"},
               {"ht", {"B", "H", "V"}, true, Range::any(), Role::state, "final state"}};
  s.config = {{"gamma", KeyType::number, "0.9", false, Range::closed(0.0, 1.0), {}, "decay γ"}};
  return s;
}

// The one registration: spec, forms per direction and tier (absent tiers left
// empty: run_layer refuses them with an InputError), no device kernels.
LayerEntry decayed_sum_entry() {
  using namespace runners;
  LayerEntry entry;
  entry.spec = decayed_sum_spec();
  entry.spec.family = "test";
  const auto tier = [](Tier t) { return static_cast<std::size_t>(t); };
  FormImpl seq{Form::sequential, Direction::forward, {}};
  seq.runners[tier(Tier::fp32)] = &decayed_sum__sequential__forward::fp32;
  seq.runners[tier(Tier::fp64)] = &decayed_sum__sequential__forward::fp64;
  seq.runners[tier(Tier::mpfr)] = &decayed_sum__sequential__forward::mpfr;
  FormImpl chunk{Form::chunk, Direction::forward, {}};
  chunk.runners[tier(Tier::fp32)] = &decayed_sum__chunk__forward::fp32;
  chunk.runners[tier(Tier::bf16)] = &decayed_sum__chunk__forward::bf16;
  chunk.runners[tier(Tier::mca)] = &decayed_sum__chunk__forward::mca;
  FormImpl back{Form::sequential, Direction::backward, {}};
  back.runners[tier(Tier::fp32)] = &decayed_sum__sequential__backward::fp32;
  back.runners[tier(Tier::mpfr)] = &decayed_sum__sequential__backward::mpfr;
  back.runners[tier(Tier::mca)] = &decayed_sum__sequential__backward::mca;
  entry.forms = {seq, chunk, back};
  return entry;
}

// The layer lives in the registry for this suite only, so that tests iterating
// over every layer in the same process never see it.
class Registration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_layer(decayed_sum_entry()); }
  static void TearDownTestSuite() { unregister_layer("decayed_sum"); }
};

const LayerEntry& decayed_sum() { return find_layer("decayed_sum"); }

TensorMap<double> inputs(std::int64_t B, std::int64_t L, std::int64_t H, std::int64_t V, bool with_h0,
                         std::uint64_t seed) {
  VectorCase c{"t", "", {{"B", B}, {"T", L}, {"H", H}, {"V", V}}, {}, {}};
  c.regime.optional_inputs = with_h0;
  return generate_inputs(decayed_sum().spec, c, seed);
}

TEST_F(Registration, TheRegistryFindsTheLayerAndItsImplementations) {
  const LayerEntry& e = decayed_sum();
  EXPECT_EQ(&find_layer("decayed_sum"), &registry().back());
  EXPECT_EQ(e.form_list(), (std::vector<Form>{Form::sequential, Form::chunk}));
  EXPECT_EQ(e.form_list(Direction::backward), (std::vector<Form>{Form::sequential}));
  EXPECT_TRUE(e.kernel_list(Backend::cuda).empty());
  EXPECT_THROW(register_layer(LayerEntry{decayed_sum_spec(), {}, {}}), InputError);  // the name is taken
  EXPECT_THROW(unregister_layer("gated_delta_rule"), std::logic_error);             // declared layers stay
  // A form it lacks, and a tier it left out, are refused with a line naming them.
  const Config cfg = Config::make(e.spec, {});
  const TensorMap<double> in = inputs(1, 5, 1, 2, false, 1);
  try {
    run_layer(e, Form::scan, {Tier::fp64, 0}, in, cfg);
    FAIL() << "no scan form";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("has no scan form"), std::string::npos) << err.what();
  }
  EXPECT_THROW(run_layer(e, Form::sequential, {Tier::mpfi, 64}, in, cfg), InputError);
}

TEST_F(Registration, ForwardFormsComputeTheHandDerivedValues) {
  const LayerEntry& e = decayed_sum();
  const Config cfg = Config::make(e.spec, {{"gamma", "0.5"}});
  TensorMap<double> in;
  in["v"] = Tensor<double>({1, 3, 1, 1}, 0.0);
  in["v"].data = {1.0, 2.0, 4.0};
  in["h0"] = Tensor<double>({1, 1, 1}, 8.0);
  // S_1 = 0.5·8 + 1 = 5, S_2 = 2.5 + 2 = 4.5, S_3 = 2.25 + 4 = 6.25 (exact in binary).
  for (const auto& [form, arith] : {std::pair{Form::sequential, Arith{Tier::fp64, 0}},
                                    std::pair{Form::sequential, Arith{Tier::mpfr, 128}},
                                    std::pair{Form::chunk, Arith{Tier::fp32, 0}}}) {
    const LayerResult r = run_layer(e, form, arith, in, cfg, 2);
    EXPECT_EQ(r.values.at("o").data, (std::vector<double>{5.0, 4.5, 6.25})) << form_name(form);
    EXPECT_EQ(r.values.at("ht").data, (std::vector<double>{6.25})) << form_name(form);
  }
}

TEST_F(Registration, TheJudgePassesTheChunkFormAndFailsAPlantedError) {
  const LayerEntry& e = decayed_sum();
  const Config cfg = Config::make(e.spec, {});
  const TensorMap<double> in = inputs(2, 37, 2, 8, true, 7);
  ModelSpec ms;
  ms.form = Form::chunk;
  ms.dtype = Tier::bf16;
  ms.chunk_size = 8;
  Judge judge(e, in, cfg, {Tier::mpfr, 128});
  const TensorMap<double> good = run_layer(e, Form::chunk, {Tier::bf16, 0}, in, cfg, 8).values;
  const CheckResult pass = judge(good, ms);
  EXPECT_TRUE(pass.pass);
  TensorMap<double> bad = good;
  // One element of row (b=1, t=20, h=1) off by 2 (|S| ~ 2.3, bf16 bound ~ 0.04 a row).
  bad.at("o").data[((1 * 37 + 20) * 2 + 1) * 8 + 3] += 2.0;
  const CheckResult fail = judge(bad, ms);
  ASSERT_FALSE(fail.pass);
  EXPECT_EQ(fail.tensors.at(0).name, "o");
  EXPECT_EQ(fail.tensors.at(0).worst.b, 1);
  EXPECT_EQ(fail.tensors.at(0).worst.t, 20);
  EXPECT_EQ(fail.tensors.at(0).worst.h, 1);
}

TEST_F(Registration, TheBackwardDirectionIsDerivedAndJudged) {
  const LayerEntry& e = decayed_sum();
  const LayerSpec b = backward_spec(e.spec);
  // Inputs: the forward inputs, then the cotangents (do required, dht optional).
  ASSERT_TRUE(b.input("do") && b.input("dht"));
  EXPECT_TRUE(b.input("do")->required);
  EXPECT_FALSE(b.input("dht")->required);
  EXPECT_EQ(b.input("do")->dims, e.spec.output("o")->dims);
  // Outputs: a gradient per differentiable input, with the input's dims.
  ASSERT_EQ(b.outputs.size(), 2u);
  EXPECT_EQ(b.outputs[0].name, "dv");
  EXPECT_EQ(b.outputs[1].name, "dh0");
  EXPECT_EQ(b.output("dh0")->dims, e.spec.input("h0")->dims);

  const double gamma = 0.75;
  const Config cfg = Config::make(e.spec, {{"gamma", "0.75"}});
  TensorMap<double> in = inputs(1, 9, 2, 3, true, 3);
  in["do"] = inputs(1, 9, 2, 3, false, 4).at("v");
  in["dht"] = Tensor<double>({1, 2, 3}, 0.0);
  for (std::size_t i = 0; i < in["dht"].data.size(); ++i) in["dht"].data[i] = 0.125 * static_cast<double>(i + 1);
  // Hand-derived: dv_t = Σ_{s≥t} γ^{s−t} do_s + γ^{T−1−t} dht; dh0 = γ Σ_s γ^s do_s + γ^T dht.
  Tensor<double> dv({1, 9, 2, 3}, 0.0), dh0({1, 2, 3}, 0.0);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t j = 0; j < 3; ++j) {
      const double dT = in["dht"].data[h * 3 + j];
      for (std::int64_t t = 0; t < 9; ++t) {
        double x = std::pow(gamma, 8 - t) * dT;
        for (std::int64_t s = t; s < 9; ++s) x += std::pow(gamma, s - t) * in["do"].data[(s * 2 + h) * 3 + j];
        dv.data[(t * 2 + h) * 3 + j] = x;
      }
      dh0.data[h * 3 + j] = gamma * dv.data[(0 * 2 + h) * 3 + j];
    }
  Judge judge(e, in, cfg, {Tier::mpfr, 128}, Direction::backward);
  const TensorMap<double>& oracle = judge.oracle();
  for (std::size_t i = 0; i < dv.data.size(); ++i) EXPECT_NEAR(oracle.at("dv").data[i], dv.data[i], 1e-14);
  for (std::size_t i = 0; i < dh0.data.size(); ++i) EXPECT_NEAR(oracle.at("dh0").data[i], dh0.data[i], 1e-14);
  // An fp32 backward passes under the model of its own rounding; a dropped dht does not.
  ModelSpec ms;
  ms.form = Form::sequential;
  ms.direction = Direction::backward;
  ms.dtype = Tier::fp32;
  const TensorMap<double> good = run_layer(e, Form::sequential, {Tier::fp32, 0}, in, cfg, 64, Direction::backward).values;
  EXPECT_TRUE(judge(good, ms).pass);
  TensorMap<double> no_dht = in;
  no_dht.erase("dht");
  const TensorMap<double> bad =
      run_layer(e, Form::sequential, {Tier::fp32, 0}, no_dht, cfg, 64, Direction::backward).values;
  const CheckResult r = judge(bad, ms);
  EXPECT_FALSE(r.pass);
}

}  // namespace
}  // namespace ttr::test
