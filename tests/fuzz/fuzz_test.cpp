// `ttrcheck fuzz` (fuzz/campaign.cpp, docs/fuzzing.md): bounded campaigns find each
// planted NaN/Inf bug and their reproducers replay to a failure through the CLI;
// the minimiser keeps the failure and strictly shrinks; a case budget makes a
// campaign bit-identical; correct kernels give no NaN finding; bad options exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fuzz/campaign.hpp"
#include "fuzz/reproducer.hpp"
#include "gate/mutants.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Planted {
  const char* mutant;
  const char* layer;
  const char* target;
};
// Each NaN/Inf mutant of the catalogue on a layer it affects, in one of the two dtypes.
const Planted kPlanted[] = {{"gate-exp-unmasked", "gated_delta_rule", "cpu:bf16"},
                            {"kaczmarz-eps-dropped", "kaczmarz_delta_rule", "cpu:fp32"},
                            {"gka-zero-norm-unguarded", "gka", "cpu:bf16"}};
constexpr std::int64_t kPlantedBudget = 120;  // cases: a bounded campaign

fuzz::CampaignResult campaign(const LayerEntry& layer, const fuzz::Target& t, std::int64_t cases, std::uint64_t seed,
                              int max_findings = 1) {
  fuzz::CampaignOptions o;
  o.budget.cases = cases;
  o.seed = seed;
  o.max_findings = max_findings;
  return fuzz::run_campaign(layer, t, o);
}

// The catalogue states the special inputs of the three NaN/Inf mutants, and the
// correct form is finite on exactly those inputs while the mutant is not.
TEST(FuzzPlanted, CatalogueStatesTheSpecialInputs) {
  for (const Planted& p : kPlanted) {
    SCOPED_TRACE(p.mutant);
    const MutantInfo& m = mutant_info(parse_mutant(p.mutant));
    EXPECT_NE(m.needs.special, SpecialInput::none);
    EXPECT_FALSE(std::string(special_input_text(m.needs.special)).empty());
  }
}

// Planted bugs are found: a campaign of kPlantedBudget cases finds a non-finite
// failure; the reproducer's stored candidate and its re-run through `ttrcheck
// run --mutant` both fail `ttrcheck check` (exit 1), with the commands the note gives.
TEST(FuzzPlanted, EachIsFoundAndItsReproducerReplaysToAFailure) {
  for (const Planted& p : kPlanted) {
    SCOPED_TRACE(p.mutant);
    const LayerEntry& layer = find_layer(p.layer);
    const auto target = fuzz::make_target(fuzz::parse_target(p.target), layer, Form::chunk, 16, parse_mutant(p.mutant));
    const fuzz::CampaignResult r = campaign(layer, *target, kPlantedBudget, 1);
    ASSERT_GE(r.first_finding_case, 0) << "not found in " << kPlantedBudget << " cases";
    ASSERT_FALSE(r.findings.empty());
    const fuzz::Finding& f = r.findings.front();
    EXPECT_EQ(f.kind, fuzz::FindingKind::nonfinite);
    EXPECT_FALSE(f.check.pass);
    EXPECT_GT(fuzz::nonfinite_failures(f.check), 0);
    std::printf("%-24s %-20s %s: first finding at case %lld (%.2f s), T %lld -> %lld\n", p.mutant, p.layer, p.target,
                static_cast<long long>(r.first_finding_case), r.first_finding_seconds,
                static_cast<long long>(f.original.dims.at("T")), static_cast<long long>(f.minimised.dims.at("T")));

    const TempDir dir;
    const fuzz::CampaignInfo info{p.layer, p.target, Form::chunk, 16, fuzz::Objective::nan, 1, {kPlantedBudget, 0},
                                  p.mutant};
    const auto stems = fuzz::write_reproducers(dir.path(), layer, *target, info, r);
    ASSERT_EQ(stems.size(), r.findings.size());
    const nlohmann::json note = nlohmann::json::parse(slurp(dir.path() / (stems[0] + ".json")));
    EXPECT_EQ(note["layer"], p.layer);
    EXPECT_EQ(note["target"], p.target);
    EXPECT_EQ(note["kind"], "nonfinite");
    EXPECT_EQ(note["replay"]["expected_exit"], 1);
    // The note's check command, with the directory's files.
    const std::string dtype = std::string(p.target).substr(4);
    const std::string in = dir / (stems[0] + ".inputs.safetensors");
    const std::vector<std::string> check_tail = {"--dtype", dtype, "--form", "chunk", "--chunk-size", "16"};
    EXPECT_EQ(note["replay"]["check"],
              fmt::format("ttrcheck check --layer {} --in {}.inputs.safetensors --candidate {}.candidate.safetensors "
                          "--dtype {} --form chunk --chunk-size 16",
                          p.layer, stems[0], stems[0], dtype));
    std::vector<std::string> check = {"check", "--layer", p.layer, "--in", in, "--candidate",
                                      dir / (stems[0] + ".candidate.safetensors")};
    check.insert(check.end(), check_tail.begin(), check_tail.end());
    const CliResult stored = run_cli(check);
    EXPECT_EQ(stored.exit_code, 1) << stored.out << stored.err;
    // Re-running the kernel from the inputs file (the note's `rerun` pair).
    const CliResult rerun = run_cli({"run", "--layer", p.layer, "--in", in, "--out", dir / "rerun.safetensors",
                                     "--arith", dtype, "--form", "chunk", "--chunk-size", "16", "--mutant", p.mutant});
    ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
    check[6] = dir / "rerun.safetensors";
    const CliResult replayed = run_cli(check);
    EXPECT_EQ(replayed.exit_code, 1) << replayed.out << replayed.err;
    // And without the mutant the same inputs pass: the failure is the bug's.
    ASSERT_EQ(run_cli({"run", "--layer", p.layer, "--in", in, "--out", dir / "ok.safetensors", "--arith", dtype,
                       "--form", "chunk", "--chunk-size", "16"})
                  .exit_code,
              0);
    check[6] = dir / "ok.safetensors";
    const CliResult ok = run_cli(check);
    EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  }
}

