// The mutant catalogue (gate/mutants.hpp, reference/core/mutant.hpp): every
// catalogued bug really bites on every (layer, form) it claims, under the
// conditions it lists; switched off, it leaves the form bit-identical; and no
// mutant ever reaches a sequential form (the oracle's definitions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"
#include "gate/mutants.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

// The demo case (B = 1, T = 128, H = 2, K = V = 16) set up the way the mutant
// needs it: its config pairs, its optional inputs drawn (h0 …), its special inputs
// planted (strong decays, zero keys, a zero-write prefix), and a chunk size
// giving 8 chunks — or, for the partial-chunk mutants, 5 full chunks and one of 8,
// and for a bug across 16×16 sub-blocks (min_chunk_size) two chunks of 64. A
// backward mutant's case also holds the cotangents (do, dht).
struct MutantCase {
  TensorMap<double> inputs;
  Config config;
  int chunk = 16;
  Direction direction = Direction::forward;
};

MutantCase case_for(const MutantInfo& m, const std::string& layer) {
  const LayerSpec& spec = find_layer(layer).spec;
  VectorCase c = suite_cases(spec, "demo").at(0);
  if (!m.needs.inputs.empty()) c.regime.optional_inputs = true;
  for (const auto& kv : m.needs.config) {
    std::erase_if(c.config, [&](const auto& set) { return set.first == kv.first; });
    c.config.push_back(kv);
  }
  const int chunk = m.needs.partial_last_chunk ? 24 : m.needs.min_chunk_size > 16 ? 64 : 16;
  const Direction dir = m.direction();
  MutantCase mc{dir == Direction::backward ? generate_backward_inputs(spec, c, 0) : generate_inputs(spec, c, 0),
                Config::make(spec, c.config), chunk, dir};
  plant_special_input(m.needs.special, spec, mc.inputs);  // NaN/Inf mutants: the inputs they need, made on purpose
  const std::int64_t T = c.dims.at("T");
  EXPECT_GE(T, m.needs.min_chunks * mc.chunk) << "the case must satisfy the mutant's min_chunks";
  EXPECT_GE(mc.chunk, m.needs.min_chunk_size);
  EXPECT_EQ(T % mc.chunk != 0, m.needs.partial_last_chunk);
  for (const auto& name : m.needs.inputs) EXPECT_TRUE(mc.inputs.count(name)) << name;
  return mc;
}

// Normwise relative change of one tensor: max_i |x_i − r_i| / max_i |r_i|; +inf
// where x is not finite and r is (a NaN the mutant produced is a change, not a
// vanishing term).
double relative_change(const Tensor<double>& c, const Tensor<double>& r) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < r.data.size(); ++i) {
    if (!std::isfinite(c.data[i]) && std::isfinite(r.data[i])) return INFINITY;
    err = std::max(err, std::fabs(c.data[i] - r.data[i]));
    scale = std::max(scale, std::fabs(r.data[i]));
  }
  return scale > 0 ? err / scale : err;
}

// Forward: the change of the output o, what every layer returns and what a user
// of the kernel reads (the diagnostics, GKA's kappa and resid, can swing by orders
// of magnitude when λ or H_t changes and would say nothing about the output).
// Backward: the largest change over the gradients (a backward bug may touch one
// gradient only: dβ, dg, dh0).
double relative_change(const TensorMap<double>& x, const TensorMap<double>& ref, Direction dir = Direction::forward) {
  if (dir == Direction::forward) return relative_change(x.at("o"), ref.at("o"));
  double worst = 0;
  for (const auto& [name, r] : ref) worst = std::max(worst, relative_change(x.at(name), r));
  return worst;
}

// Bit-for-bit equality of every output (NaN payloads included).
bool bit_identical(const TensorMap<double>& a, const TensorMap<double>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, x] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.shape != x.shape || it->second.data.size() != x.data.size()) return false;
    if (std::memcmp(x.data.data(), it->second.data.data(), x.data.size() * sizeof(double)) != 0) return false;
  }
  return true;
}

