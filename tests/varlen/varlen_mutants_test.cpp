// The varlen mutants (oracles/slices.hpp, gate/mutants.cpp) bite: on a varlen
// batch each changes what its chunk forms compute and the judge fails it, while
// the unmutated form passes; off again, the form is bit-identical. The
// forward ones also fail the default gate (tests/gate/gate_test.cpp, its
// `varlen` case); dh0-from-previous is a backward bug, caught by check --backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "gate/judge.hpp"
#include "gate/mutants.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/bytes.hpp"

namespace ttr::test {
namespace {

// Boundaries on the chunk grid (16), one past it, and off it (40): every varlen
// mutant has a boundary to bite on. Initial states drawn (h0 [4, H, K, V]).
VectorCase mutant_case() {
  Regime r;
  r.optional_inputs = true;
  r.cu_seqlens = {0, 16, 17, 40, 77};
  return {"varlen_mutants", "", {{"B", 1}, {"T", 77}, {"H", 2}, {"K", 8}, {"V", 8}, {"N", 8}, {"D", 8}}, r, {}};
}

Config config_of(const LayerSpec& spec) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (spec.key("solver")) kv.push_back({"solver", "chebyshev"});  // as the gate runs GKA
  return Config::make(spec, kv);
}

bool same(const TensorMap<double>& a, const TensorMap<double>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [n, t] : a)
    if (!b.count(n) || b.at(n).shape != t.shape ||
        !same_bytes(b.at(n).data.data(), t.data.data(), t.data.size() * sizeof(double)))
      return false;
  return true;
}

TEST(VarlenMutants, EachBitesAndTheJudgeFailsIt) {
  int caught = 0;
  for (Mutant id : {kVarlenStateLeaks, kVarlenChunkStraddles, kVarlenDh0FromPrevious}) {
    const MutantInfo& m = mutant_info(id);
    const Direction d = id == kVarlenDh0FromPrevious ? Direction::backward : Direction::forward;
    ASSERT_FALSE(m.targets.empty());
    for (const MutantTarget& t : m.targets) {
      SCOPED_TRACE(m.name + " on " + t.layer);
      const LayerEntry& e = find_layer(t.layer);
      const Config cfg = config_of(e.spec);
      const TensorMap<double> in =
          d == Direction::forward ? generate_inputs(e.spec, mutant_case(), 5) : generate_backward_inputs(e.spec, mutant_case(), 5);
      const TensorMap<double> before = run_layer(e, t.form, {Tier::bf16, 0}, in, cfg, 16, d).values;
      TensorMap<double> bad;
      {
        const MutantScope scope(id);
        bad = run_layer(e, t.form, {Tier::bf16, 0}, in, cfg, 16, d).values;
        // Never the oracle's definition.
        EXPECT_TRUE(same(run_layer(e, Form::sequential, {Tier::fp64, 0}, in, cfg, 16, d).values,
                         run_layer(e, Form::sequential, {Tier::fp64, 0}, in, cfg, 16, d).values));
      }
      EXPECT_TRUE(same(run_layer(e, t.form, {Tier::bf16, 0}, in, cfg, 16, d).values, before)) << "left a trace";
      EXPECT_FALSE(same(bad, before)) << "changed nothing";
      Judge judge(e, in, cfg, {Tier::mpfr, 128}, d);
      ModelSpec ms;
      ms.form = t.form;
      ms.direction = d;
      ms.dtype = Tier::bf16;
      ms.chunk_size = 16;
      ms.samples = 4;
      const CheckResult good = judge(before, ms);
      const CheckResult wrong = judge(bad, ms);
      EXPECT_TRUE(good.pass) << "the correct form fails";
      EXPECT_FALSE(wrong.pass) << "the judge misses the mutant";
      double worst = 0;
      for (const TensorVerdict& v : wrong.tensors) worst = std::max(worst, v.max_ratio);
      std::printf("%-26s %-26s worst ratio %.3g\n", m.name.c_str(), t.layer.c_str(), worst);
      ++caught;
    }
  }
  EXPECT_GT(caught, 10);
}

// Straddling is invisible when every boundary lies on the chunk grid (its note).
TEST(VarlenMutants, StraddleNeedsABoundaryOffTheGrid) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  VectorCase c = mutant_case();
  c.regime.cu_seqlens = {0, 16, 48, 77};
  const TensorMap<double> in = generate_inputs(e.spec, c, 5);
  const Config cfg = config_of(e.spec);
  const TensorMap<double> ok = run_layer(e, Form::chunk, {Tier::fp64, 0}, in, cfg, 16).values;
  const MutantScope scope(kVarlenChunkStraddles);
  EXPECT_TRUE(same(run_layer(e, Form::chunk, {Tier::fp64, 0}, in, cfg, 16).values, ok));
}

// The CLI way: run --backward --mutant, then check --backward fails (exit 1)
// where the unmutated candidate passes (exit 0).
TEST(VarlenMutants, Dh0FromPreviousFailsCheckBackward) {
  const TempDir dir;
  ASSERT_EQ(run_cli({"vectors", "--layer", "gated_delta_rule", "--suite", "varlen", "--out", dir / "v", "--no-oracle",
                     "--backward"})
                .exit_code,
            0);
  const std::string in = dir / "v/gated_delta_rule.varlen.chunk_edges.backward.inputs.safetensors";
  for (const char* mutant : {"none", "varlen-dh0-from-previous"}) {
    SCOPED_TRACE(mutant);
    const CliResult r = run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", dir / "c.st", "--arith",
                                 "bf16", "--form", "chunk", "--backward", "--mutant", mutant});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const CliResult c = run_cli({"check", "--layer", "gated_delta_rule", "--in", in, "--candidate", dir / "c.st",
                                 "--form", "chunk", "--backward", "--samples", "4"});
    EXPECT_EQ(c.exit_code, std::string(mutant) == "none" ? 0 : 1) << c.out << c.err;
  }
}

}  // namespace
}  // namespace ttr::test