// The minimiser keeps the failure and strictly shrinks: on every planted bug's
// first finding, and on a hand-made large case (T = 64, B·H = 4, a zero key at
// every fifth token) where the result must be a single sequence of fewer tokens.
TEST(FuzzMinimiser, KeepsTheFailureAndStrictlyShrinks) {
  const auto check_shrunk = [](const fuzz::Case& a, const fuzz::Case& b) {
    const fuzz::CaseSize x = fuzz::size_of(a), y = fuzz::size_of(b);
    EXPECT_LE(y.T, x.T);
    EXPECT_LE(y.sequences, x.sequences);
    EXPECT_LE(y.nonzeros, x.nonzeros);
    EXPECT_TRUE(y.T < x.T || y.sequences < x.sequences || y.nonzeros < x.nonzeros || y.magnitude < x.magnitude)
        << "not strictly smaller";
  };
  for (const Planted& p : kPlanted) {
    SCOPED_TRACE(p.mutant);
    const LayerEntry& layer = find_layer(p.layer);
    const auto target = fuzz::make_target(fuzz::parse_target(p.target), layer, Form::chunk, 16, parse_mutant(p.mutant));
    const fuzz::CampaignResult r = campaign(layer, *target, kPlantedBudget, 2);
    ASSERT_FALSE(r.findings.empty());
    const fuzz::Finding& f = r.findings.front();
    EXPECT_TRUE(fuzz::still_fails(layer, *target, f.kind, f.original));
    EXPECT_TRUE(fuzz::still_fails(layer, *target, f.kind, f.minimised));
    check_shrunk(f.original, f.minimised);
  }
  // Hand-made: kaczmarz with zero keys planted, no campaign involved.
  const LayerEntry& kz = find_layer("kaczmarz_delta_rule");
  const auto target =
      fuzz::make_target(fuzz::parse_target("cpu:fp32"), kz, Form::chunk, 16, Mutant::kaczmarz_eps_dropped);
  fuzz::Case big;
  big.family = "hand";
  big.dims = {{"B", 2}, {"T", 64}, {"H", 2}, {"K", 8}, {"V", 8}, {"N", 8}, {"D", 8}};
  big.config = fuzz::base_config(kz.spec);
  big.inputs = generate_inputs(kz.spec, VectorCase{"hand", "", big.dims, {}, big.config}, 3);
  plant_special_input(SpecialInput::zero_key, kz.spec, big.inputs);
  ASSERT_TRUE(fuzz::still_fails(kz, *target, fuzz::FindingKind::nonfinite, big));
  const fuzz::Case small = fuzz::minimise(kz, *target, fuzz::FindingKind::nonfinite, big, 300);
  EXPECT_TRUE(fuzz::still_fails(kz, *target, fuzz::FindingKind::nonfinite, small));
  check_shrunk(big, small);
  EXPECT_LT(small.dims.at("T"), 64);
  EXPECT_EQ(small.dims.at("B") * small.dims.at("H"), 1);
  std::printf("hand-made kaczmarz case: T 64 -> %lld, B*H 4 -> 1, nonzeros %lld -> %lld\n",
              static_cast<long long>(small.dims.at("T")), static_cast<long long>(fuzz::size_of(big).nonzeros),
              static_cast<long long>(fuzz::size_of(small).nonzeros));
}