TensorMap<double> run(const std::string& layer, Form form, Tier tier, const MutantCase& c) {
  return run_layer(find_layer(layer), form, {tier, 0}, c.inputs, c.config, c.chunk, c.direction).values;
}

TEST(MutantSwitch, ScopesNestAndRestore) {
  EXPECT_EQ(active_mutant(), Mutant::none);
  {
    const MutantScope outer(Mutant::ut_beta_dropped);
    EXPECT_TRUE(mutated(Mutant::ut_beta_dropped));
    {
      const MutantScope inner(Mutant::none);
      EXPECT_EQ(active_mutant(), Mutant::none);
      EXPECT_FALSE(mutated(Mutant::ut_beta_dropped));
    }
    EXPECT_EQ(active_mutant(), Mutant::ut_beta_dropped);
  }
  EXPECT_EQ(active_mutant(), Mutant::none);
}

// One entry per Mutant value, in order; stable kebab-case names that parse back;
// every target a real chunk or scan form of the registry.
TEST(MutantCatalogue, CompleteParsableAndAimedAtRealForms) {
  const auto& cat = mutant_catalogue();
  ASSERT_GE(cat.size(), 12u);
  std::set<std::string> names;
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const MutantInfo& m = cat[i];
    SCOPED_TRACE(m.name);
    EXPECT_EQ(static_cast<std::size_t>(m.id), i + 1) << "catalogue in Mutant order, one entry per value";
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate name";
    EXPECT_TRUE(std::all_of(m.name.begin(), m.name.end(),
                            [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '-'; }));
    EXPECT_EQ(parse_mutant(m.name), m.id);
    EXPECT_EQ(std::string(mutant_name(m.id)), m.name);
    EXPECT_FALSE(m.description.empty());
    EXPECT_FALSE(m.targets.empty());
    for (const auto& t : m.targets) {
      EXPECT_NE(t.form, Form::sequential) << t.layer;
      EXPECT_TRUE(find_layer(t.layer).has_form(t.form, t.direction)) << t.layer << " " << form_name(t.form);
      EXPECT_TRUE(m.affects(t.layer, t.form, t.direction));
      EXPECT_EQ(t.direction, m.direction()) << "one direction per catalogue entry";
      const Direction other = t.direction == Direction::forward ? Direction::backward : Direction::forward;
      EXPECT_FALSE(m.affects(t.layer, t.form, other));
    }
  }
  // The backward catalogue: at least 14 bugs of the backward forms, and every
  // registered chunk backward form of the delta family is the target of each of
  // the family-wide ones (found through the registry, not by name).
  const auto backward = std::count_if(cat.begin(), cat.end(), [](const MutantInfo& m) {
    return m.direction() == Direction::backward;
  });
  EXPECT_GE(backward, 14);
  for (const LayerEntry& e : registry()) {
    if (e.spec.family == "delta" && e.has_form(Form::chunk, Direction::backward)) {
      EXPECT_TRUE(mutant_info(Mutant::dbeta_sign_flipped).affects(e.spec.name, Form::chunk, Direction::backward))
          << e.spec.name;
    }
  }
  EXPECT_EQ(parse_mutant("none"), Mutant::none);
  try {
    parse_mutant("causal-mask-off");
    ADD_FAILURE() << "unknown mutant accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("causal-mask-off"), std::string::npos) << what;
    for (const auto& m : cat) EXPECT_NE(what.find(m.name), std::string::npos) << what;
  }
}

