// The error model's pieces against independent expectations: Monte Carlo
// arithmetic perturbs as specified; compare() turns hand-made candidates into
// the verdicts the model promises (an oracle rounded to the dtype always passes,
// non-finite values fail where the truth is representable, shapes are checked);
// the modelled scale follows conditioning and the dtype's u.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "gate/error_model.hpp"
#include "gate/kernel_checks.hpp"
#include "oracles/registry.hpp"
#include "reference/core/mca.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

TEST(Mca, PerturbsWithinUAndOnlyInexactValues) {
  mca_seed(1, std::ldexp(1.0, -8), McaFormat::bf16, 0.0, McaFormat::any);
  double max_rel = 0, sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = 1.0 + i * 1e-7;  // mostly not bf16 values
    const double y = (McaReal(x) * McaReal(1.0)).value();
    if (BF16Format::round(x) == x) {
      EXPECT_EQ(y, x);
    }
    const double rel = (y - x) / x;
    max_rel = std::max(max_rel, std::fabs(rel));
    sum += rel;
  }
  EXPECT_LE(max_rel, std::ldexp(1.0, -8));
  EXPECT_GT(max_rel, 0.9 * std::ldexp(1.0, -8));      // the whole interval is used
  EXPECT_LT(std::fabs(sum / n), 0.05 * std::ldexp(1.0, -8));  // zero mean
  EXPECT_EQ((McaReal(1.5) * McaReal(2.0)).value(), 3.0);      // representable: untouched
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
  EXPECT_EQ((McaReal(1.0 / 3) * McaReal(3.0)).value(), (1.0 / 3) * 3.0);  // u = 0: plain double
}

