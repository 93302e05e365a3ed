// The gate on the built-in kernels: correct kernels pass the default suite (one
// seed per case here; tests/gate/gate_calibration_slow_test.cpp runs 1000), and
// every catalogued mutant fails it — the catalogue is enumerated, so a new
// mutant is covered as soon as it is added.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "gate/gate.hpp"
#include "gate/mutants.hpp"
#include "oracles/slices.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

TEST(Gate, CorrectKernelsPassTheDefaultSuite) {
  GateOptions o;
  o.seeds = 1;
  const GateResult r = run_gate(o);
  double worst = 0;
  std::string at;
  for (const GateCheck& c : r.checks) {
    EXPECT_TRUE(c.result.pass) << c.id;
    for (const TensorVerdict& v : c.result.tensors)
      if (v.present && v.max_ratio > worst) {
        worst = v.max_ratio;
        at = c.id + " " + v.name;
      }
  }
  EXPECT_TRUE(r.pass);
  EXPECT_GT(r.checks.size(), 100u);  // every chunk/scan form × {bf16, fp32} × the suite's cases
  std::printf("default suite, 1 seed per case: %zu checks, largest error ratio %.3g (%s), threshold %g\n",
              r.checks.size(), worst, at.c_str(), kRatioThreshold);
}

TEST(Gate, EveryMutantFailsTheDefaultGate) {
  ASSERT_GE(mutant_catalogue().size(), 12u);
  for (const MutantInfo& m : mutant_catalogue()) {
    // NaN/Inf mutants need special inputs (zero keys, H_t = 0) that the gate's
    // random draws are not relied on to contain: tests/fuzz proves the fuzzer
    // finds each of them instead.
    if (m.needs.special != SpecialInput::none) continue;
    // The gate is forward-only; tests/varlen/varlen_mutants_test.cpp proves this one with check --backward.
    if (m.id == kVarlenDh0FromPrevious) continue;
    GateOptions o;
    o.seeds = 1;
    o.mutant = m.name;
    o.fail_fast = true;
    std::set<std::string> layers;
    std::set<Form> forms;
    for (const MutantTarget& t : m.targets) {
      layers.insert(t.layer);
      forms.insert(t.form);
    }
    o.layers.assign(layers.begin(), layers.end());
    o.forms.assign(forms.begin(), forms.end());
    // The varlen mutants need a varlen batch: the suite's `varlen` case only.
    if (std::count(m.needs.inputs.begin(), m.needs.inputs.end(), "cu_seqlens")) o.cases = {"varlen"};
    const GateResult r = run_gate(o);
    EXPECT_FALSE(r.pass) << "mutant " << m.name << " passed the default gate";
    for (const GateCheck& c : r.checks)
      if (!c.result.pass) {
        std::printf("%-30s caught by %s\n", m.name.c_str(), c.id.c_str());
        break;
      }
  }
}

TEST(GateCli, WritesReportsAndExitsByVerdict) {
  TempDir dir;
  const CliResult ok = run_cli({"gate", "--layer", "simple_gla", "--seeds", "1", "--out", dir / "ok"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("simple_gla/chunk/bf16"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("PASS"), std::string::npos);
  const auto files = entries_of(dir.path() / "ok");
  EXPECT_TRUE(std::count(files.begin(), files.end(), "report.json"));
  EXPECT_TRUE(std::count(files.begin(), files.end(), "junit.xml"));
  const CliResult bad = run_cli({"gate", "--layer", "simple_gla", "--seeds", "1", "--mutant", "causal-mask-strict",
                                 "--out", dir / "bad"});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.out.find("FAIL"), std::string::npos);
  EXPECT_EQ(run_cli({"gate", "--suite", "nope"}).exit_code, 2);
  EXPECT_EQ(run_cli({"gate", "--layer", "nope"}).exit_code, 2);
  EXPECT_EQ(run_cli({"gate", "--mutant", "nope"}).exit_code, 2);
  EXPECT_EQ(run_cli({"gate", "--case", "nope"}).exit_code, 2);
}

}  // namespace
}  // namespace ttr::test
