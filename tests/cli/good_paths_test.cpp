// The CLI's success paths: the catalogue, oracle files and their metadata, `run`
// in each dtype, and where a run's config comes from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "oracles/validate.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::io::DType;
using ttr::io::TensorFile;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

// The delta-rule family the issue names; layers added later must come on top.
const std::vector<std::string> kTenLayers = {"linear_attn", "simple_gla", "gla", "delta_rule", "gated_delta_rule",
                                             "kda", "kaczmarz_delta_rule", "pdn_exact", "precond_gated_delta_rule",
                                             "precond_kda"};

std::vector<std::string> registry_names() {
  std::vector<std::string> n;
  for (const auto& e : ttr::registry()) n.push_back(e.spec.name);
  return n;
}

std::vector<double> values(const TensorFile& f, const std::string& name) {
  return ttr::io::to_f64(f.tensors.at(name), name);
}

// Tiny-suite inputs of every layer (seed 3), written once by `ttrcheck vectors`.
class CliGoodPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const CliResult r = run_cli({"vectors", "--layer", "all", "--suite", "tiny", "--seed", "3", "--out",
                                 vec_dir().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path vec_dir() { return dir_->path() / "vectors"; }
  static std::string inputs(const std::string& layer, const std::string& c = "basic") {
    return (vec_dir() / (layer + ".tiny." + c + ".inputs.safetensors")).string();
  }
  static std::string oracle_file(const std::string& layer, const std::string& c = "basic") {
    return (vec_dir() / (layer + ".tiny." + c + ".oracle.safetensors")).string();
  }
  TempDir work_;
  std::string out(const std::string& name = "out.safetensors") const { return work_ / name; }

 private:
  static TempDir* dir_;
};
TempDir* CliGoodPaths::dir_ = nullptr;

TEST_F(CliGoodPaths, LayersListsEveryLayer) {
  const CliResult r = run_cli({"layers"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto names = registry_names();
  ASSERT_GE(names.size(), kTenLayers.size());
  for (const auto& n : names) {
    // Each layer's block starts at the beginning of a line with its name.
    EXPECT_TRUE(r.out.rfind(std::string(n) + "  ", 0) == 0 || r.out.find("\n" + std::string(n) + "  ") != std::string::npos)
        << n << " not listed";
  }
  for (const auto& n : kTenLayers) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST_F(CliGoodPaths, LayersJson) {
  const CliResult r = run_cli({"layers", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), ttr::registry().size());
  ASSERT_GE(j.size(), kTenLayers.size());
  std::vector<std::string> names;
  for (const auto& l : j) {
    names.push_back(l.at("name").get<std::string>());
    EXPECT_TRUE(l.at("inputs").is_array()) << names.back();
    EXPECT_TRUE(l.at("outputs").is_array()) << names.back();
    EXPECT_TRUE(l.at("config").is_array()) << names.back();
    EXPECT_FALSE(l.at("forms").empty()) << names.back();
  }
  EXPECT_EQ(names, registry_names());
  for (const auto& n : kTenLayers) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  // One layer alone.
  const CliResult one = run_cli({"layers", "--layer", "pdn_exact", "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json j1 = nlohmann::json::parse(one.out);
  ASSERT_EQ(j1.size(), 1u);
  EXPECT_EQ(j1[0].at("name"), "pdn_exact");
}

TEST_F(CliGoodPaths, OracleOnTinyVectorForEveryLayer) {
  for (const auto& e : ttr::registry()) {
    const std::string layer = e.spec.name;
    SCOPED_TRACE(layer);
    const std::string o = out(layer + ".oracle.safetensors");
    const CliResult r = run_cli({"oracle", "--layer", layer, "--in", inputs(layer), "--out", o});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    const TensorFile f = ttr::io::read_safetensors(o);
    const TensorFile in = ttr::io::read_safetensors(inputs(layer));
    const ttr::LayerInputs li = ttr::validate_inputs(e.spec, in, "inputs");
    // Exactly the spec's outputs, F64, of the spec's shapes.
    ASSERT_EQ(f.tensors.size(), e.spec.outputs.size());
    for (const auto& ts : e.spec.outputs) {
      ASSERT_TRUE(f.tensors.count(ts.name)) << ts.name;
      const auto& t = f.tensors.at(ts.name);
      EXPECT_EQ(t.dtype, DType::F64) << ts.name;
      EXPECT_EQ(t.shape, ttr::shape_of(ts, li.dims)) << ts.name;
      for (double x : values(f, ts.name)) EXPECT_TRUE(std::isfinite(x)) << ts.name;
    }
    const auto& m = f.metadata;
    for (const char* key : {"layer", "config", "seed", "precision", "working_bits", "tool_version", "kind"})
      EXPECT_TRUE(m.count(key)) << "metadata lacks " << key;
    EXPECT_EQ(m.at("kind"), "oracle");
    EXPECT_EQ(m.at("layer"), layer);
    EXPECT_EQ(m.at("seed"), "3");
    EXPECT_EQ(m.at("precision"), "mpfr:256");
    EXPECT_GE(std::stoul(m.at("working_bits")), 256u);
    EXPECT_EQ(m.at("tool_version"), ttr::kToolVersion);
    const nlohmann::json cfg = nlohmann::json::parse(m.at("config"), nullptr, false);
    ASSERT_TRUE(cfg.is_object()) << m.at("config");
    for (const auto& k : e.spec.config) {
      if (k.required || k.default_value) {
        EXPECT_TRUE(cfg.contains(k.name)) << k.name;
      }
    }
    // Same bits and inputs as `vectors` used: the same oracle values, bit for bit.
    const TensorFile ref = ttr::io::read_safetensors(oracle_file(layer));
    for (const auto& ts : e.spec.outputs) EXPECT_EQ(f.tensors.at(ts.name).data, ref.tensors.at(ts.name).data) << ts.name;
  }
}

TEST_F(CliGoodPaths, OracleBitsRecorded) {
  const CliResult r =
      run_cli({"oracle", "--layer", "gla", "--in", inputs("gla"), "--out", out(), "--bits", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorFile f = ttr::io::read_safetensors(out());
  EXPECT_EQ(f.metadata.at("precision"), "mpfr:300");
  EXPECT_GE(std::stoul(f.metadata.at("working_bits")), 300u);
}

void expect_run_dtype(const std::string& in, const std::string& layer, const std::string& arith, DType want,
                      const std::string& out, const std::string& oracle, double rel_tol) {
  SCOPED_TRACE(layer + " --arith " + arith);
  const CliResult r = run_cli({"run", "--layer", layer, "--in", in, "--out", out, "--arith", arith});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorFile f = ttr::io::read_safetensors(out);
  const TensorFile ref = ttr::io::read_safetensors(oracle);
  const ttr::LayerSpec& spec = ttr::find_layer(layer).spec;
  ASSERT_EQ(f.tensors.size(), spec.outputs.size());
  for (const auto& ts : spec.outputs) {
    const auto& t = f.tensors.at(ts.name);
    EXPECT_EQ(t.dtype, want) << ts.name;
    EXPECT_EQ(t.shape, ref.tensors.at(ts.name).shape) << ts.name;
    // Close to the oracle: a sanity check of the computation, not its error model.
    const auto x = values(f, ts.name), y = values(ref, ts.name);
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      err = std::max(err, std::fabs(x[i] - y[i]));
      scale = std::max(scale, std::fabs(y[i]));
    }
    EXPECT_LE(err, rel_tol * std::max(scale, 1e-30)) << ts.name;
  }
  EXPECT_EQ(f.metadata.at("kind"), "run");
  EXPECT_EQ(f.metadata.at("layer"), layer);
  EXPECT_EQ(f.metadata.at("precision"), arith);
  EXPECT_EQ(f.metadata.at("seed"), "3");
  EXPECT_EQ(f.metadata.at("tool_version"), ttr::kToolVersion);
}

TEST_F(CliGoodPaths, RunWritesTheArithmeticsDtype) {
  for (const std::string layer : {"gated_delta_rule", "precond_kda", "linear_attn"}) {
    expect_run_dtype(inputs(layer), layer, "bf16", DType::BF16, out("bf16.safetensors"), oracle_file(layer), 0.1);
    expect_run_dtype(inputs(layer), layer, "fp16", DType::F16, out("fp16.safetensors"), oracle_file(layer), 2e-2);
    expect_run_dtype(inputs(layer), layer, "fp32", DType::F32, out("fp32.safetensors"), oracle_file(layer), 1e-5);
    expect_run_dtype(inputs(layer), layer, "fp64", DType::F64, out("fp64.safetensors"), oracle_file(layer), 1e-13);
    expect_run_dtype(inputs(layer), layer, "mpfr:128", DType::F64, out("mpfr.safetensors"), oracle_file(layer), 1e-15);
  }
}

// pdn_exact's vectors record lambda (its required key) in their metadata.
TEST_F(CliGoodPaths, ConfigFromMetadataAndSetOverride) {
  const std::string in = inputs("pdn_exact");
  const TensorFile in_file = ttr::io::read_safetensors(in);
  ASSERT_EQ(in_file.metadata.at("layer"), "pdn_exact");
  const nlohmann::json in_cfg = nlohmann::json::parse(in_file.metadata.at("config"));
  ASSERT_TRUE(in_cfg.contains("lambda"));
  const std::string recorded = in_cfg.at("lambda").get<std::string>();

  // No --set: the recorded lambda is used.
  ASSERT_EQ(run_cli({"oracle", "--layer", "pdn_exact", "--in", in, "--out", out("meta.safetensors")}).exit_code, 0);
  const TensorFile from_meta = ttr::io::read_safetensors(out("meta.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(from_meta.metadata.at("config")).at("lambda"), recorded);

  // The same as naming it explicitly on a file without metadata.
  ttr::io::TensorFile bare = in_file;
  bare.metadata.clear();
  ttr::io::write_safetensors_atomic(out("bare.inputs.safetensors"), bare);
  ASSERT_EQ(run_cli({"oracle", "--layer", "pdn_exact", "--in", out("bare.inputs.safetensors"), "--out",
                     out("explicit.safetensors"), "--set", "lambda=" + recorded})
                .exit_code,
            0);
  const TensorFile explicit_ = ttr::io::read_safetensors(out("explicit.safetensors"));
  for (const char* name : {"o", "ht"}) EXPECT_EQ(from_meta.tensors.at(name).data, explicit_.tensors.at(name).data);

  // --set overrides the recorded value, for oracle and run alike.
  const std::string other = recorded == "0.25" ? "4" : "0.25";
  for (const std::string cmd : {"oracle", "run"}) {
    SCOPED_TRACE(cmd);
    const CliResult r = run_cli({cmd, "--layer", "pdn_exact", "--in", in, "--out", out("set.safetensors"), "--set",
                                 "lambda=" + other});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const TensorFile set = ttr::io::read_safetensors(out("set.safetensors"));
    EXPECT_EQ(nlohmann::json::parse(set.metadata.at("config")).at("lambda"), other);
    ASSERT_EQ(run_cli({cmd, "--layer", "pdn_exact", "--in", out("bare.inputs.safetensors"), "--out",
                       out("set_bare.safetensors"), "--set", "lambda=" + other})
                  .exit_code,
              0);
    const TensorFile set_bare = ttr::io::read_safetensors(out("set_bare.safetensors"));
    EXPECT_EQ(set.tensors.at("o").data, set_bare.tensors.at("o").data);
    EXPECT_NE(set.tensors.at("o").data, from_meta.tensors.at("o").data) << "lambda had no effect";
  }

  // A value recorded in the metadata other than the suite's is honoured too.
  ttr::io::TensorFile custom = in_file;
  custom.metadata["config"] = R"({"lambda": "0.125"})";
  ttr::io::write_safetensors_atomic(out("custom.inputs.safetensors"), custom);
  ASSERT_EQ(run_cli({"oracle", "--layer", "pdn_exact", "--in", out("custom.inputs.safetensors"), "--out",
                     out("custom.safetensors")})
                .exit_code,
            0);
  ASSERT_EQ(run_cli({"oracle", "--layer", "pdn_exact", "--in", out("bare.inputs.safetensors"), "--out",
                     out("custom_ref.safetensors"), "--set", "lambda=0.125"})
                .exit_code,
            0);
  EXPECT_EQ(ttr::io::read_safetensors(out("custom.safetensors")).tensors.at("o").data,
            ttr::io::read_safetensors(out("custom_ref.safetensors")).tensors.at("o").data);
}

// The config of another layer's metadata is not applied (it may hold keys this
// layer does not know).
TEST_F(CliGoodPaths, MetadataOfAnotherLayerIgnored) {
  // gated_delta_rule's file without g is a valid delta_rule input; its metadata
  // says layer=gated_delta_rule, so its config must not be applied to delta_rule.
  TensorFile f = ttr::io::read_safetensors(inputs("gated_delta_rule"));
  f.tensors.erase("g");
  f.metadata["config"] = R"({"use_qk_l2norm_in_kernel": "true", "no_such_key_for_delta_rule": "1"})";
  ttr::io::write_safetensors_atomic(out("mixed.inputs.safetensors"), f);
  const CliResult r = run_cli({"run", "--layer", "delta_rule", "--in", out("mixed.inputs.safetensors"), "--out",
                               out("mixed.safetensors"), "--arith", "fp64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorFile o = ttr::io::read_safetensors(out("mixed.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(o.metadata.at("config")).at("use_qk_l2norm_in_kernel"), "false");
}

}  // namespace