// Determinism: the same seed and case budget, twice through the CLI into two
// directories: the same file names, bit-identical contents, at least one finding.
TEST(FuzzCli, CaseBudgetIsDeterministic) {
  const TempDir dir;
  const auto go = [&](const std::string& out) {
    return run_cli({"fuzz", "--layer", "gated_delta_rule", "--target", "cpu:bf16", "--budget", "40cases", "--seed",
                    "7", "--mutant", "gate-exp-unmasked", "--max-findings", "2", "--out", dir / out});
  };
  const CliResult a = go("a"), b = go("b");
  EXPECT_EQ(a.exit_code, 1) << a.err;
  EXPECT_EQ(b.exit_code, 1) << b.err;
  const auto fa = entries_of(dir.path() / "a"), fb = entries_of(dir.path() / "b");
  EXPECT_EQ(fa, fb);
  EXPECT_GE(fa.size(), 4u);  // campaign.json + at least one finding's three files
  for (const auto& name : fa) EXPECT_EQ(slurp(dir.path() / "a" / name), slurp(dir.path() / "b" / name)) << name;
}

// Correct kernels: bounded NaN hunts on the chunk forms find no non-finite failure.
TEST(FuzzCorrect, NoNanFindingOnCorrectKernels) {
  for (const auto& [layer_name, target_name] : std::vector<std::pair<std::string, std::string>>{
           {"gated_delta_rule", "cpu:bf16"}, {"kaczmarz_delta_rule", "cpu:fp32"}, {"gka", "cpu:bf16"},
           {"kda", "cpu:bf16"}}) {
    SCOPED_TRACE(layer_name + " " + target_name);
    const LayerEntry& layer = find_layer(layer_name);
    const auto target = fuzz::make_target(fuzz::parse_target(target_name), layer, Form::chunk, 16, Mutant::none);
    const fuzz::CampaignResult r = campaign(layer, *target, 150, 11, 3);
    EXPECT_EQ(r.last.nonfinite_cases, 0);
    for (const fuzz::Finding& f : r.findings) EXPECT_NE(f.kind, fuzz::FindingKind::nonfinite) << f.original.family;
  }
}

// `fuzz --backward`: the backward form is the target and every gradient is
// judged. The NaN objective finds the backward's NaN mutant (unmasked decay
// factors, strong decays from the gate_edges family) with a gradient named, and
// its reproducer replays through `check --backward` to exit 1 (and passes without
// the mutant); the ratio objective finds a finite backward bug (dq scaled twice);
// a correct backward kernel gives no NaN finding.
TEST(FuzzBackward, FindsBackwardBugsAndReplaysThem) {
  const LayerEntry& layer = find_layer("gated_delta_rule");
  const Mutant nan_bug = parse_mutant("backward-gate-exp-unmasked");
  const auto target =
      fuzz::make_target(fuzz::parse_target("cpu:bf16"), layer, Form::chunk, 16, nan_bug, Direction::backward);
  EXPECT_EQ(target->direction(), Direction::backward);
  const fuzz::CampaignResult r = campaign(layer, *target, kPlantedBudget, 1);
  ASSERT_GE(r.first_finding_case, 0) << "not found in " << kPlantedBudget << " cases";
  // The value_edges family (values near bf16's largest) also gives range findings
  // (gradients whose truth is beyond bf16), correct ones, which may come first:
  // the mutant's finding is the first non-finite one.
  const auto nonfinite = std::find_if(r.findings.begin(), r.findings.end(),
                                      [](const fuzz::Finding& x) { return x.kind == fuzz::FindingKind::nonfinite; });
  ASSERT_NE(nonfinite, r.findings.end()) << "no non-finite finding among " << r.findings.size();
  const fuzz::Finding& f = *nonfinite;
  EXPECT_TRUE(f.minimised.inputs.count("do")) << "a backward case carries its cotangents";
  EXPECT_TRUE(f.candidate.count("dq") && f.candidate.count("dg"));
  bool gradient_named = false;
  for (const TensorVerdict& v : f.check.tensors) gradient_named |= v.nonfinite_failures > 0 && v.name.starts_with("d");
  EXPECT_TRUE(gradient_named);
  std::printf("backward-gate-exp-unmasked: first finding at case %lld, T %lld -> %lld\n",
              static_cast<long long>(r.first_finding_case), static_cast<long long>(f.original.dims.at("T")),
              static_cast<long long>(f.minimised.dims.at("T")));

  const TempDir dir;
  fuzz::CampaignInfo info{"gated_delta_rule", "cpu:bf16", Form::chunk, 16, fuzz::Objective::nan, 1,
                          {kPlantedBudget, 0}, "backward-gate-exp-unmasked"};
  info.direction = Direction::backward;
  const auto stems = fuzz::write_reproducers(dir.path(), layer, *target, info, r);
  const auto stem_it = std::find_if(stems.begin(), stems.end(), [](const std::string& s) {
    return s.find(".chunk.backward.nonfinite.") != std::string::npos;
  });
  ASSERT_NE(stem_it, stems.end()) << "no reproducer named like a backward non-finite finding";
  const std::string stem = *stem_it;
  const nlohmann::json note = nlohmann::json::parse(slurp(dir.path() / (stem + ".json")));
  EXPECT_EQ(note["direction"], "backward");
  EXPECT_TRUE(note["replay"]["check"].get<std::string>().ends_with(" --backward")) << note["replay"]["check"];
  const std::string in = dir / (stem + ".inputs.safetensors");
  std::vector<std::string> check = {"check", "--layer", "gated_delta_rule", "--in", in, "--candidate",
                                    dir / (stem + ".candidate.safetensors"), "--dtype", "bf16", "--form", "chunk",
                                    "--chunk-size", "16", "--backward"};
  const CliResult stored = run_cli(check);
  EXPECT_EQ(stored.exit_code, 1) << stored.out << stored.err;
  ASSERT_EQ(run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", dir / "ok.safetensors", "--arith",
                     "bf16", "--form", "chunk", "--chunk-size", "16", "--backward"})
                .exit_code,
            0);
  check[6] = dir / "ok.safetensors";
  const CliResult ok = run_cli(check);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  // The ratio objective on a finite backward bug.
  fuzz::CampaignOptions o;
  o.objective = fuzz::Objective::ratio;
  o.budget.cases = 6;
  o.seed = 2;
  o.max_findings = 1;
  o.minimise = false;
  const auto twice = fuzz::make_target(fuzz::parse_target("cpu:fp32"), layer, Form::chunk, 16,
                                       parse_mutant("dq-scale-twice"), Direction::backward);
  const fuzz::CampaignResult rr = fuzz::run_campaign(layer, *twice, o);
  EXPECT_TRUE(std::any_of(rr.findings.begin(), rr.findings.end(),
                          [](const fuzz::Finding& x) { return x.kind == fuzz::FindingKind::ratio; }));
  EXPECT_GT(rr.best_ratio_confirmed, kRatioThreshold);

  // A correct backward kernel: no NaN finding on a bounded hunt.
  const auto correct =
      fuzz::make_target(fuzz::parse_target("cpu:bf16"), layer, Form::chunk, 16, Mutant::none, Direction::backward);
  const fuzz::CampaignResult c = campaign(layer, *correct, 60, 11, 3);
  EXPECT_EQ(c.last.nonfinite_cases, 0);
}

