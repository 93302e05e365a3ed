// `ttrcheck check` on hand-made candidates: the oracle rounded to bf16 passes; a
// candidate shifted by one token fails; one NaN fails and the table names its
// (b, t, h); truncated or mis-shaped candidates and foreign oracles exit 2 with
// one line and no report left behind; a stored oracle gives the computed (MPFR) one's
// report byte for byte; reports are deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::Tensor;
using ttr::TensorMap;
using ttr::io::DType;
using ttr::test::CliResult;
using ttr::test::entries_of;
using ttr::test::run_cli;
using ttr::test::TempDir;

const std::string kLayer = "gated_delta_rule";
const std::string kId = "gated_delta_rule/chunk/bf16/tiny.basic";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TensorMap<double> read_tensors(const std::string& path) {
  const auto f = ttr::io::read_safetensors(path);
  TensorMap<double> out;
  for (const auto& [name, raw] : f.tensors) {
    out[name] = Tensor<double>{raw.shape, 0.0};
    out[name].data = ttr::io::to_f64(raw, name);
  }
  return out;
}

// Index of element [b, t, h, v] of a [B, T, H, V] tensor.
std::size_t index(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t v) {
  const auto& s = x.shape;
  return static_cast<std::size_t>(((b * s[1] + t) * s[2] + h) * s[3] + v);
}

// The table line of one tensor: starts with the check id, then the tensor name.
std::string table_line(const std::string& out, const std::string& tensor) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string id, name;
    words >> id >> name;
    if (id == kId && name == tensor) return line;
  }
  return "";
}

bool one_line(const std::string& err) { return !err.empty() && err.find('\n') == err.size() - 1; }

