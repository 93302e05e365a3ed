// Varlen batches (cu_seqlens, docs/varlen.md) and the slicer (oracles/slices.hpp),
// against independent expectations:
//  * a varlen batch equals, bit for bit, each sequence run on its own as a B = 1
//    problem, its tensors cut out here by hand (contiguous blocks of the packed
//    row) and run by the layer's runner directly — every layer, form, direction,
//    and the tiers fp64, bf16, mca (unperturbed) and MPFR (the oracle);
//  * empty sequences emit nothing and give ht = h0 (dh0 = dht backward);
//  * every layer's heads and batch rows are independent: split runs equal the
//    whole-batch run bit for bit, and so do 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/varlen.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/mca.hpp"
#include "tests/support/bytes.hpp"

namespace ttr::test {
namespace {

// Boundaries at the chunk edge 4 and one past it, an empty and a one-token
// sequence, a sequence of two full chunks and a last partial one (T = 22, not a
// multiple of C = 4).
const std::vector<std::int64_t> kCu = {0, 4, 5, 5, 13, 22};
constexpr int kChunk = 4;

VectorCase varlen_case(std::vector<std::int64_t> cu, std::int64_t H = 2) {
  Regime r;
  r.optional_inputs = true;
  r.cu_seqlens = cu;
  const std::int64_t T = cu.back();
  return {"varlen_test", "", {{"B", 1}, {"T", T}, {"H", H}, {"K", 4}, {"V", 3}, {"N", 4}, {"D", 3}}, r, {}};
}

Config config_of(const LayerSpec& spec) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (const auto& key : spec.config)
    if (key.required && key.example) kv.push_back({key.name, *key.example});
  return Config::make(spec, kv);
}

bool same_bits(const Tensor<double>& a, const Tensor<double>& b) {
  return a.shape == b.shape && same_bytes(a.data.data(), b.data.data(), a.data.size() * sizeof(double));
}

// Sequence n's own inputs: per-token tensors are rows [cu[n], cu[n+1]) of the
// packed row (a contiguous block, B = 1), per-sequence tensors row n (a
// contiguous block), everything else whole; cu_seqlens dropped.
TensorMap<double> own_inputs(const LayerSpec& spec, const TensorMap<double>& in, const std::vector<std::int64_t>& cu,
                             std::size_t n) {
  TensorMap<double> out;
  for (const auto& [name, t] : in) {
    if (name == kCuSeqlens) continue;
    const TensorSpec* ts = spec.input(name);
    if (!ts) throw std::logic_error("no spec for input " + name);
    if (ts->dims.size() >= 2 && ts->dims[0] == "B" && ts->dims[1] == "T") {
      const std::int64_t row = t.numel() / t.shape[1];  // elements per token
      Tensor<double> s;
      s.shape = t.shape;
      s.shape[1] = cu[n + 1] - cu[n];
      s.data.assign(t.data.begin() + cu[n] * row, t.data.begin() + cu[n + 1] * row);
      out.emplace(name, std::move(s));
    } else if (!ts->dims.empty() && ts->dims[0] == "B") {
      const std::int64_t row = t.numel() / t.shape[0];
      Tensor<double> s;
      s.shape = t.shape;
      s.shape[0] = 1;
      s.data.assign(t.data.begin() + static_cast<std::int64_t>(n) * row,
                    t.data.begin() + static_cast<std::int64_t>(n + 1) * row);
      out.emplace(name, std::move(s));
    } else {
      out.emplace(name, t);
    }
  }
  return out;
}

// The varlen result must hold each sequence's own result in its place: per-token
// outputs at rows [cu[n], cu[n+1]), per-sequence outputs at row n, per-head
// outputs (gradients of shared tensors) the sum over sequences in order.
void expect_equals_own_runs(const LayerSpec& spec, LayerRunner run, const TensorMap<double>& in, const Config& cfg,
                            const FormOptions& opt, const TensorMap<double>& got, const std::vector<std::int64_t>& cu) {
  std::map<std::string, Tensor<double>> summed;
  for (std::size_t n = 0; n + 1 < cu.size(); ++n) {
    SCOPED_TRACE("sequence " + std::to_string(n));
    const LayerResult own = run(own_inputs(spec, in, cu, n), cfg, opt);
    for (const auto& [name, t] : own.values) {
      const TensorSpec* ts = spec.output(name);
      ASSERT_NE(ts, nullptr) << name;
      ASSERT_TRUE(got.count(name)) << name;
      const Tensor<double>& g = got.at(name);
      if (ts->dims.size() >= 2 && ts->dims[0] == "B" && ts->dims[1] == "T") {
        const std::int64_t row = g.numel() / g.shape[1];
        ASSERT_EQ(t.numel(), (cu[n + 1] - cu[n]) * row) << name;
        EXPECT_TRUE(same_bytes(t.data.data(), g.data.data() + cu[n] * row, t.data.size() * sizeof(double))) << name;
      } else if (ts->dims[0] == "B") {
        const std::int64_t row = g.numel() / g.shape[0];
        ASSERT_EQ(g.shape[0], static_cast<std::int64_t>(cu.size()) - 1) << name;
        ASSERT_EQ(t.numel(), row) << name;
        EXPECT_EQ(std::memcmp(t.data.data(), g.data.data() + static_cast<std::int64_t>(n) * row, row * sizeof(double)),
                  0)
            << name;
      } else {
        auto [it, fresh] = summed.try_emplace(name, t);
        if (!fresh)
          for (std::size_t i = 0; i < t.data.size(); ++i) it->second.data[i] += t.data[i];
      }
    }
  }
  for (const auto& [name, s] : summed) EXPECT_TRUE(same_bits(got.at(name), s)) << name << " (sum over sequences)";
}

TensorMap<double> inputs_for(const LayerSpec& fwd, Direction d, const VectorCase& c) {
  return d == Direction::forward ? generate_inputs(fwd, c, 7) : generate_backward_inputs(fwd, c, 7);
}

TEST(Varlen, EveryLayerFormAndDirectionEqualsItsSequencesRunAlone) {
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);  // the mca tier unperturbed: a deterministic function
  int checked = 0;
  for (const LayerEntry& e : registry()) {
    const Config cfg = config_of(e.spec);
    for (Direction d : {Direction::forward, Direction::backward})
      for (Form f : e.form_list(d)) {
        const LayerSpec spec = direction_spec(e.spec, d);
        const TensorMap<double> in = inputs_for(e.spec, d, varlen_case(kCu));
        ASSERT_TRUE(in.count(kCuSeqlens));
        for (Tier tier : {Tier::fp64, Tier::bf16, Tier::mca, Tier::mpfr}) {
          if (tier == Tier::mpfr && f != Form::sequential) continue;  // the oracle's form
          SCOPED_TRACE(e.spec.name + " " + form_name(f) + " " + direction_name(d) + " " + tier_name(tier));
          FormOptions opt;
          opt.bits = 64;
          opt.chunk_size = kChunk;
          const LayerResult got = run_layer(e, f, {tier, 64}, in, cfg, kChunk, d);
          expect_equals_own_runs(spec, e.runner(f, tier, d), in, cfg, opt, got.values, kCu);
          // The oracle's way (every (sequence, head) its own run, two threads) too.
          SliceOptions split;
          split.split = true;
          split.threads = 2;
          const LayerResult par = run_layer_sliced(e, f, {tier, 64}, in, cfg, kChunk, d, split);
          for (const auto& [name, t] : got.values) EXPECT_TRUE(same_bits(par.values.at(name), t)) << name;
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 100);
}

// Empty sequences emit no token; their final state is their initial state, and
// backward their dh0 is their dht — the layer's own T = 0 result.
TEST(Varlen, EmptySequencesPassTheStateThrough) {
  const std::vector<std::int64_t> cu = {0, 0, 6, 6, 9, 9};
  for (const char* name : {"gated_delta_rule", "simple_gla", "gka", "kla_kalman"}) {
    SCOPED_TRACE(name);
    const LayerEntry& e = find_layer(name);
    const Config cfg = config_of(e.spec);
    const TensorMap<double> in = generate_backward_inputs(e.spec, varlen_case(cu), 3);
    // In MPFR: the identity is exact; rounded to double it gives back the double
    // inputs (KLA-K's fp64 backward rounds its T = 0 rescaling by an ulp).
    const LayerResult fwd = run_layer(e, Form::sequential, {Tier::mpfr, 128}, in, cfg, 64, Direction::forward);
    const LayerResult bwd = run_layer(e, Form::sequential, {Tier::mpfr, 128}, in, cfg, 64, Direction::backward);
    // State pairs (initial input, final output) by the layer's names.
    const std::vector<std::pair<std::string, std::string>> pairs =
        e.spec.input("h0") ? std::vector<std::pair<std::string, std::string>>{{"h0", "ht"}}
                           : std::vector<std::pair<std::string, std::string>>{{"eta_init", "eta_T"},
                                                                             {"lambda_init", "lambda_T"}};
    for (const auto& [init, fin] : pairs) {
      const Tensor<double>& a = in.at(init);
      const Tensor<double>& b = fwd.values.at(fin);
      ASSERT_EQ(a.shape, b.shape);
      const std::int64_t row = a.numel() / a.shape[0];
      for (std::int64_t n : {0, 2, 4}) {  // the empty ones
        EXPECT_EQ(std::memcmp(a.data.data() + n * row, b.data.data() + n * row, row * sizeof(double)), 0)
            << fin << " of empty sequence " << n;
        const Tensor<double>& dt = in.at("d" + fin);
        const Tensor<double>& d0 = bwd.values.at("d" + init);
        EXPECT_EQ(std::memcmp(dt.data.data() + n * row, d0.data.data() + n * row, row * sizeof(double)), 0)
            << "d" << init << " of empty sequence " << n;
      }
      EXPECT_NE(std::memcmp(a.data.data() + row, b.data.data() + row, row * sizeof(double)), 0)
          << "a non-empty sequence changes its state";
    }
    EXPECT_EQ(fwd.values.at("o").shape[1], 9);
  }
}

// Heads and batch rows are independent in every layer: the slicer's split runs
// (one per (row, head)) equal the whole batch bit for bit, on 1, 2 or 3 threads.
// This is what licenses the parallel oracle and model.
TEST(Slices, HeadsAndRowsAreIndependentInEveryLayer) {
  for (const LayerEntry& e : registry())
    for (Direction d : {Direction::forward, Direction::backward})
      for (Form f : e.form_list(d)) {
        SCOPED_TRACE(e.spec.name + " " + form_name(f) + " " + direction_name(d));
        VectorCase c{"heads", "", {{"B", 2}, {"T", 9}, {"H", 3}, {"K", 4}, {"V", 3}, {"N", 4}, {"D", 3}}, {}, {}};
        c.regime.optional_inputs = true;
        const TensorMap<double> in = inputs_for(e.spec, d, c);
        const Config cfg = config_of(e.spec);
        const LayerResult whole = run_layer(e, f, {Tier::fp64, 0}, in, cfg, kChunk, d);
        for (int threads : {1, 2, 3}) {
          SliceOptions so;
          so.split = true;
          so.threads = threads;
          const LayerResult split = run_layer_sliced(e, f, {Tier::fp64, 0}, in, cfg, kChunk, d, so);
          ASSERT_EQ(split.values.size(), whole.values.size());
          for (const auto& [name, t] : whole.values)
            EXPECT_TRUE(same_bits(split.values.at(name), t)) << name << ", " << threads << " threads";
        }
      }
}

// Offsets that do not fit the inputs, handed over programmatically (files are
// checked by validate_inputs: tests/varlen/varlen_cli_test.cpp).
TEST(Slices, RefusesOffsetsThatDoNotFit) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const Config cfg = config_of(e.spec);
  TensorMap<double> in = generate_inputs(e.spec, varlen_case(kCu), 1);
  in.at(kCuSeqlens).data.back() = 21;  // last != T
  EXPECT_THROW(run_layer(e, Form::sequential, {Tier::fp64, 0}, in, cfg), InputError);
  in.at(kCuSeqlens).data = {0, 5, 4, 13, 22, 22};  // decreasing
  EXPECT_THROW(run_layer(e, Form::sequential, {Tier::fp64, 0}, in, cfg), InputError);
  in = generate_inputs(e.spec, varlen_case(kCu), 1);
  in.at("h0").shape[0] = 4;  // N = 5 sequences
  in.at("h0").data.resize(in.at("h0").data.size() / 5 * 4);
  EXPECT_THROW(run_layer(e, Form::sequential, {Tier::fp64, 0}, in, cfg), InputError);
}

TEST(Varlen, EveryLayerTakesCuSeqlensAsANonDifferentiableInput) {
  for (const LayerEntry& e : registry()) {
    const TensorSpec* t = e.spec.input(kCuSeqlens);
    ASSERT_NE(t, nullptr) << e.spec.name;
    EXPECT_FALSE(t->required);
    EXPECT_FALSE(t->differentiable);
    EXPECT_FALSE(t->not_differentiable_why.empty());
    EXPECT_EQ(backward_spec(e.spec).output("dcu_seqlens"), nullptr);
    // Every other tensor has axes the slicer understands.
    for (const TensorSpec& s : direction_spec(e.spec, Direction::backward).inputs)
      EXPECT_NE(axis_kind(s), AxisKind::other) << e.spec.name << " " << s.name;
    for (const TensorSpec& s : direction_spec(e.spec, Direction::backward).outputs)
      EXPECT_NE(axis_kind(s), AxisKind::other) << e.spec.name << " " << s.name;
  }
}

}  // namespace
}  // namespace ttr::test

