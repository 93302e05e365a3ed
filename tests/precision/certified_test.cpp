// `ttrcheck oracle --certified`: for every output element the enclosure
// [<name>.lower, <name>.upper] (doubles, MPFI at 256 bits rounded outward)
// contains an independent 512-bit MPFR evaluation of the same inputs, compared in
// MPFR (value512 is never rounded to double for the comparison). Also: the
// enclosure is not vacuous (a few ulps wide at most) and the F64 point value is
// value512 rounded to nearest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mpfr.h>
#include <string>

#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "oracles/validate.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

class PrecisionCertified : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const CliResult r = run_cli({"vectors", "--layer", "all", "--suite", "tiny", "--seed", "11", "--no-oracle",
                                 "--out", (dir_->path() / "v").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
};
TempDir* PrecisionCertified::dir_ = nullptr;

// Largest gap we accept between the bounds: 4 ulps of the element, or (for
// elements near zero, where the enclosure may straddle 0) 1e-60 of the tensor's
// largest magnitude; 256-bit intervals on tiny cases are far narrower than both.
double allowed_width(double v, double tensor_scale) {
  const double ulp = std::nextafter(std::fabs(v), std::numeric_limits<double>::infinity()) - std::fabs(v);
  return std::max(4 * ulp, 1e-60 * tensor_scale);
}

TEST_P(PrecisionCertified, EnclosureContains512BitValue) {
  const std::string layer = GetParam();
  const ttr::LayerSpec& spec = ttr::find_layer(layer).spec;
  for (const auto& c : ttr::suite_cases(spec, "tiny")) {
    SCOPED_TRACE(layer + " tiny/" + c.name);
    const fs::path in = dir_->path() / "v" / (layer + ".tiny." + c.name + ".inputs.safetensors");
    TempDir work;
    const std::string out = work / "certified.safetensors";
    const CliResult r =
        run_cli({"oracle", "--layer", layer, "--in", in.string(), "--out", out, "--certified", "--bits", "256"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const ttr::io::TensorFile f = ttr::io::read_safetensors(out);
    EXPECT_EQ(f.metadata.at("certified"), "true");
    std::size_t enclosed = 0;
    for (const auto& ts : spec.outputs) enclosed += ts.certifiable ? 1 : 0;
    EXPECT_EQ(f.tensors.size(), spec.outputs.size() + 2 * enclosed);

    // The 512-bit evaluation of exactly the file's inputs under the recorded config.
    const ttr::LayerInputs li = ttr::validate_inputs(spec, ttr::io::read_safetensors(in), in.string());
    const ttr::Config cfg = ttr::test::config_from_metadata(layer, f.metadata);
    const auto v512 = ttr::test::mpfr_sequential(layer, li.tensors, cfg, 512);

    std::size_t checked = 0;
    for (const auto& ts : spec.outputs) {
      if (!ts.certifiable) continue;  // diagnostics of the arithmetic (gka's kappa, resid) are not enclosed
      SCOPED_TRACE(ts.name);
      for (const std::string& n : {ts.name, ts.name + ".lower", ts.name + ".upper"}) {
        ASSERT_TRUE(f.tensors.count(n)) << "missing tensor " << n;
        EXPECT_EQ(f.tensors.at(n).dtype, ttr::io::DType::F64) << n;
        EXPECT_EQ(f.tensors.at(n).shape, ttr::shape_of(ts, li.dims)) << n;
      }
      const auto point = ttr::io::to_f64(f.tensors.at(ts.name), ts.name);
      const auto lower = ttr::io::to_f64(f.tensors.at(ts.name + ".lower"), ts.name);
      const auto upper = ttr::io::to_f64(f.tensors.at(ts.name + ".upper"), ts.name);
      const auto& exact = v512.at(ts.name).data;
      ASSERT_EQ(exact.size(), point.size());
      double scale = 0;
      for (double x : point) scale = std::max(scale, std::fabs(x));
      int failures = 0;
      for (std::size_t i = 0; i < exact.size() && failures < 5; ++i) {
        const mpfr_srcptr x = exact[i].backend().data();
        ASSERT_GE(mpfr_get_prec(x), 512);
        const bool inside = std::isfinite(lower[i]) && std::isfinite(upper[i]) && mpfr_cmp_d(x, lower[i]) >= 0 &&
                            mpfr_cmp_d(x, upper[i]) <= 0;
        if (!inside) {
          ++failures;
          ADD_FAILURE() << "element " << i << ": value512 = " << exact[i].str(40) << " outside [" << lower[i] << ", "
                        << upper[i] << "]";
        }
        EXPECT_LE(upper[i] - lower[i], allowed_width(point[i], scale)) << "element " << i << ": vacuous enclosure ["
                                                                        << lower[i] << ", " << upper[i] << "]";
        EXPECT_EQ(point[i], mpfr_get_d(x, MPFR_RNDN)) << "element " << i << ": point value not value512 rounded";
        ++checked;
      }
      EXPECT_EQ(failures, 0);
    }
    EXPECT_GT(checked, 0u);
  }
}

// The enclosure is of the oracle, the sequential form (tiers.def: MPFI serves it
// only): a chunk or scan form with --certified is refused with one line and exit 2,
// and the output path is left untouched.
TEST_F(PrecisionCertified, OtherFormsAreRefused) {
  const fs::path in = dir_->path() / "v" / "gated_delta_rule.tiny.basic.inputs.safetensors";
  ASSERT_TRUE(fs::exists(in)) << in;
  TempDir work;
  const std::string out = work / "certified.safetensors";
  const CliResult r = run_cli({"oracle", "--certified", "--form", "chunk", "--chunk-size", "4", "--layer",
                               "gated_delta_rule", "--in", in.string(), "--out", out});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--certified encloses the sequential form (the oracle) only, not the chunk form"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

INSTANTIATE_TEST_SUITE_P(AllLayers, PrecisionCertified, ::testing::ValuesIn(ttr::test::mpfr_layer_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
