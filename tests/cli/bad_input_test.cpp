// Every error a user can cause gets one line on stderr naming the culprit, exit
// code 2, and leaves no output (nor a temporary) behind (docs/design.md, "Errors and exit codes").
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::TensorMap;
using ttr::test::CliResult;
using ttr::test::entries_of;
using ttr::test::run_cli;
using ttr::test::TempDir;

// One test's files: inputs in in/, the --out target in out/ (empty unless the
// command wrongly leaves something there).
class Workspace {
 public:
  Workspace() {
    fs::create_directories(in_dir());
    fs::create_directories(out_dir());
  }
  fs::path in_dir() const { return tmp_.path() / "in"; }
  fs::path out_dir() const { return tmp_.path() / "out"; }
  std::string in(const std::string& name = "inputs.safetensors") const { return (in_dir() / name).string(); }
  std::string out() const { return (out_dir() / "result.safetensors").string(); }
  const fs::path& root() const { return tmp_.path(); }

  // A valid input file for `layer` (the tiny suite's basic case), changed by `edit`,
  // with the metadata `ttrcheck vectors` records (layer and config) unless bare.
  template <class Edit>
  std::string inputs(const std::string& layer, Edit&& edit, bool bare = false, const std::string& name = "inputs.safetensors") {
    ttr::test::CaseInputs c = ttr::test::case_inputs(layer, "tiny", "basic");
    edit(c.tensors);
    std::map<std::string, std::string> meta;
    if (!bare) meta = ttr::base_metadata("inputs", ttr::find_layer(layer).spec, c.config);
    ttr::test::write_tensors(in(name), c.tensors, ttr::io::DType::F32, meta);
    return in(name);
  }
  std::string inputs(const std::string& layer) {
    return inputs(layer, [](TensorMap<double>&) {});
  }

 private:
  TempDir tmp_;
};

// Asserts the contract on a result: exit 2, exactly one line on stderr containing
// every culprit, nothing in `out_dir` (no output, no temporary).
void expect_bad_input(const CliResult& r, const std::vector<std::string>& culprits, const fs::path& out_dir,
                      const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n') << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be one line:\n" << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  for (const auto& c : culprits) EXPECT_NE(r.err.find(c), std::string::npos) << "'" << c << "' not named in: " << r.err;
  EXPECT_TRUE(entries_of(out_dir).empty()) << "left behind in " << out_dir << ": " << entries_of(out_dir).front();
}

// Runs `oracle` and `run` (fp32) with the same layer, input and extra arguments;
// both must reject the input the same way.
void expect_both_reject(const Workspace& ws, const std::string& layer, const std::string& input,
                        const std::vector<std::string>& extra, const std::vector<std::string>& culprits) {
  for (const std::string cmd : {"oracle", "run"}) {
    std::vector<std::string> args = {cmd, "--layer", layer, "--in", input, "--out", ws.out()};
    args.insert(args.end(), extra.begin(), extra.end());
    expect_bad_input(run_cli(args), culprits, ws.out_dir(), cmd);
  }
}

// ---------------------------------------------------------------- tensors

TEST(CliBadInput, MissingTensor) {
  Workspace ws;
  const auto in = ws.inputs("gated_delta_rule", [](TensorMap<double>& t) { t.erase("v"); });
  expect_both_reject(ws, "gated_delta_rule", in, {}, {in, "'v'"});
}

TEST(CliBadInput, MissingOptionalTensorIsFine) {
  Workspace ws;
  const auto in = ws.inputs("gated_delta_rule", [](TensorMap<double>& t) { t.erase("h0"); });
  const CliResult r = run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", ws.out()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliBadInput, ExtraTensor) {
  Workspace ws;
  const auto in = ws.inputs("delta_rule", [](TensorMap<double>& t) { t["bogus_extra"] = t.at("beta"); });
  expect_both_reject(ws, "delta_rule", in, {}, {in, "'bogus_extra'"});
}

