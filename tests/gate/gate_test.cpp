// The gate on the built-in kernels: correct kernels pass the default suite,
// forward and backward (one seed per case here; tests/gate/
// gate_calibration_slow_test.cpp runs 1000), and every catalogued mutant, forward
// or backward, fails it — the catalogue is enumerated, so a new mutant is covered
// as soon as it is added.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "gate/gate.hpp"
#include "gate/mutants.hpp"
#include "gate/report.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/slices.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

// The default suite's plan as the registry and the suite state it: per layer
// (registry order), its forward unit per case, then its backward unit per case,
// each unit one check per swept chunk/scan form of that direction × {bf16, fp32}
// (sequential_dg_sum, a foreign kernel's model, only when named). Unit k is
// shard k mod N's (gate/shard.hpp).
std::vector<std::set<std::string>> default_suite_plan() {
  std::vector<std::set<std::string>> units;
  for (const LayerEntry& e : registry())
    for (Direction d : {Direction::forward, Direction::backward}) {
      std::vector<Form> forms;
      for (Form f : e.form_list(d))
        if (f != Form::sequential && sweeps_by_default(f)) forms.push_back(f);
      if (forms.empty()) continue;
      for (const GateCase& c : gate_cases("default")) {
        if (d == Direction::backward && c.no_backward.count(e.spec.name)) continue;
        std::set<std::string> ids;
        for (Form f : forms)
          for (const char* dtype : {"bf16", "fp32"})
            ids.insert(fmt::format("{}/{}/{}/{}/0{}", e.spec.name, form_name(f), dtype, c.name,
                                   d == Direction::backward ? "/backward" : ""));
        units.push_back(std::move(ids));
      }
    }
  return units;
}

// The README's main job, split into five CTest tests (each ~1/5 of it: the
// whole took 447 s of CI's 600 s test timeout on 2 loaded cores), every shard
// checked against the plan above: its units and their checks exactly, every
// check passing, gradients judged (dq first) in the backward ones. Five, not
// four: a layer has 7 units per direction, 14 with gradients, and with four
// shards its heavy `realistic` units all fell on shards 0 and 2 (305 s and 190 s
// against 28 s and 18 s); 5 is coprime with both, so they rotate over the shards.
constexpr std::uint64_t kDefaultSuiteShards = 5;

class GateDefaultSuite : public ::testing::TestWithParam<std::uint64_t> {};

TEST(Gate, DefaultSuitePlanHasEveryBackwardForm) {
  const std::vector<std::set<std::string>> plan = default_suite_plan();
  std::size_t backward = 0, forward = 0;
  for (const auto& u : plan) (u.begin()->ends_with("/backward") ? backward : forward) += u.size();
  EXPECT_GT(forward, 100u);  // every chunk/scan form × {bf16, fp32} × the suite's cases
  EXPECT_GE(backward, 2u * 6u * gate_cases("default").size());  // the delta family's six chunk backward forms at least
}

// The production suite is the `vectors` production suite: the same cases, shapes and
// offsets (B=4 T=4096 H=8 K=V=128; T=16384; 16 sequences, 32768 tokens), one seed each,
// chunk 64; an unknown case of it is bad input.
TEST(Gate, ProductionSuiteIsTheVectorsProductionSuite) {
  const std::vector<GateCase> g = gate_cases("production");
  const std::vector<VectorCase> v = suite_cases(find_layer("gated_delta_rule").spec, "production");
  ASSERT_EQ(g.size(), 3u);
  ASSERT_EQ(g.size(), v.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].name, v[i].name);
    EXPECT_EQ(g[i].dims, v[i].dims) << g[i].name;
    EXPECT_EQ(g[i].regime.cu_seqlens, v[i].regime.cu_seqlens) << g[i].name;
    EXPECT_EQ(g[i].seeds, 1) << g[i].name;
    EXPECT_EQ(g[i].chunk_size, 64) << g[i].name;
  }
  EXPECT_EQ(g[0].dims.at("B") * g[0].dims.at("T") * g[0].dims.at("H"), 4 * 4096 * 8);
  EXPECT_EQ(g[1].dims.at("T"), 16384);
  ASSERT_EQ(g[2].regime.cu_seqlens.size(), 17u);
  EXPECT_EQ(g[2].regime.cu_seqlens.back(), 32768);
  const CliResult bad = run_cli({"gate", "--suite", "production", "--case", "small"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("suite 'production' has no case 'small'"), std::string::npos) << bad.err;
}