// The teeth: with the mutant active each claimed (layer, form) computes a clearly
// different o — in fp64 by more than 1e-7 relative (the kaczmarz eps mutant, the
// weakest, moves o by ~2e-6; fp64 rounding noise is ~1e-15); in the 16-bit tiers,
// for the accumulation mutant that only exists there, by more than one unit
// roundoff of the format (more than one rounding's worth), and further from the
// fp64 result than the correct form is. Off again, the form is bit-identical to
// its run before the scope (every output, not only o).
TEST(Mutants, EachBitesWhereItClaimsAndVanishesWhenOff) {
  for (const MutantInfo& m : mutant_catalogue()) {
    // The varlen mutants live in the slicer: tests/varlen/varlen_mutants_test.cpp.
    if (std::count(m.needs.inputs.begin(), m.needs.inputs.end(), "cu_seqlens")) continue;
    const std::vector<Tier> tiers = m.needs.tiers.empty() ? std::vector<Tier>{Tier::fp64} : m.needs.tiers;
    for (const MutantTarget& t : m.targets) {
      SCOPED_TRACE(m.name + " on " + t.layer + " " + form_name(t.form));
      const MutantCase c = case_for(m, t.layer);
      for (Tier tier : tiers) {
        SCOPED_TRACE(tier_name(tier));
        const TensorMap<double> before = run(t.layer, t.form, tier, c);
        TensorMap<double> mutant;
        {
          const MutantScope scope(m.id);
          mutant = run(t.layer, t.form, tier, c);
        }
        const TensorMap<double> after = run(t.layer, t.form, tier, c);
        EXPECT_TRUE(bit_identical(after, before)) << "the mutant left a trace after its scope closed";
        const double change = relative_change(mutant, before, c.direction);
        const char* dir = c.direction == Direction::backward ? "bwd" : "fwd";
        if (tier == Tier::fp64) {
          EXPECT_GT(change, 1e-7);
          std::printf("%-36s %-26s %-5s %s fp64  change %.1e\n", m.name.c_str(), t.layer.c_str(), form_name(t.form),
                      dir, change);
        } else {
          const double u = tier == Tier::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
          const TensorMap<double> exact = run(t.layer, t.form, Tier::fp64, c);
          const double err_ok = relative_change(before, exact, c.direction),
                       err_mut = relative_change(mutant, exact, c.direction);
          EXPECT_GT(change, u);
          EXPECT_GT(err_mut, err_ok);
          std::printf("%-36s %-26s %-5s %s %-5s change %.1f u, error %.1f u (correct form %.1f u)\n", m.name.c_str(),
                      t.layer.c_str(), form_name(t.form), dir, tier_name(tier), change / u, err_mut / u, err_ok / u);
        }
      }
    }
  }
}

// The sequential forms are the oracle: bit-identical under every mutant, forward
// and backward (in fp64, and in bf16 — the tier the 16-bit mutants are about).
TEST(Mutants, NeverReachTheSequentialForms) {
  for (const LayerEntry& e : registry())
    for (const Direction dir : {Direction::forward, Direction::backward}) {
      if (!e.has_form(Form::sequential, dir)) continue;
      SCOPED_TRACE(e.spec.name + " " + direction_name(dir));
      VectorCase vc = suite_cases(e.spec, "demo").at(0);
      vc.regime.optional_inputs = true;  // h0 and the other initial states too
      if (e.spec.key("use_qk_l2norm_in_kernel")) vc.config.push_back({"use_qk_l2norm_in_kernel", "true"});
      const MutantCase c{dir == Direction::backward ? generate_backward_inputs(e.spec, vc, 0)
                                                    : generate_inputs(e.spec, vc, 0),
                         Config::make(e.spec, vc.config), 16, dir};
      for (Tier tier : {Tier::fp64, Tier::bf16}) {
        const TensorMap<double> ref = run(e.spec.name, Form::sequential, tier, c);
        for (const MutantInfo& m : mutant_catalogue()) {
          const bool sixteen_bit = m.id == Mutant::accumulate_in_16bit;
          if (tier == Tier::bf16 && !sixteen_bit) continue;
          const MutantScope scope(m.id);
          EXPECT_TRUE(bit_identical(run(e.spec.name, Form::sequential, tier, c), ref)) << m.name;
        }
      }
    }
}

