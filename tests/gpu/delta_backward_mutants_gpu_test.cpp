// The CUDA counterparts of the mutant catalogue's backward bugs (gate/mutants.hpp,
// its `cuda` entries; gpu/core/mutant.cuh, planted in the stages of
// gpu/family/delta_chunk_backward.cu and gpu/gka/chunk_backward.cu): each one, on
// every layer it targets that has a CUDA chunk backward kernel, in bf16 and in fp32
// (two of GKA's in fp32 only, below), under the conditions it lists, must be failed
// by the judge the GPU gate uses (the MPFR backward oracle, the chunk backward
// form's model at C = 64); switched off, the kernel's gradients are bit-identical
// to a run before it; and the correct kernel on the inputs a mutant needs (strong
// decays, L2-normalised q, k) passes. Label `gpu`; skipped without a device or in a
// build without TTR_CUDA_MUTANTS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gate/gate.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "gate/mutants.hpp"
#include "gpu/api.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/mutant.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::dims;
using test::worst_ratio;

TensorMap<double> run_chunk_backward(const LayerEntry& e, Tier dtype, const TensorMap<double>& in, const Config& cfg) {
  KernelOptions opt;
  opt.poison = true;  // an element the mutant leaves unwritten shows as NaN
  return e.kernel(Backend::cuda, Form::chunk, Direction::backward)->run(in, cfg, dtype, opt);
}

bool bit_identical(const TensorMap<double>& a, const TensorMap<double>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, x] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.data.size() != x.data.size()) return false;
    if (std::memcmp(x.data.data(), it->second.data.data(), x.data.size() * sizeof(double)) != 0) return false;
  }
  return true;
}

// T = 150 (K = V = KV): three chunks of 64, the last one partial (22 tokens), so every
// mutant's min_chunks (2), min_chunk_size (32) and partial_last_chunk hold; h0 and
// dht drawn; the mutant's config pairs set and its special inputs planted.
// The judge refers to the inputs it was built on: a Case stays where it was made.
struct Case {
  TensorMap<double> in;
  Config cfg;
  std::unique_ptr<Judge> judge;
};

std::unique_ptr<Case> case_for(const LayerEntry& e, const MutantConditions& needs, int KV, std::uint64_t seed) {
  Regime r;
  r.optional_inputs = true;
  VectorCase c{"mutant", "", dims(1, 150, 2, KV, KV), r, needs.config};
  for (const auto& kv : gate_config(e.spec))  // gka: solver=chebyshev, the kernels' only solver
    if (std::none_of(c.config.begin(), c.config.end(), [&](const auto& x) { return x.first == kv.first; }))
      c.config.push_back(kv);
  auto out = std::make_unique<Case>();
  out->in = generate_backward_inputs(e.spec, c, seed);
  plant_special_input(needs.special, e.spec, out->in);
  out->cfg = Config::make(e.spec, c.config);
  out->judge = std::make_unique<Judge>(e, out->in, out->cfg, Arith{Tier::mpfr, 128}, Direction::backward);
  return out;
}

// Two of GKA's are smaller than bf16 GKA's own gradient error (dk ~50 u of bf16 at
// r = 30: docs/error-model-gradients.md, "GKA's chunk backward"), and the CPU gate catches
// them in fp32 only (docs/gate-teeth.md): a reverse loop one step short (a 4e-3
// change) and an adjoint solve one step short (3e-4). In bf16 they are reported,
// not required to fail.
bool fp32_only(const std::string& mutant) {
  return mutant == "gka-chebyshev-adjoint-step-short" || mutant == "gka-adjoint-solve-step-short";
}