// --form keeps the kernels of those forms only; an unknown form is bad input.
TEST(Gate, FormOptionKeepsThoseForms) {
  TempDir dir;
  const CliResult r = run_cli({"gate", "--layer", "simple_gla", "--case", "small", "--direction", "forward", "--form",
                               "scan", "--seeds", "1", "--no-cuda", "--out", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(io::read_text_file(dir / "report.json"));
  ASSERT_EQ(j.at("checks").size(), 2u);  // scan × {bf16, fp32}
  for (const auto& c : j.at("checks"))
    EXPECT_NE(c.at("id").get<std::string>().find("simple_gla/scan/"), std::string::npos) << c.at("id");
  const CliResult bad = run_cli({"gate", "--form", "blocked"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown form 'blocked'"), std::string::npos) << bad.err;
}

// A case's no_backward names registered layers, and the full suite leaves no
// backward unit out: what the default suite skips for time, the full one runs.
TEST(Gate, SkippedBackwardUnitsAreNamedAndRunInTheFullSuite) {
  std::size_t skipped = 0;
  for (const GateCase& c : gate_cases("default"))
    for (const std::string& layer : c.no_backward) {
      EXPECT_NO_THROW(find_layer(layer)) << c.name << ": " << layer;
      EXPECT_FALSE(find_layer(layer).form_list(Direction::backward).empty()) << layer << " has no backward to skip";
      ++skipped;
    }
  EXPECT_EQ(skipped, 1u);  // gka on `realistic` (gate/gate.cpp says why)
  for (const GateCase& c : gate_cases("full")) EXPECT_TRUE(c.no_backward.empty()) << c.name;
}

TEST_P(GateDefaultSuite, CorrectKernelsPass) {
  const std::vector<std::set<std::string>> plan = default_suite_plan();
  GateOptions o;
  o.seeds = 1;
  o.shard = {GetParam(), kDefaultSuiteShards, "test"};
  const GateResult r = run_gate(o);
  EXPECT_TRUE(r.pass);
  EXPECT_EQ(r.units, plan.size());
  std::map<std::size_t, std::set<std::string>> ran;
  double worst = 0;
  std::string at;
  std::size_t backward = 0;
  for (const GateCheck& c : r.checks) {
    EXPECT_TRUE(c.result.pass) << c.id;
    EXPECT_EQ(c.unit % kDefaultSuiteShards, GetParam()) << c.id;
    ran[c.unit].insert(c.id);
    if (c.id.ends_with("/backward")) {
      ++backward;
      EXPECT_EQ(c.result.direction, Direction::backward) << c.id;
      ASSERT_FALSE(c.result.tensors.empty());
      EXPECT_EQ(c.result.tensors.front().name, "dq") << c.id;
    }
    for (const TensorVerdict& v : c.result.tensors)
      if (v.present && v.max_ratio > worst) {
        worst = v.max_ratio;
        at = c.id + " " + v.name;
      }
  }
  for (std::size_t k = GetParam(); k < plan.size(); k += kDefaultSuiteShards) {
    ASSERT_TRUE(ran.count(k)) << "unit " << k << " of the plan (" << *plan[k].begin() << " …) did not run";
    EXPECT_EQ(ran[k], plan[k]) << "unit " << k;
  }
  EXPECT_EQ(ran.size(), (plan.size() + kDefaultSuiteShards - 1 - GetParam()) / kDefaultSuiteShards);
  std::printf("default suite shard %llu/%llu, 1 seed per case: %zu checks (%zu backward), largest error ratio %.3g (%s), "
              "threshold %g\n",
              static_cast<unsigned long long>(GetParam()), static_cast<unsigned long long>(kDefaultSuiteShards),
              r.checks.size(), backward, worst, at.c_str(), kRatioThreshold);
}
INSTANTIATE_TEST_SUITE_P(Shards, GateDefaultSuite, ::testing::Range<std::uint64_t>(0, kDefaultSuiteShards));

// The cases of the default suite on which a mutant's conditions hold (its
// optional inputs drawn, chunk size, partial last chunk, number of chunks), and
// the layers among its targets whose gate configuration meets its config pairs:
// the gate fails the mutant there (and so fails it on the whole suite), without
// paying for the units where it cannot bite.
std::vector<std::string> cases_meeting(const MutantConditions& n) {
  std::vector<std::string> out;
  for (const GateCase& c : gate_cases("default")) {
    const std::int64_t T = c.dims.at("T"), C = c.chunk_size;
    if (!n.inputs.empty() && !c.regime.optional_inputs) continue;
    if (C < n.min_chunk_size || T < n.min_chunks * C || (n.partial_last_chunk && T % C == 0)) continue;
    out.push_back(c.name);
  }
  return out;
}
bool gate_config_meets(const std::string& layer, const MutantConditions& n) {
  const LayerSpec& spec = find_layer(layer).spec;
  const Config cfg = Config::make(spec, gate_config(spec));
  for (const auto& [key, value] : n.config)
    if (!cfg.has(key) || cfg.text(key) != value) return false;
  return true;
}

// The gradients each GKA chunk backward mutant changes (gate/mutants.cpp, its
// description; reference/gka/chunk_backward.hpp, its injection point): the gate
// must fail it on these and on no other — a gradient the bug leaves alone is
// computed bit for bit as by the correct kernel, so failing there would be a false
// alarm that happens to coincide with the bug. dq and dv are never among the H-path
// bugs' (the readout and Lemma 2 do not read the reversed iteration).
const std::map<std::string, std::set<std::string>>& gka_backward_mutant_gradients() {
  static const std::set<std::string> h_path = {"dk", "dg", "dbeta", "dhkk0"};
  static const std::map<std::string, std::set<std::string>> m = {
      {"gka-lambda-gradient-dropped", h_path},
      {"gka-alg2-printed-q-sign", h_path},
      {"gka-adjoint-recursion-sign", h_path},
      {"gka-chebyshev-adjoint-step-short", h_path},
      {"gka-adjoint-solve-step-short", {"dq"}},
      {"gka-dalpha-dropped", {"dalpha"}},
      {"gka-dg-revcumsum-exclusive", {"dg"}},
      {"gka-dh-not-carried", h_path},
  };
  return m;
}

TEST(Gate, EveryMutantFailsTheDefaultGate) {
  ASSERT_GE(mutant_catalogue().size(), 12u);
  for (const MutantInfo& m : mutant_catalogue()) {
    // NaN/Inf mutants need special inputs (zero keys, H_t = 0) that the gate's
    // random draws are not relied on to contain: tests/fuzz proves the fuzzer
    // finds each of them instead.
    if (m.needs.special != SpecialInput::none) continue;
    // Proved with check --backward on varlen files by tests/varlen/varlen_mutants_test.cpp.
    if (m.id == kVarlenDh0FromPrevious) continue;
    GateOptions o;
    o.seeds = 1;
    o.mutant = m.name;
    o.fail_fast = true;
    // One unit at a time: fail_fast then stops at the first failing unit, where a
    // second thread would finish a unit begun beside it for nothing (CTest runs
    // other tests on the other core meanwhile).
    o.threads = 1;
    o.directions = {m.direction()};
    // The varlen mutants need a varlen batch: the suite's `varlen` case only.
    const bool varlen = std::count(m.needs.inputs.begin(), m.needs.inputs.end(), "cu_seqlens") > 0;
    o.cases = varlen ? std::vector<std::string>{"varlen"} : cases_meeting(m.needs);
    ASSERT_FALSE(o.cases.empty()) << m.name << ": no case of the default suite meets its conditions";
    std::set<std::string> layers;
    std::set<Form> forms;
    for (const MutantTarget& t : m.targets)
      if (gate_config_meets(t.layer, m.needs)) {
        layers.insert(t.layer);
        forms.insert(t.form);
      }
    ASSERT_FALSE(layers.empty()) << m.name << ": no target's gate configuration meets its config";
    o.layers.assign(layers.begin(), layers.end());
    o.forms.assign(forms.begin(), forms.end());
    const GateResult r = run_gate(o);
    EXPECT_FALSE(r.pass) << "mutant " << m.name << " passed the default gate";
    for (const GateCheck& c : r.checks)
      if (!c.result.pass) {
        // The failing tensor and its worst row, as the report names them.
        std::string worst;
        for (const TensorVerdict& v : c.result.tensors)
          if (!v.pass) {
            worst = fmt::format("{} ratio {:.3g} at (b,t,h) ({},{},{})", v.name, v.max_ratio, v.worst.b, v.worst.t,
                                v.worst.h);
            break;
          }
        std::printf("%-36s caught by %s: %s\n", m.name.c_str(), c.id.c_str(), worst.c_str());
        if (m.direction() == Direction::backward) {
          EXPECT_TRUE(c.id.ends_with("/backward")) << c.id;
        }
        break;
      }
    // A GKA backward mutant is caught for the right reason: every failing gradient
    // of every failing check is one the bug touches.
    const auto& gka = gka_backward_mutant_gradients();
    if (const auto it = gka.find(m.name); it != gka.end()) {
      for (const GateCheck& c : r.checks)
        for (const TensorVerdict& v : c.result.tensors)
          if (v.present && !v.pass) {
            EXPECT_TRUE(it->second.count(v.name)) << m.name << ": " << c.id << " fails " << v.name
                                                  << ", a gradient the bug does not touch";
          }
    }
  }
  // Every GKA backward mutant of the catalogue has its gradients listed above.
  for (const MutantInfo& m : mutant_catalogue())
    if (m.direction() == Direction::backward && m.affects("gka", Form::chunk, Direction::backward)) {
      EXPECT_TRUE(gka_backward_mutant_gradients().count(m.name)) << m.name;
    }
}

// The one localized backward bug is found where it is: the failing tensor is dq
// and the worst row is the first token of a chunk (t a multiple of C).
TEST(Gate, LocalizedBackwardBugIsNamedByItsRow) {
  GateOptions o;
  o.seeds = 1;
  o.mutant = "dq-first-token-intra-dropped";
  o.directions = {Direction::backward};
  o.layers = {"gated_delta_rule"};
  o.cases = {"small"};
  const GateResult r = run_gate(o);
  ASSERT_EQ(r.checks.size(), 2u);  // bf16, fp32
  for (const GateCheck& c : r.checks) {
    EXPECT_FALSE(c.result.pass) << c.id;
    const TensorVerdict& dq = c.result.tensors.front();
    ASSERT_EQ(dq.name, "dq");
    EXPECT_FALSE(dq.pass);
    EXPECT_EQ(dq.worst.t % 16, 0) << c.id << ": worst dq row at t = " << dq.worst.t;
    for (const TensorVerdict& v : c.result.tensors) {
      if (v.name == "dv" || v.name == "dbeta") {
        EXPECT_TRUE(v.pass) << c.id << " " << v.name;
      }
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
  const CliResult no_dir = run_cli({"gate", "--direction", "sideways", "--out", dir / "none"});
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_NE(no_dir.err.find("sideways"), std::string::npos) << no_dir.err;
}

// `--direction backward`: only backward checks, ids ending in /backward, the
// direction in the JSON report and JUnit; a backward mutant fails with the
// gradient named; baselines carry the backward rows.
TEST(GateCli, BackwardDirectionReportsAndBaselines) {
  TempDir dir;
  const std::vector<std::string> base = {"gate", "--layer", "gated_delta_rule", "--case", "small", "--seeds", "1",
                                         "--direction", "backward", "--no-cuda"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  const CliResult ok = with({"--out", dir / "ok"});
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("gated_delta_rule/chunk/bf16/backward"), std::string::npos) << ok.out;
  const nlohmann::json rep = nlohmann::json::parse(io::read_text_file(dir / "ok/report.json"));
  ASSERT_EQ(rep["checks"].size(), 2u);
  for (const auto& c : rep["checks"]) {
    EXPECT_EQ(c["direction"], "backward");
    EXPECT_TRUE(c["id"].get<std::string>().ends_with("/small/0/backward")) << c["id"];
    std::set<std::string> names;
    for (const auto& t : c["tensors"]) names.insert(t["name"].get<std::string>());
    EXPECT_EQ(names, (std::set<std::string>{"dq", "dk", "dv", "dg", "dbeta"}));  // no h0: no dh0
  }
  const CliResult bad = with({"--mutant", "dg-query-term-dropped", "--out", dir / "bad"});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find(" dg "), std::string::npos) << bad.out;  // the worst tensor of the verdict line
  const std::string junit = io::read_text_file(dir / "bad/junit.xml");
  EXPECT_NE(junit.find("dg: max ratio"), std::string::npos) << junit;

  // Baselines: recorded from the backward report, compared with itself (pass) and
  // with the mutant's report (the dg row of each backward check regresses).
  const std::string bl = dir / "baseline.json";
  ASSERT_EQ(run_cli({"baseline", "record", "--report", dir / "ok/report.json", "--out", bl}).exit_code, 0);
  const nlohmann::json b = nlohmann::json::parse(io::read_text_file(bl));
  ASSERT_TRUE(b["checks"].contains("gated_delta_rule/chunk/bf16/small/0/backward")) << b.dump();
  EXPECT_TRUE(b["checks"]["gated_delta_rule/chunk/bf16/small/0/backward"].contains("dg"));
  EXPECT_EQ(run_cli({"baseline", "compare", "--baseline", bl, "--report", dir / "ok/report.json"}).exit_code, 0);
  const CliResult reg = run_cli({"baseline", "compare", "--baseline", bl, "--report", dir / "bad/report.json"});
  EXPECT_EQ(reg.exit_code, 1) << reg.out;
  EXPECT_NE(reg.out.find("regression: gated_delta_rule/chunk/bf16/small/0/backward dg"), std::string::npos) << reg.out;
}

}  // namespace
}  // namespace ttr::test