// Bad options: exit 2, one line naming the culprit, nothing written.
TEST(FuzzCli, BadOptionsExitTwoWithOneLine) {
  const TempDir dir;
  const auto bad = [&](std::vector<std::string> extra, const std::string& needle) {
    std::vector<std::string> args = {"fuzz", "--out", dir / "out"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "out")) << needle;
  };
  const std::vector<std::string> ok = {"--layer", "gated_delta_rule", "--target", "cpu:bf16", "--budget", "10cases"};
  const auto with = [&](const std::string& key, const std::string& value) {
    std::vector<std::string> a = ok;
    for (std::size_t i = 0; i + 1 < a.size(); i += 2)
      if (a[i] == key) {
        a[i + 1] = value;
        return a;
      }
    a.push_back(key);
    a.push_back(value);
    return a;
  };
  // No GPU here: the CUDA targets say why they cannot run (not built, or no device).
  bad(with("--target", "cuda:bf16"), "--target cuda:bf16: skipped: ");
  bad(with("--target", "cuda:fp32"), "--target cuda:fp32: skipped: ");
  bad(with("--target", "gpu:bf16"), "gpu");
  bad(with("--target", "cpu:fp8"), "fp8");
  bad(with("--layer", "no_such_layer"), "no_such_layer");
  bad(with("--budget", "10x"), "10x");
  bad(with("--budget", "0cases"), "0cases");
  bad(with("--objective", "speed"), "speed");
  bad(with("--form", "scan"), "scan");
  bad(with("--mutant", "no-such-bug"), "no-such-bug");
  bad(with("--mutant", "gka-zero-norm-unguarded"), "does not affect");
  bad(with("--chunk-size", "0"), "chunk-size");
  // --backward: a forward mutant does not affect the backward form; the CUDA
  // target says why it cannot run here (no device).
  std::vector<std::string> backward = ok;
  backward.push_back("--backward");
  bad([&] { auto a = backward; a.insert(a.end(), {"--mutant", "ut-beta-dropped"}); return a; }(), "does not affect");
  bad([&] { auto a = backward; a[3] = "cuda:bf16"; return a; }(), "--target cuda:bf16");
}

}  // namespace
}  // namespace ttr::test