// The mutants with a CUDA counterpart (MutantInfo::cuda; tests/gpu/delta_backward_
// mutants_gpu_test.cpp proves each bites there) are exactly the chunk backward bugs
// of the two families whose CUDA chunk backward kernels carry them: every backward
// mutant that targets a delta chunk backward form (gpu/family/delta_chunk_backward.cu's
// stages) or GKA's (gpu/gka/chunk_backward.cu), and no other.
TEST(Mutants, CudaCounterpartsAreTheChunkBackwardBugs) {
  std::size_t n = 0, gka = 0;
  for (const MutantInfo& m : mutant_catalogue()) {
    if (std::count(m.needs.inputs.begin(), m.needs.inputs.end(), "cu_seqlens")) {
      EXPECT_FALSE(m.cuda) << m.name << ": the CUDA kernels take no cu_seqlens";
      continue;
    }
    const auto chunk_backward_of = [&](const std::string& family) {
      return m.direction() == Direction::backward &&
             std::any_of(m.targets.begin(), m.targets.end(), [&](const MutantTarget& t) {
               return find_layer(t.layer).spec.family == family && t.form == Form::chunk;
             });
    };
    EXPECT_EQ(m.cuda, chunk_backward_of("delta") || chunk_backward_of("gka")) << m.name;
    n += m.cuda;
    gka += m.cuda && chunk_backward_of("gka");
  }
  EXPECT_EQ(n, 18u + 8u);
  EXPECT_EQ(gka, 8u);
  EXPECT_EQ(parse_cuda_mutant("dbeta-sign-flipped"), Mutant::dbeta_sign_flipped);
  EXPECT_EQ(parse_cuda_mutant("none"), Mutant::none);
  try {
    parse_cuda_mutant("ut-beta-dropped");
    ADD_FAILURE() << "a CPU-only mutant was accepted for a CUDA kernel";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("CPU forms only"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dh0-not-written"), std::string::npos) << e.what();
  }
}

// The CLI: `mutants --json` lists the catalogue; `run --mutant` mutates the chunk
// form, rejects the sequential form and unknown names with exit 2.
TEST(MutantsCli, ListAndRun) {
  const CliResult list = run_cli({"mutants", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const nlohmann::json j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j.size(), mutant_catalogue().size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    EXPECT_EQ(j[i]["name"], mutant_catalogue()[i].name);
    EXPECT_EQ(j[i]["targets"].size(), mutant_catalogue()[i].targets.size());
    EXPECT_EQ(j[i]["cuda"], mutant_catalogue()[i].cuda);
  }

  const TempDir dir;
  const std::string in = (source_dir() / "examples/demo/gated_delta_rule.demo.realistic_small.inputs.safetensors").string();
  const auto run_chunk = [&](const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run", "--layer", "gated_delta_rule", "--in", in, "--out", dir / out,
                                     "--arith", "fp64", "--form", "chunk", "--chunk-size", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  ASSERT_EQ(run_chunk("ok.safetensors", {}).exit_code, 0);
  const CliResult mut = run_chunk("mut.safetensors", {"--mutant", "ut-beta-dropped"});
  ASSERT_EQ(mut.exit_code, 0) << mut.err;
  const auto ok_file = io::read_safetensors(dir / "ok.safetensors");
  const auto mut_file = io::read_safetensors(dir / "mut.safetensors");
  EXPECT_EQ(mut_file.metadata.at("mutant"), "ut-beta-dropped");
  EXPECT_NE(io::to_f64(ok_file.tensors.at("o"), "o"), io::to_f64(mut_file.tensors.at("o"), "o"));

  const CliResult seq = run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", dir / "seq.safetensors",
                                 "--arith", "fp64", "--form", "sequential", "--mutant", "ut-beta-dropped"});
  EXPECT_EQ(seq.exit_code, 2);
  EXPECT_NE(seq.err.find("sequential"), std::string::npos) << seq.err;
  const CliResult bad = run_chunk("bad.safetensors", {"--mutant", "no-such-bug"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("h0-ignored"), std::string::npos) << bad.err;
  const auto left = entries_of(dir.path());
  EXPECT_EQ(std::count(left.begin(), left.end(), "seq.safetensors"), 0);
  EXPECT_EQ(std::count(left.begin(), left.end(), "bad.safetensors"), 0);
}

}  // namespace
}  // namespace ttr::test