// A kernel adds 0 exactly: a sum with a zero term is the other term, even where
// that term is a perturbed value (never representable in the op format), in the
// fp32 and the 16-bit (absorbing) op formats alike; a sum of two nonzero terms is
// still perturbed where this order happens to make it exact (file comment of mca.hpp).
TEST(Mca, ASumWithAZeroTermIsTheOtherTermExactly) {
  for (const McaFormat f : {McaFormat::fp32, McaFormat::bf16}) {
    const double u = f == McaFormat::fp32 ? 0x1p-24 : 0x1p-8;
    mca_seed(5, u, f, 0.0, McaFormat::any);
    const McaReal x = McaReal(1.0 / 3) * McaReal(1.0 / 7), zero(0.0);
    ASSERT_FALSE(mca_representable(x.value(), f));  // the case the old rule re-rounded
    EXPECT_EQ((x + zero).value(), x.value());
    EXPECT_EQ((zero + x).value(), x.value());
    EXPECT_EQ((x - zero).value(), x.value());
    EXPECT_EQ((zero - x).value(), -x.value());
    McaReal acc(0.0);
    for (int i = 0; i < 4; ++i) acc += McaReal(0.0) * McaReal(1.0 / 3);  // zero products
    acc += x;
    for (int i = 0; i < 4; ++i) acc += McaReal(0.0) * McaReal(1.0 / 7);
    EXPECT_EQ(acc.value(), x.value());
    EXPECT_NE((McaReal(1.0) + McaReal(2.0)).value(), 3.0);  // nonzero terms: perturbed
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

TEST(Mca, SameSeedSameStream) {
  auto run = [](std::uint64_t seed) {
    mca_seed(seed, 1e-3, McaFormat::any, 0.0, McaFormat::any);
    McaReal acc(0.0);
    for (int i = 1; i < 100; ++i) acc += McaReal(1.0 / i);
    return acc.value();
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

struct Fixture {
  const LayerEntry& layer = find_layer("gated_delta_rule");
  CaseInputs c = case_inputs("gated_delta_rule", "tiny", "basic");
  TensorMap<double> oracle = run_layer(layer, Form::sequential, {Tier::mpfr, 256}, c.tensors, c.config).values;
  ErrorModel model(Tier dtype) {
    ModelSpec s;
    s.dtype = dtype;
    s.chunk_size = 4;
    return model_errors(layer, c.tensors, c.config, oracle, s);
  }
};

TensorMap<double> rounded(const TensorMap<double>& m, double (*round)(double)) {
  TensorMap<double> r = m;
  for (auto& [_, t] : r)
    for (double& x : t.data) x = round(x);
  return r;
}

TEST(Compare, OracleRoundedToTheDtypePassesEvenWithoutModel) {
  Fixture f;
  ErrorModel none;  // rms absent: the bound is u‖oracle_row‖ + tiny
  none.spec.dtype = Tier::bf16;
  none.u = unit_roundoff(Tier::bf16);
  const CheckResult r = compare(f.layer.spec, f.oracle, none, rounded(f.oracle, &BF16Format::round));
  EXPECT_TRUE(r.pass);
  for (const auto& v : r.tensors) EXPECT_LE(v.max_ratio, 1.0) << v.name;  // |x − fl(x)| ≤ u|x| elementwise
}

TEST(Compare, NonFiniteCandidatesFailWhereTheTruthIsRepresentable) {
  Fixture f;
  const ErrorModel m = f.model(Tier::bf16);
  TensorMap<double> cand = rounded(f.oracle, &BF16Format::round);
  Tensor<double>& o = cand.at("o");
  // o is [B=1, T=7, H=2, V=3]: element (b=0, t=5, h=1, v=2).
  const std::size_t e = ((0 * 7 + 5) * 2 + 1) * 3 + 2;
  o.data[e] = std::numeric_limits<double>::quiet_NaN();
  const CheckResult r = compare(f.layer.spec, f.oracle, m, cand);
  EXPECT_FALSE(r.pass);
  const TensorVerdict& v = r.tensors.at(0);
  ASSERT_EQ(v.name, "o");
  EXPECT_EQ(v.nan_count, 1);
  EXPECT_EQ(v.nonfinite_failures, 1);
  EXPECT_EQ(v.first_nonfinite.b, 0);
  EXPECT_EQ(v.first_nonfinite.t, 5);
  EXPECT_EQ(v.first_nonfinite.h, 1);
  EXPECT_TRUE(std::isinf(v.max_ratio));
}

TEST(Compare, ShiftedTokensFailAndShapesAreChecked) {
  Fixture f;
  const ErrorModel m = f.model(Tier::bf16);
  TensorMap<double> cand = f.oracle;
  Tensor<double>& o = cand.at("o");
  const std::size_t row = 2 * 3;  // H·V elements per token
  for (std::size_t e = o.data.size() - 1; e >= row; --e) o.data[e] = o.data[e - row];
  for (std::size_t e = 0; e < row; ++e) o.data[e] = 0.0;
  EXPECT_FALSE(compare(f.layer.spec, f.oracle, m, cand).pass);

  TensorMap<double> wrong = f.oracle;
  wrong.at("o").shape[1] = 6;
  wrong.at("o").data.resize(wrong.at("o").data.size() - row);
  EXPECT_THROW(compare(f.layer.spec, f.oracle, m, wrong), InputError);
  TensorMap<double> no_o = f.oracle;
  no_o.erase("o");
  EXPECT_THROW(compare(f.layer.spec, f.oracle, m, no_o), InputError);
  TensorMap<double> no_state = f.oracle;
  no_state.erase("ht");
  const CheckResult r = compare(f.layer.spec, f.oracle, m, no_state);
  EXPECT_TRUE(r.pass);
  EXPECT_FALSE(r.tensors.at(1).present);
}

// The model is the computation's own: an fp32 kernel's modelled error is far
// below a bf16 kernel's (u differs by 2^16; the ratio of the models lies between
// 2^8 and 2^16 because fp32 compute errors also enter the bf16 model), and it is
// nonzero and finite for every row.
TEST(Model, ScalesWithTheDtype) {
  Fixture f;
  const ErrorModel m16 = f.model(Tier::bf16), m32 = f.model(Tier::fp32);
  double s16 = 0, s32 = 0;
  for (double x : m16.rms.at("o").data) {
    EXPECT_TRUE(std::isfinite(x));
    s16 += x;
  }
  for (double x : m32.rms.at("o").data) s32 += x;
  EXPECT_GT(s32, 0.0);
  EXPECT_GT(s16 / s32, std::ldexp(1.0, 8));
  EXPECT_LT(s16 / s32, std::ldexp(1.0, 17));
}

// GKA's solve amplifies rounding by up to κ ≤ (a+1)/a: the modelled error of its
// output grows as the adaptive ridge a shrinks.
TEST(Model, FollowsConditioning) {
  const LayerEntry& gka = find_layer("gka");
  CaseInputs c = case_inputs("gka", "stress", "near_duplicate_keys");
  auto modelled = [&](const char* a) {
    const Config cfg = Config::make(gka.spec, {{"a", a}, {"solver", "chebyshev"}});
    const auto oracle = run_layer(gka, Form::sequential, {Tier::mpfr, 256}, c.tensors, cfg).values;
    ModelSpec s;
    s.dtype = Tier::fp32;
    s.samples = 4;
    // Named: a range-for over a member of the temporary model would read it after
    // the temporary died (the range-init's temporaries end with it before C++23).
    const ErrorModel m = model_errors(gka, c.tensors, cfg, oracle, s);
    double sum = 0;
    for (double x : m.rms.at("o").data) sum += x;
    return sum;
  };
  EXPECT_GT(modelled("0.001"), 4 * modelled("0.2"));
}

// Which CPU form models a device kernel (gate/kernel_checks.hpp), by the layers'
// declarations: a chunk kernel its chunk form; a recurrent kernel in fp32 the
// sequential form with the chunk form in quadrature where the layer's chunk form
// computes the same recurrence, the sequential form alone where it declares none
// (pdn_exact) or its chunk form is another algorithm (gka's backward: Alg. 2).
TEST(KernelModel, FollowsTheLayersDeclaredForms) {
  auto model = [](const char* layer, Form f, Tier t, Direction d) {
    return kernel_model(find_layer(layer), f, t, 8, 1, d);
  };
  for (Direction d : {Direction::forward, Direction::backward}) {
    const ModelSpec chunk = model("gated_delta_rule", Form::chunk, Tier::bf16, d);
    EXPECT_EQ(chunk.form, Form::chunk);
    EXPECT_TRUE(chunk.also.empty());
    EXPECT_EQ(chunk.direction, d);
    EXPECT_EQ(chunk.chunk_size, kKernelChunkSize);
    const ModelSpec rec32 = model("gated_delta_rule", Form::sequential, Tier::fp32, d);
    EXPECT_EQ(rec32.form, Form::sequential);
    EXPECT_EQ(rec32.also, std::vector<Form>{Form::chunk});
    EXPECT_EQ(model("gated_delta_rule", Form::sequential, Tier::bf16, d).form, Form::chunk);
  }
  ASSERT_TRUE(find_layer("gka").has_form(Form::chunk, Direction::backward));
  for (Tier t : {Tier::bf16, Tier::fp32}) {
    const ModelSpec gka_bwd = model("gka", Form::sequential, t, Direction::backward);
    EXPECT_EQ(gka_bwd.form, Form::sequential) << tier_name(t);
    EXPECT_TRUE(gka_bwd.also.empty()) << tier_name(t);
    EXPECT_EQ(gka_bwd.dtype, t);
    const ModelSpec pdn = model("pdn_exact", Form::sequential, t, Direction::forward);
    EXPECT_EQ(pdn.form, Form::sequential) << tier_name(t);
    EXPECT_TRUE(pdn.also.empty()) << tier_name(t);
  }
  // gka's forward chunk form is its recurrence's chunkwise form: the usual rule.
  EXPECT_EQ(model("gka", Form::sequential, Tier::fp32, Direction::forward).also, std::vector<Form>{Form::chunk});
}

// The rule is the declaration (TTR_OWN_ALGORITHM in layers.def), not a layer's
// name or family: layers.def marks gka's chunk backward alone, and a copy of
// gated_delta_rule's entry with its chunk backward marked gets gka's model in
// that direction and the usual one forward.
TEST(KernelModel, OwnAlgorithmIsTheDeclaration) {
  std::vector<std::string> marked;
  for (const LayerEntry& e : registry())
    for (const FormImpl& f : e.forms)
      if (f.own_algorithm)
        marked.push_back(std::string(e.spec.name) + "/" + form_name(f.form) + "/" + direction_name(f.direction));
  EXPECT_EQ(marked, std::vector<std::string>{"gka/chunk/backward"});
  LayerEntry copy = find_layer("gated_delta_rule");
  for (FormImpl& f : copy.forms)
    if (f.form == Form::chunk && f.direction == Direction::backward) f.own_algorithm = true;
  ASSERT_TRUE(copy.form(Form::chunk, Direction::backward)->own_algorithm);
  const ModelSpec bwd = kernel_model(copy, Form::sequential, Tier::fp32, 8, 1, Direction::backward);
  EXPECT_EQ(bwd.form, Form::sequential);
  EXPECT_TRUE(bwd.also.empty());
  EXPECT_EQ(kernel_model(copy, Form::sequential, Tier::fp32, 8, 1, Direction::forward).also,
            std::vector<Form>{Form::chunk});
}

}  // namespace
}  // namespace ttr::test