// Tiny-suite vectors (inputs and oracles) of gated_delta_rule and delta_rule, seed 3.
class CliCheck : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    for (const char* layer : {"gated_delta_rule", "delta_rule"}) {
      const CliResult r = run_cli({"vectors", "--layer", layer, "--suite", "tiny", "--seed", "3", "--out",
                                   (dir_->path() / "vectors").string()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string vec(const std::string& layer, const std::string& kind) {
    return (dir_->path() / "vectors" / (layer + ".tiny.basic." + kind + ".safetensors")).string();
  }
  static std::string inputs() { return vec(kLayer, "inputs"); }
  static std::string oracle() { return vec(kLayer, "oracle"); }

  // The oracle's outputs, changed by `edit`, stored as a candidate in `dtype`.
  template <class Edit>
  std::string candidate(Edit&& edit, DType dtype = DType::BF16, const std::string& name = "cand.safetensors") {
    TensorMap<double> t = read_tensors(oracle());
    edit(t);
    const std::string path = work_ / name;
    ttr::test::write_tensors(path, t, dtype);
    return path;
  }
  std::string candidate() {
    return candidate([](TensorMap<double>&) {});
  }

  // Runs check with a report in out/ (created here); extra arguments appended.
  CliResult check(const std::string& cand, std::vector<std::string> extra = {}) {
    fs::create_directories(out_dir());
    std::vector<std::string> args = {"check", "--layer", kLayer, "--in", inputs(), "--candidate", cand,
                                     "--report", report()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }
  fs::path out_dir() const { return work_.path() / "out"; }
  std::string report() const { return (out_dir() / "report.json").string(); }
  nlohmann::json report_doc() const { return nlohmann::json::parse(slurp(report())); }

  TempDir work_;

 private:
  static TempDir* dir_;
};
TempDir* CliCheck::dir_ = nullptr;

TEST_F(CliCheck, OracleRoundedToBf16Passes) {
  const CliResult r = check(candidate());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(table_line(r.out, "o").find("PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r.out;
  const auto doc = report_doc();
  EXPECT_EQ(doc["schema"], "ttrcheck-report");
  EXPECT_EQ(doc["kind"], "check");
  EXPECT_EQ(doc["pass"], true);
  const auto& c = doc["checks"].at(0);
  // dtype from the candidate's storage, form: the layer's chunk form.
  EXPECT_EQ(c["id"], kId);
  EXPECT_EQ(c["dtype"], "bf16");
  EXPECT_EQ(c["model_form"], "chunk");
  for (const auto& t : c["tensors"]) {
    EXPECT_TRUE(t["present"].get<bool>()) << t.dump();
    EXPECT_LE(t["max_ratio"].get<double>(), 1.0) << t.dump();  // rounding the exact result costs at most u per row
  }
}

TEST_F(CliCheck, StorageDtypeSetsTheModelAndDtypeOverridesIt) {
  // The oracle rounded to fp32 is a perfect fp32 kernel; judged as fp32, bf16 rounding is 2^16 times too coarse.
  ASSERT_EQ(check(candidate([](auto&) {}, DType::F32)).exit_code, 0);
  EXPECT_EQ(report_doc()["checks"][0]["dtype"], "fp32");
  const CliResult r = check(candidate(), {"--dtype", "fp32"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
}

TEST_F(CliCheck, ShiftedByOneTokenFails) {
  const std::string cand = candidate([](TensorMap<double>& t) {
    const Tensor<double> o = t.at("o");
    Tensor<double>& s = t.at("o");
    for (std::int64_t b = 0; b < o.shape[0]; ++b)
      for (std::int64_t tok = 0; tok < o.shape[1]; ++tok)
        for (std::int64_t h = 0; h < o.shape[2]; ++h)
          for (std::int64_t v = 0; v < o.shape[3]; ++v)
            s.data[index(s, b, tok, h, v)] = tok == 0 ? 0.0 : o.data[index(o, b, tok - 1, h, v)];
  });
  const CliResult r = check(cand);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(table_line(r.out, "o").find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: FAIL"), std::string::npos) << r.out;
  const auto doc = report_doc();
  EXPECT_EQ(doc["pass"], false);
  EXPECT_EQ(doc["checks"][0]["tensors"][0]["name"], "o");
  EXPECT_EQ(doc["checks"][0]["tensors"][0]["pass"], false);
  EXPECT_GT(doc["checks"][0]["tensors"][0]["max_ratio"].get<double>(), 8.0);
}

TEST_F(CliCheck, OneNanFailsAndTheTableNamesItsLocation) {
  const std::string cand = candidate(
      [](TensorMap<double>& t) { t.at("o").data[index(t.at("o"), 0, 4, 1, 2)] = std::numeric_limits<double>::quiet_NaN(); });
  const std::string junit = (out_dir() / "r.xml").string();
  const CliResult r = check(cand, {"--junit", junit});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string line = table_line(r.out, "o");
  EXPECT_NE(line.find("(0,4,1)"), std::string::npos) << r.out;
  EXPECT_NE(line.find("inf"), std::string::npos) << line;
  EXPECT_NE(line.find("FAIL"), std::string::npos) << line;
  EXPECT_NE(table_line(r.out, "ht").find("PASS"), std::string::npos) << r.out;
  const auto o = report_doc()["checks"][0]["tensors"][0];
  EXPECT_EQ(o["nan_count"], 1);
  EXPECT_EQ(o["nonfinite_failures"], 1);
  EXPECT_EQ(o["max_ratio"], "inf");
  EXPECT_EQ(o["first_nonfinite"], (nlohmann::json{{"b", 0}, {"t", 4}, {"h", 1}}));
  const std::string xml = slurp(junit);
  EXPECT_NE(xml.find("<failure"), std::string::npos) << xml;
  EXPECT_NE(xml.find("first at (0,4,1)"), std::string::npos) << xml;
}

TEST_F(CliCheck, TruncatedCandidateExits2AndLeavesNoReport) {
  const std::string cand = candidate();
  fs::resize_file(cand, fs::file_size(cand) - 5);
  const CliResult r = check(cand, {"--junit", (out_dir() / "r.xml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(cand), std::string::npos) << r.err;
  EXPECT_TRUE(entries_of(out_dir()).empty());
}

TEST_F(CliCheck, MisShapedCandidateExits2NamingTheTensor) {
  const std::string cand = candidate([](TensorMap<double>& t) {
    Tensor<double>& o = t.at("o");  // drop the last token: T = 6 instead of 7
    const std::int64_t per_token = o.shape[2] * o.shape[3];
    o.shape[1] -= 1;
    o.data.resize(o.data.size() - static_cast<std::size_t>(per_token));
  });
  const CliResult r = check(cand);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(cand + ": tensor 'o' has shape [1,6,2,3]"), std::string::npos) << r.err;
  EXPECT_TRUE(entries_of(out_dir()).empty());
}

TEST_F(CliCheck, CandidateWithoutOExits2) {
  const std::string cand = candidate([](TensorMap<double>& t) { t.erase("o"); });
  const CliResult r = check(cand);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(cand + ": missing tensor 'o'"), std::string::npos) << r.err;
  EXPECT_TRUE(entries_of(out_dir()).empty());
}

TEST_F(CliCheck, CandidateWithoutFinalStateListsItAbsent) {
  const CliResult r = check(candidate([](TensorMap<double>& t) { t.erase("ht"); }));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(table_line(r.out, "ht").find("absent"), std::string::npos) << r.out;
  EXPECT_EQ(report_doc()["checks"][0]["tensors"][1]["present"], false);
}

// --not-judged leaves a tensor out even where the candidate holds it, wrong in value
// or in shape: reported absent, the verdict the others'. 'o' and names the layer
// lacks are bad input.
TEST_F(CliCheck, NotJudgedTensorIsAbsentEvenWhenWrong) {
  const std::string wrong = candidate(
      [](TensorMap<double>& t) {
        for (double& x : t.at("ht").data) x = 2 * x + 1;
      },
      DType::BF16, "wrong.safetensors");
  const std::string misshaped = candidate(
      [](TensorMap<double>& t) {
        t.at("ht").shape = {1};
        t.at("ht").data = {0.0};
      },
      DType::BF16, "misshaped.safetensors");
  EXPECT_EQ(check(wrong).exit_code, 1);
  EXPECT_EQ(check(misshaped).exit_code, 2);
  for (const std::string& cand : {wrong, misshaped}) {
    const CliResult r = check(cand, {"--not-judged", "ht"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(table_line(r.out, "ht").find("absent"), std::string::npos) << r.out;
    EXPECT_EQ(report_doc()["checks"][0]["tensors"][1]["present"], false);
  }
}

TEST_F(CliCheck, NotJudgedOOrAnUnknownTensorExits2) {
  for (const std::string name : {"o", "dq", "nope"}) {
    const CliResult r = check(candidate(), {"--not-judged", name});
    EXPECT_EQ(r.exit_code, 2) << name << r.out << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("--not-judged: '" + name + "'"), std::string::npos) << r.err;
  }
}

// `ttrcheck oracle` stores MPFR-256 throughout; `check --oracle-tier mpfr`
// computes exactly that, so the report is the same byte for byte but for its
// `oracle` note (tier mpfr:256 vs stored), and the text but for the oracle line.
// The default (auto: double-double on these benign inputs) gives the same
// verdicts, and ratios equal to 1e-9 relative (its oracle differs from MPFR's by
// at most a float64 ulp: docs/oracle-tiers.md).
TEST_F(CliCheck, StoredOracleGivesTheSameReport) {
  const auto without_oracle_lines = [](const std::string& out) {
    std::istringstream in(out);
    std::string kept;
    for (std::string line; std::getline(in, line);)
      if (line.find(": oracle ") == std::string::npos) kept += line + "\n";
    return kept;
  };
  for (const std::string& cand : {candidate(), candidate([](TensorMap<double>& t) { t.at("o").data[5] += 1.0; },
                                                        DType::BF16, "bad.safetensors")}) {
    const CliResult computed = check(cand, {"--oracle-tier", "mpfr"});
    nlohmann::json a = report_doc();
    const CliResult fast = check(cand);
    nlohmann::json f = report_doc();
    const CliResult stored = check(cand, {"--oracle", oracle()});
    nlohmann::json b = report_doc();
    EXPECT_EQ(computed.exit_code, stored.exit_code) << cand;
    EXPECT_EQ(fast.exit_code, stored.exit_code) << cand;
    EXPECT_EQ(without_oracle_lines(computed.out), without_oracle_lines(stored.out));
    EXPECT_NE(computed.out.find(": oracle mpfr:256"), std::string::npos) << computed.out;
    EXPECT_NE(stored.out.find(": oracle stored"), std::string::npos) << stored.out;
    EXPECT_NE(fast.out.find(": oracle dd, estimated own error"), std::string::npos) << fast.out;
    EXPECT_EQ(a["checks"][0]["oracle"]["tier"], "mpfr:256");
    EXPECT_EQ(b["checks"][0]["oracle"]["tier"], "stored");
    EXPECT_EQ(f["checks"][0]["oracle"]["tier"], "dd");
    for (const auto& [i, t] : f["checks"][0]["tensors"].items()) {
      const nlohmann::json& m = a["checks"][0]["tensors"][std::stoul(i)];
      if (t["max_ratio"].is_number())
        EXPECT_NEAR(t["max_ratio"].get<double>(), m["max_ratio"].get<double>(), 1e-9 * m["max_ratio"].get<double>());
      else
        EXPECT_EQ(t["max_ratio"], m["max_ratio"]);
      EXPECT_EQ(t["pass"], m["pass"]);
    }
    a["checks"][0].erase("oracle");
    b["checks"][0].erase("oracle");
    EXPECT_EQ(a, b) << cand;
  }
}

TEST_F(CliCheck, OracleOfAnotherLayerExits2) {
  const CliResult r = check(candidate(), {"--oracle", vec("delta_rule", "oracle")});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(vec("delta_rule", "oracle") + ": oracle was written for layer 'delta_rule'"), std::string::npos)
      << r.err;
  EXPECT_TRUE(entries_of(out_dir()).empty());
}

TEST_F(CliCheck, OracleForAnotherConfigExits2) {
  const CliResult r = check(candidate(), {"--oracle", oracle(), "--set", "scale=0.25"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(oracle() + ": oracle config"), std::string::npos) << r.err;
}

// The oracle records a digest of the inputs it was computed from; one changed
// input value (same layer, config and shapes) makes it someone else's oracle.
TEST_F(CliCheck, OracleOfOtherInputsExits2) {
  ttr::io::TensorFile f = ttr::io::read_safetensors(inputs());
  auto& q = f.tensors.at("q");
  std::vector<double> values = ttr::io::to_f64(q, "q");
  values[0] += 0.0625;  // one value, by an amount every input dtype represents
  q = ttr::io::from_f64(values, q.shape, q.dtype);
  const std::string edited = work_ / "edited.inputs.safetensors";
  ttr::io::write_safetensors_atomic(edited, f);
  fs::create_directories(out_dir());
  const CliResult r = run_cli({"check", "--layer", kLayer, "--in", edited, "--candidate", candidate(), "--oracle",
                               oracle(), "--report", report()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(oracle() + ": oracle was computed from other inputs"), std::string::npos) << r.err;
  EXPECT_TRUE(entries_of(out_dir()).empty());
  // The unedited inputs carry the digest the oracle recorded.
  EXPECT_EQ(ttr::io::read_safetensors(oracle()).metadata.at("inputs_digest"),
            ttr::inputs_digest(read_tensors(inputs())));
}

// FNV-1a over nothing is its offset basis; every part of the input moves it.
TEST(InputsDigest, CoversNamesShapesAndValueBits) {
  EXPECT_EQ(ttr::inputs_digest({}), "fnv1a64:cbf29ce484222325");
  TensorMap<double> a;
  a["q"] = Tensor<double>{{1, 2}, 0.0};
  a["q"].data = {1.0, 2.0};
  const std::string base = ttr::inputs_digest(a);
  TensorMap<double> renamed;
  renamed["k"] = a["q"];
  TensorMap<double> reshaped = a;
  reshaped["q"].shape = {2, 1};
  TensorMap<double> signed_zero = a;
  signed_zero["q"].data = {1.0, 2.0};
  signed_zero["q"].data.push_back(-0.0);
  signed_zero["q"].shape = {1, 3};
  TensorMap<double> plus_zero = signed_zero;
  plus_zero["q"].data[2] = 0.0;
  EXPECT_NE(ttr::inputs_digest(renamed), base);
  EXPECT_NE(ttr::inputs_digest(reshaped), base);
  EXPECT_NE(ttr::inputs_digest(signed_zero), ttr::inputs_digest(plus_zero));
  EXPECT_EQ(ttr::inputs_digest(a), base);
}

TEST_F(CliCheck, InputsGivenAsOracleExit2) {
  const CliResult r = check(candidate(), {"--oracle", inputs()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(inputs()), std::string::npos) << r.err;
}

TEST_F(CliCheck, IdFallsBackToTheInputsFileName) {
  // Inputs without the suite/case metadata of `ttrcheck vectors` (made by a user's script).
  const std::string in = work_ / "mine.inputs.safetensors";
  ttr::test::write_tensors(in, read_tensors(inputs()));
  fs::create_directories(out_dir());
  const CliResult r =
      run_cli({"check", "--layer", kLayer, "--in", in, "--candidate", candidate(), "--report", report()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(report_doc()["checks"][0]["id"], "gated_delta_rule/chunk/bf16/mine");
}

TEST_F(CliCheck, BadUsageExits2) {
  EXPECT_EQ(check(candidate(), {"--dtype", "fp8"}).exit_code, 2);
  EXPECT_EQ(check(candidate(), {"--form", "scan"}).exit_code, 2);  // gated_delta_rule has no scan form
  EXPECT_EQ(check(candidate(), {"--samples", "0"}).exit_code, 2);
  const CliResult r = run_cli({"check", "--layer", kLayer, "--in", inputs(), "--candidate", candidate(), "--report",
                               (work_.path() / "no" / "such" / "r.json").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(one_line(r.err)) << r.err;
}

TEST_F(CliCheck, SameInputsAndSeedGiveByteIdenticalReports) {
  const std::string cand = candidate();
  const std::string junit = (out_dir() / "r.xml").string();
  ASSERT_EQ(check(cand, {"--junit", junit, "--seed", "11"}).exit_code, 0);
  const std::string report1 = slurp(report()), junit1 = slurp(junit);
  ASSERT_EQ(check(cand, {"--junit", junit, "--seed", "11"}).exit_code, 0);
  EXPECT_EQ(report1, slurp(report()));
  EXPECT_EQ(junit1, slurp(junit));
}

}  // namespace