// Every CUDA mutant on each of its targets that has a CUDA chunk backward and that
// `chosen(mutant name, layer)` accepts, in `dtypes`, at K = V = KV: the gate must fail
// it and pass the correct kernel before and after, bit for bit. Returns the
// (mutant, layer, dtype) judged.
template <class Chosen>
int judge_mutants(int KV, const std::vector<Tier>& dtypes, Chosen chosen, std::uint64_t seed) {
  // One case (oracle, models) per (layer, config, special input), shared by the
  // mutants that need the same.
  std::map<std::tuple<std::string, std::string, int>, std::unique_ptr<Case>> cases;
  int judged = 0;
  for (const MutantInfo& m : mutant_catalogue()) {
    if (!m.cuda) continue;
    for (const MutantTarget& t : m.targets) {
      const LayerEntry& e = find_layer(t.layer);
      if (!e.kernel(Backend::cuda, Form::chunk, Direction::backward)) continue;  // e.g. the preconditioned layers
      if (!chosen(m.name, t.layer)) continue;
      SCOPED_TRACE(m.name + " on " + t.layer);
      std::string cfg_key;
      for (const auto& [k, v] : m.needs.config) cfg_key += k + "=" + v + ";";
      const auto key = std::make_tuple(t.layer, cfg_key, static_cast<int>(m.needs.special));
      auto it = cases.find(key);
      if (it == cases.end()) it = cases.emplace(key, case_for(e, m.needs, KV, seed)).first;
      Case& c = *it->second;
      for (Tier dtype : dtypes) {
        const ModelSpec ms = kernel_model(e, Form::chunk, dtype, 8, seed, Direction::backward);
        const TensorMap<double> before = run_chunk_backward(e, dtype, c.in, c.cfg);
        TensorMap<double> mutant;
        {
          const MutantScope scope(m.id);
          mutant = run_chunk_backward(e, dtype, c.in, c.cfg);
        }
        const TensorMap<double> after = run_chunk_backward(e, dtype, c.in, c.cfg);
        EXPECT_TRUE(bit_identical(after, before)) << tier_name(dtype) << ": the mutant left a trace";
        const CheckResult good = (*c.judge)(before, ms), bad = (*c.judge)(mutant, ms);
        EXPECT_TRUE(good.pass) << tier_name(dtype) << ": the correct kernel fails, max ratio " << worst_ratio(good);
        if (dtype == Tier::fp32 || !fp32_only(m.name)) {
          EXPECT_FALSE(bad.pass) << tier_name(dtype) << ": the gate passes the mutant, max ratio " << worst_ratio(bad);
        }
        std::string failing;
        for (const TensorVerdict& v : bad.tensors)
          if (v.present && !v.pass) failing += fmt::format(" {}={:.3g}{}", v.name, v.max_ratio, v.nan_count ? "(NaN)" : "");
        std::printf("CUDAMUTANT %-36s %-22s %-5s correct %.3g  mutant %s:%s\n", m.name.c_str(), t.layer.c_str(),
                    tier_name(dtype), worst_ratio(good), bad.pass ? "PASS" : "FAIL", failing.c_str());
        std::fflush(stdout);
        ++judged;
      }
    }
  }
  return judged;
}

TEST(CudaBackwardMutants, GateFailsEachAndTheKernelIsCleanAfter) {
  TTR_REQUIRE_DEVICE();
#ifndef TTR_TESTS_CUDA_MUTANTS
  GTEST_SKIP() << "built without TTR_CUDA_MUTANTS: the kernels carry no mutants";
#endif
  const int judged =
      judge_mutants(32, {Tier::bf16, Tier::fp32}, [](const std::string&, const std::string&) { return true; }, 31);
  EXPECT_GE(judged, 2 * (18 + 8));  // every mutant reaches at least one layer's kernel (delta family, gka)
}

// The mutants planted in the Hopper stages, and the layers that run each stage at
// K = V = 128 in bf16: dstate_pass (delta_dstate_wgmma_sm90a.cu) every layer of the
// family; wy (delta_wy_wgmma_sm90a.cu, whose switches are wy_common.cuh's) the layers
// with no per-key gate whose write key is k (KDA and the preconditioned layer keep the
// mma.sync wy, judged by the test above). The other stages are the same code at every
// K, judged above; judging them here again would triple the test's time (an MPFR
// oracle at K = 128 for every case).
const std::set<std::string> kHopperDstateMutants = {"dht-ignored", "dv-state-gradient-late", "dh-pass-undecayed",
                                                    "dh0-not-written", "backward-last-partial-chunk-dropped"};