// A tensor name is user text: a newline in it must not break the one-line rule.
TEST(CliBadInput, ExtraTensorWithControlCharactersInName) {
  Workspace ws;
  const auto in = ws.inputs("delta_rule", [](TensorMap<double>& t) { t["bad\nname\r"] = t.at("beta"); });
  expect_both_reject(ws, "delta_rule", in, {}, {in, "bad"});
}

TEST(CliBadInput, WrongRank) {
  Workspace ws;
  const auto in = ws.inputs("simple_gla", [](TensorMap<double>& t) {
    auto& q = t.at("q");
    q.shape = {q.shape[0], q.shape[1], q.shape[2] * q.shape[3]};  // [B,T,H*K]
  });
  expect_both_reject(ws, "simple_gla", in, {}, {in, "'q'", "rank"});
}

TEST(CliBadInput, InconsistentDims) {
  Workspace ws;
  // v with T = 6 while q and k have T = 7.
  const auto in = ws.inputs("linear_attn", [](TensorMap<double>& t) {
    auto& v = t.at("v");
    const std::int64_t per_token = v.shape[2] * v.shape[3];
    v.shape[1] -= 1;
    v.data.resize(v.data.size() - static_cast<std::size_t>(per_token));
  });
  expect_both_reject(ws, "linear_attn", in, {}, {in, "'v'", "T"});
}

TEST(CliBadInput, InconsistentKeyDim) {
  Workspace ws;
  // k with K = 5 while q has K = 4.
  const auto in = ws.inputs("gla", [](TensorMap<double>& t) {
    auto& k = t.at("k");
    k.shape[3] += 1;
    k.data.assign(static_cast<std::size_t>(ttr::numel(k.shape)), 0.25);
  });
  expect_both_reject(ws, "gla", in, {}, {in, "'k'"});
}

TEST(CliBadInput, WrongDtypeI64) {
  Workspace ws;
  const auto in = ws.in();
  ttr::test::CaseInputs c = ttr::test::case_inputs("delta_rule", "tiny", "basic");
  ttr::io::TensorFile f = ttr::to_file(c.tensors, ttr::io::DType::F32, {});
  auto& beta = c.tensors.at("beta");
  std::vector<double> ints(beta.data.size(), 1.0);
  f.tensors["beta"] = ttr::io::from_f64(ints, beta.shape, ttr::io::DType::I64);
  ttr::io::write_safetensors_atomic(in, f);
  expect_both_reject(ws, "delta_rule", in, {}, {in, "'beta'", "I64"});
}

TEST(CliBadInput, NaN) {
  Workspace ws;
  const auto in = ws.inputs("kda", [](TensorMap<double>& t) {
    t.at("q").data.at(5) = std::numeric_limits<double>::quiet_NaN();
  });
  expect_both_reject(ws, "kda", in, {}, {in, "'q'", "NaN"});
}

TEST(CliBadInput, Inf) {
  Workspace ws;
  const auto in = ws.inputs("kda", [](TensorMap<double>& t) {
    t.at("v").data.back() = std::numeric_limits<double>::infinity();
  });
  expect_both_reject(ws, "kda", in, {}, {in, "'v'", "Inf"});
}

TEST(CliBadInput, NegativeInfInLogDecay) {
  // g = log(0) = -inf is "in range" (<= 0) but not finite: still rejected.
  Workspace ws;
  const auto in = ws.inputs("gated_delta_rule", [](TensorMap<double>& t) {
    t.at("g").data.at(0) = -std::numeric_limits<double>::infinity();
  });
  expect_both_reject(ws, "gated_delta_rule", in, {}, {in, "'g'", "-Inf"});
}

TEST(CliBadInput, BetaOutOfRange) {
  Workspace ws;
  const auto in = ws.inputs("delta_rule", [](TensorMap<double>& t) { t.at("beta").data.at(3) = 1.5; });
  expect_both_reject(ws, "delta_rule", in, {}, {in, "'beta'", "1.5"});
}

