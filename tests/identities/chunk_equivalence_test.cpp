// WY/UT equivalence: every chunk and scan form of layers.def equals its layer's
// sequential definition in MPFR-256 to 1e-60 (normwise relative, per output),
// for chunk sizes 1, 2, 3, 16, 64, T and T+5 with T = 37 (a multiple of none of
// them but T), on random and adversarial inputs. New forms are covered as soon
// as they appear in layers.def.
//
// Why 1e-60: both sides are exact algorithms run with 257-bit significands; the
// forms differ only in the order of O(T·C·K) roundings of relative size 2^-257
// ≈ 4e-78 each, amplified by at most the conditioning of the recurrences on
// these O(1) inputs — far below 1e-60. A wrong mask, gate boundary or UT
// product shows up at 1e-3 or worse.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

using LayerForm = std::pair<std::string, std::string>;

// Config variants worth proving separately: GKA's solvers and its fixed λ.
std::vector<std::vector<std::pair<std::string, std::string>>> configs(const LayerSpec& spec) {
  if (!spec.key("solver")) return {{}};
  return {{{"solver", "exact"}},
          {{"solver", "chebyshev"}, {"iters", "30"}},
          {{"solver", "cg"}, {"iters", "6"}},
          {{"solver", "chebyshev"}, {"lambda", "0.5"}}};
}

// |got − want| bounds per output. kappa is computed in float64 from the state by
// design (reference/solvers/spectrum.hpp), so the two forms agree to float64's
// accuracy there; resid is already a relative residual ~1e-77, compared absolutely.
void expect_equivalent(const TensorMap<mp>& got, const TensorMap<mp>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": missing output " << name;
    const Tensor<mp>& g = got.at(name);
    if (name == "resid") {
      mp worst = 0;
      for (std::size_t e = 0; e < w.data.size(); ++e) worst = std::max(worst, mp(abs(g.data[e] - w.data[e])));
      EXPECT_LT(worst.convert_to<double>(), 1e-60) << what << ": " << name;
      continue;
    }
    const double tol = name == "kappa" ? 1e-12 : 1e-60;
    const double e = rel_err(g, w);
    EXPECT_LT(e, tol) << what << ": output " << name << " relative error " << e;
  }
}

class ChunkEquivalence : public ::testing::TestWithParam<LayerForm> {};

TEST_P(ChunkEquivalence, EqualsSequentialInMpfr256) {
  const auto& [layer, form] = GetParam();
  const LayerSpec& spec = find_layer(layer).spec;
  const std::int64_t T = 37;
  const Dims dims{{"B", 2}, {"T", T}, {"H", 2}, {"K", 4}, {"V", 3}, {"N", 4}, {"D", 3}};
  std::uint64_t seed = 11;
  for (const auto& r : equivalence_regimes(spec))
    for (const auto& sets : configs(spec)) {
      const VectorCase c{r.name, "", dims, r.regime, sets};
      const TensorMap<double> in = generate_inputs(spec, c, seed++);
      const Config cfg = Config::make(spec, sets);
      const TensorMap<mp> want = mpfr_form(layer, "sequential", in, cfg, 256, 64);
      for (int C : {1, 2, 3, 16, 64, int(T), int(T) + 5}) {
        std::string what = layer + " " + form + " C=" + std::to_string(C) + " " + r.name;
        for (const auto& [k, v] : sets) what += " " + k + "=" + v;
        expect_equivalent(mpfr_form(layer, form, in, cfg, 256, C), want, what);
      }
    }
}

std::string form_name_of(const ::testing::TestParamInfo<LayerForm>& info) {
  return info.param.first + "_" + info.param.second;
}

INSTANTIATE_TEST_SUITE_P(AllForms, ChunkEquivalence, ::testing::ValuesIn(mpfr_parallel_forms()), form_name_of);

// The list is not empty and names every delta-family and gated-linear layer's
// chunk form: a layer that loses its chunk form fails here, not silently.
TEST(ChunkEquivalence, CoversTheChunkwiseLayers) {
  const auto& forms = mpfr_parallel_forms();
  for (const char* layer : {"linear_attn", "simple_gla", "gla", "delta_rule", "gated_delta_rule", "kda",
                            "kaczmarz_delta_rule", "precond_gated_delta_rule", "precond_kda"})
    EXPECT_NE(std::find(forms.begin(), forms.end(), LayerForm{layer, "chunk"}), forms.end()) << layer;
}

}  // namespace
}  // namespace ttr::test