const std::set<std::string> kHopperWyMutants = {"dk-wy-term-dropped",         "dk-undecayed-key",
                                                "ut-adjoint-transposed",      "wy-backward-offblock-dropped",
                                                "backward-gate-exp-unmasked", "dg-revcumsum-exclusive",
                                                "dbeta-sign-flipped",         "backward-last-partial-chunk-dropped"};

bool in_hopper_stage(const std::string& mutant, const std::string& layer) {
  if (layer == "gka") return false;
  if (kHopperDstateMutants.count(mutant)) return true;
  return kHopperWyMutants.count(mutant) && layer != "kda" && layer != "precond_gated_delta_rule";
}

// The Hopper stages (on compute capability 9.0 at K = V = 128, bf16: the backward's
// dstate_pass and wy on wgmma, the defaults there) carry their stages' mutants too:
// the same judgement at K = V = 128 in bf16, on the layers that run them.
TEST(CudaBackwardMutants, HopperStagesFailEachMutant) {
  TTR_REQUIRE_DEVICE();
#ifndef TTR_TESTS_CUDA_MUTANTS
  GTEST_SKIP() << "built without TTR_CUDA_MUTANTS: the kernels carry no mutants";
#endif
  if (!gpu::hopper_state_pass_available()) GTEST_SKIP() << "the Hopper stages need compute capability 9.0";
  const test::ScopedEnv wy("TTR_GPU_WY", nullptr), state("TTR_GPU_STATE_BV", nullptr);  // the defaults
  // A name the catalogue does not hold as a CUDA mutant would drop its bug silently.
  std::set<std::string> names = kHopperDstateMutants;
  names.insert(kHopperWyMutants.begin(), kHopperWyMutants.end());
  for (const std::string& name : names)
    EXPECT_TRUE(std::any_of(mutant_catalogue().begin(), mutant_catalogue().end(),
                            [&](const MutantInfo& m) { return m.cuda && m.name == name; }))
        << name << " is not a CUDA mutant of the catalogue";
  const int judged = judge_mutants(128, {Tier::bf16}, in_hopper_stage, 37);
  EXPECT_GE(judged, static_cast<int>(names.size()));  // each of the twelve reaches at least one layer
}

// The gate's own path: check_kernels with KernelCheckOptions::mutant (what `gate
// --cuda-only --mutant` runs) fails the chunk kernel and leaves the sequential
// kernel, the GPU's reference, untouched (it passes under the same switch).
TEST(CudaBackwardMutants, CheckKernelsMutatesTheChunkKernelOnly) {
  TTR_REQUIRE_DEVICE();
#ifndef TTR_TESTS_CUDA_MUTANTS
  GTEST_SKIP() << "built without TTR_CUDA_MUTANTS: the kernels carry no mutants";
#endif
  const LayerEntry& e = find_layer("gated_delta_rule");
  Regime r;
  r.optional_inputs = true;
  const VectorCase c{"mutant", "", dims(1, 150, 2, 32, 32), r, {}};
  KernelCheckOptions o;
  o.direction = Direction::backward;
  o.dtypes = {Tier::fp32};
  o.mutant = Mutant::dbeta_sign_flipped;
  const std::vector<GateCheck> checks =
      check_kernels(e, generate_backward_inputs(e.spec, c, 7), Config::make(e.spec, c.config), c.name, 7, o);
  ASSERT_EQ(checks.size(), 2u);
  test::report(checks);
  for (const GateCheck& g : checks) {
    const bool chunk = g.id.find("cuda-chunk") != std::string::npos;
    EXPECT_EQ(g.result.pass, !chunk) << g.id;
  }
}

}  // namespace
}  // namespace ttr