TEST(CliBadInput, PositiveLogDecay) {
  Workspace ws;
  const auto in = ws.inputs("simple_gla", [](TensorMap<double>& t) { t.at("g").data.at(2) = 0.5; });
  expect_both_reject(ws, "simple_gla", in, {}, {in, "'g'", "0.5"});
}

// ---------------------------------------------------------------- layer and config

TEST(CliBadInput, UnknownLayer) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  expect_both_reject(ws, "no_such_layer", in, {}, {"'no_such_layer'"});
}

TEST(CliBadInput, UnknownConfigKey) {
  Workspace ws;
  const auto in = ws.inputs("pdn_exact");
  expect_both_reject(ws, "pdn_exact", in, {"--set", "lamda=1"}, {"'lamda'"});
}

TEST(CliBadInput, UnknownConfigKeyWithNewline) {
  Workspace ws;
  const auto in = ws.inputs("pdn_exact");
  expect_both_reject(ws, "pdn_exact", in, {"--set", "la\nmda=1"}, {"la"});
}

TEST(CliBadInput, MalformedSet) {
  Workspace ws;
  const auto in = ws.inputs("pdn_exact");
  expect_both_reject(ws, "pdn_exact", in, {"--set", "lambda"}, {"'lambda'"});
}

TEST(CliBadInput, ConfigOutOfRange) {
  Workspace ws;
  const auto in = ws.inputs("pdn_exact");
  for (const std::string v : {"0", "-1", "abc", "nan", "inf", "1e999", ""}) {
    SCOPED_TRACE("lambda=" + v);
    expect_both_reject(ws, "pdn_exact", in, {"--set", "lambda=" + v}, {"'lambda'", "'pdn_exact'"});
  }
}

TEST(CliBadInput, ConfigWrongType) {
  Workspace ws;
  const auto in = ws.inputs("gated_delta_rule");
  expect_both_reject(ws, "gated_delta_rule", in, {"--set", "use_qk_l2norm_in_kernel=maybe"},
                     {"'use_qk_l2norm_in_kernel'", "maybe"});
}

TEST(CliBadInput, MissingRequiredConfig) {
  Workspace ws;
  // No metadata: nothing supplies pdn_exact's required lambda.
  const auto in = ws.inputs("pdn_exact", [](TensorMap<double>&) {}, /*bare=*/true);
  expect_both_reject(ws, "pdn_exact", in, {}, {"'lambda'", "'pdn_exact'"});
}

TEST(CliBadInput, MissingRequiredConfigMetadataOfOtherLayer) {
  Workspace ws;
  // Metadata written for another layer is not used as pdn_exact's config.
  const auto in = ws.inputs("pdn_exact", [](TensorMap<double>&) {}, /*bare=*/true);
  ttr::io::TensorFile f = ttr::io::read_safetensors(in);
  f.metadata = ttr::base_metadata("inputs", ttr::find_layer("linear_attn").spec,
                                  ttr::Config::make(ttr::find_layer("linear_attn").spec, {}));
  ttr::io::write_safetensors_atomic(in, f);
  expect_both_reject(ws, "pdn_exact", in, {}, {"'lambda'"});
}

TEST(CliBadInput, BadConfigInMetadata) {
  Workspace ws;
  const auto in = ws.inputs("pdn_exact");
  ttr::io::TensorFile f = ttr::io::read_safetensors(in);
  f.metadata["config"] = R"({"lambda": "-3"})";
  ttr::io::write_safetensors_atomic(in, f);
  expect_both_reject(ws, "pdn_exact", in, {}, {"'lambda'"});
  f.metadata["config"] = "not json";
  ttr::io::write_safetensors_atomic(in, f);
  expect_both_reject(ws, "pdn_exact", in, {}, {in, "config"});
}

// ---------------------------------------------------------------- files

TEST(CliBadInput, NonexistentInput) {
  Workspace ws;
  const std::string in = ws.in("does_not_exist.safetensors");
  expect_both_reject(ws, "linear_attn", in, {}, {in});
}