namespace ttr::test {
namespace {

// The production and int32-overflow suites as the docs state them (specs only:
// generating them takes gigabytes, and no test runs an oracle on them).
TEST(VarlenSuites, ProductionAndInt32OverflowShapes) {
  const LayerSpec& spec = find_layer("gated_delta_rule").spec;
  const std::vector<VectorCase> prod = suite_cases(spec, "production");
  ASSERT_EQ(prod.size(), 3u);
  const auto dims = [](const VectorCase& c) {
    return std::vector<std::int64_t>{c.dims.at("B"), c.dims.at("T"), c.dims.at("H"), c.dims.at("K"), c.dims.at("V")};
  };
  EXPECT_EQ(dims(prod[0]), (std::vector<std::int64_t>{4, 4096, 8, 128, 128}));
  EXPECT_EQ(dims(prod[1]), (std::vector<std::int64_t>{1, 16384, 8, 128, 128}));
  const std::vector<std::int64_t>& cu = prod[2].regime.cu_seqlens;
  ASSERT_EQ(cu.size(), 17u);  // 16 sequences
  EXPECT_EQ(cu.front(), 0);
  EXPECT_EQ(cu.back(), 32768);
  EXPECT_EQ(prod[2].dims.at("T"), 32768);
  EXPECT_EQ(prod[2].dims.at("B"), 1);
  for (std::size_t i = 1; i < cu.size(); ++i) EXPECT_GT(cu[i], cu[i - 1]);
  const std::vector<VectorCase> big = suite_cases(spec, "int32_overflow");
  ASSERT_EQ(big.size(), 1u);
  const auto& d = big[0].dims;
  EXPECT_GT(d.at("B") * d.at("T") * d.at("H") * d.at("K"), std::int64_t{1} << 31);
  // Only on demand: `vectors --layer all --suite ...` names it; no other suite includes it.
  for (const char* s : {"tiny", "demo", "standard", "stress", "varlen", "production"})
    for (const VectorCase& c : suite_cases(spec, s))
      EXPECT_LE(c.dims.at("B") * c.dims.at("T") * c.dims.at("H") * c.dims.at("K"), std::int64_t{1} << 31) << s;
}

}  // namespace
}  // namespace ttr::test