TEST(CliBadInput, InputIsDirectory) {
  Workspace ws;
  const std::string in = ws.in_dir().string();
  expect_both_reject(ws, "linear_attn", in, {}, {in, "directory"});
}

TEST(CliBadInput, TruncatedFile) {
  Workspace ws;
  const auto good = ws.inputs("linear_attn");
  std::ifstream f(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 64u);
  // Cut inside the data, inside the header, and inside the 8-byte length.
  for (std::size_t keep : {bytes.size() - 3, std::size_t{20}, std::size_t{5}, std::size_t{0}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
    const std::string in = ws.in("truncated.safetensors");
    std::ofstream(in, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(keep));
    expect_both_reject(ws, "linear_attn", in, {}, {in});
  }
}

std::string with_header(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return out + header;
}

TEST(CliBadInput, MalformedHeaderJson) {
  Workspace ws;
  const std::string in = ws.in("malformed.safetensors");
  for (const std::string& header :
       {std::string(R"({"q": {"dtype": "F32", "shape": [1,)"), std::string("{\n\"q\"\n:\n[1,\n2"),
        std::string("not json at all"), std::string(R"({"q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})"
                                                    "junk")}) {
    SCOPED_TRACE(header);
    std::ofstream(in, std::ios::binary | std::ios::trunc) << with_header(header);
    expect_both_reject(ws, "linear_attn", in, {}, {in});
  }
}

TEST(CliBadInput, OutputDirectoryMissing) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  const std::string out = (ws.out_dir() / "no_such_dir" / "result.safetensors").string();
  for (const std::string cmd : {"oracle", "run"}) {
    expect_bad_input(run_cli({cmd, "--layer", "linear_attn", "--in", in, "--out", out}), {out, "no_such_dir"},
                     ws.out_dir(), cmd);
    EXPECT_FALSE(fs::exists(ws.out_dir() / "no_such_dir"));
  }
}

TEST(CliBadInput, OutputIsDirectory) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  for (const std::string cmd : {"oracle", "run"}) {
    const CliResult r = run_cli({cmd, "--layer", "linear_attn", "--in", in, "--out", ws.out_dir().string()});
    expect_bad_input(r, {ws.out_dir().string()}, ws.out_dir(), cmd);
  }
}

TEST(CliBadInput, OutputDirectoryReadOnly) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  const fs::path ro = ws.out_dir() / "read_only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
  struct Restore {
    fs::path p;
    ~Restore() {
      std::error_code ec;
      fs::permissions(p, fs::perms::owner_all, fs::perm_options::add, ec);
    }
  } restore{ro};
  // Root (CAP_DAC_OVERRIDE) writes through 0555: then the sub-case cannot be staged.
  const fs::path probe = ro / "probe";
  if (std::ofstream(probe).good()) {
    fs::remove(probe);
    GTEST_SKIP() << "running with privileges that ignore directory permissions (root?): a 0555 directory is "
                    "writable, so the read-only output case cannot be staged";
  }
  const std::string out = (ro / "result.safetensors").string();
  for (const std::string cmd : {"oracle", "run"}) {
    expect_bad_input(run_cli({cmd, "--layer", "linear_attn", "--in", in, "--out", out}), {out}, ro, cmd);
  }
}

// A directory no one may create files in, root included (procfs): the failure
// comes only at the final write, after the computation.
TEST(CliBadInput, OutputDirectoryUnwritableForRootToo) {
  const fs::path proc = "/proc/self";
  if (!fs::is_directory(proc)) GTEST_SKIP() << "no /proc on this system";
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  const std::string out = (proc / "ttrcheck_result.safetensors").string();
  for (const std::string cmd : {"oracle", "run"}) {
    expect_bad_input(run_cli({cmd, "--layer", "linear_attn", "--in", in, "--out", out}), {out, "cannot write"},
                     ws.out_dir(), cmd);
    EXPECT_FALSE(fs::exists(out));
  }
}

// An input error discovered after the output path was checked still leaves no file,
// and a pre-existing output is left untouched.
TEST(CliBadInput, ExistingOutputSurvivesFailure) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn", [](TensorMap<double>& t) { t.erase("q"); });
  const std::string out = ws.out();
  std::ofstream(out) << "previous";
  for (const std::string cmd : {"oracle", "run"}) {
    const CliResult r = run_cli({cmd, "--layer", "linear_attn", "--in", in, "--out", out});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    std::ifstream f(out);
    std::string s;
    f >> s;
    EXPECT_EQ(s, "previous");
    EXPECT_EQ(entries_of(ws.out_dir()).size(), 1u);
  }
}

// ---------------------------------------------------------------- run/oracle options

TEST(CliBadInput, UnknownArithmetic) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  for (const std::string a : {"fp8", "mpfr:abc", "mpfr:8", "FP32"}) {
    SCOPED_TRACE(a);
    expect_bad_input(run_cli({"run", "--layer", "linear_attn", "--in", in, "--out", ws.out(), "--arith", a}),
                     {"'" + a + "'"}, ws.out_dir(), a);
  }
}

TEST(CliBadInput, UnknownForm) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  expect_both_reject(ws, "linear_attn", in, {"--form", "foo"}, {"'foo'"});
}

TEST(CliBadInput, FormTheLayerLacks) {
  Workspace ws;
  int cases = 0;
  for (const auto& e : ttr::registry()) {
    for (ttr::Form f : {ttr::Form::chunk, ttr::Form::scan}) {
      if (e.has_form(f)) continue;
      ++cases;
      const auto layer_in = ws.inputs(e.spec.name, [](TensorMap<double>&) {}, false, e.spec.name + ".safetensors");
      expect_both_reject(ws, e.spec.name, layer_in, {"--form", ttr::form_name(f)},
                         {"'" + e.spec.name + "'", ttr::form_name(f)});
    }
  }
  if (cases == 0) GTEST_SKIP() << "every layer has every form: no missing form to ask for";
}

TEST(CliBadInput, BadOptionValues) {
  Workspace ws;
  const auto in = ws.inputs("linear_attn");
  expect_bad_input(run_cli({"oracle", "--layer", "linear_attn", "--in", in, "--out", ws.out(), "--bits", "3"}),
                   {"--bits"}, ws.out_dir(), "--bits 3");
  expect_bad_input(run_cli({"oracle", "--layer", "linear_attn", "--in", in, "--out", ws.out(), "--frobnicate"}),
                   {"--frobnicate"}, ws.out_dir(), "unknown option");
  expect_bad_input(run_cli({"oracle", "--layer", "linear_attn", "--in", in}), {"--out"}, ws.out_dir(),
                   "missing --out");
}

// ---------------------------------------------------------------- vectors

TEST(CliBadInput, VectorsUnknownSuite) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "vecs";
  const CliResult r = run_cli({"vectors", "--layer", "all", "--suite", "no_such_suite", "--out", dir.string()});
  expect_bad_input(r, {"'no_such_suite'"}, dir, "vectors");
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CliBadInput, VectorsUnknownLayer) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "vecs";
  const CliResult r = run_cli({"vectors", "--layer", "nope", "--suite", "tiny", "--out", dir.string()});
  expect_bad_input(r, {"'nope'"}, dir, "vectors");
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CliBadInput, VectorsOutIsAFile) {
  TempDir tmp;
  const fs::path file = tmp.path() / "a_file";
  std::ofstream(file) << "x";
  const CliResult r = run_cli({"vectors", "--layer", "linear_attn", "--suite", "tiny", "--out", file.string()});
  expect_bad_input(r, {file.string()}, tmp.path() / "nothing_here", "vectors");
  EXPECT_EQ(entries_of(tmp.path()).size(), 1u);
}

}  // namespace
