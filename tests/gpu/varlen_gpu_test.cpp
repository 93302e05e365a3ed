// Variable-length batches on the CUDA kernels (FLA's cu_seqlens; gpu/core/seqs.cuh,
// docs/varlen.md): every layer's every CUDA kernel, forward and backward, bf16 and
// fp32, on the `varlen` suite (FLA's boundaries [0, 15, 100, 300, 1200, 2000],
// one-token sequences, boundaries on a chunk edge and one past it, empty
// sequences) against the oracle under each kernel's model; and, bit for bit, a
// varlen batch equals its sequences run one at a time as fixed-length batches —
// no state, chunk or gradient crosses a boundary (the bug class of FLA #836, #837,
// PR #955). Outputs are poisoned with NaN before every run. Label `gpu`; skipped
// without a device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <string>

#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "oracles/registry.hpp"
#include "oracles/varlen.hpp"
#include "oracles/vectors.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::report;

std::vector<const LayerEntry*> layers_with(Direction dir) {
  std::vector<const LayerEntry*> r;
  for (const LayerEntry& e : registry())
    for (Form f : {Form::chunk, Form::sequential})
      if (e.kernel(Backend::cuda, f, dir)) {
        r.push_back(&e);
        break;
      }
  return r;
}

// The varlen suite's cases with the gate's configuration (gka: the Chebyshev
// solver, the one its CUDA kernels implement).
std::vector<VectorCase> varlen_cases(const LayerEntry& e) {
  std::vector<VectorCase> cases = suite_cases(e.spec, "varlen");
  for (VectorCase& c : cases)
    for (const auto& kv : gate_config(e.spec)) c.config.push_back(kv);
  return cases;
}

// Every kernel × dtype of every layer on the varlen suite, judged (units in parallel).
void judge_suite(Direction dir, std::uint64_t seed) {
  std::vector<test::CheckUnit> units;
  for (const LayerEntry* e : layers_with(dir))
    for (const VectorCase& c : varlen_cases(*e))
      units.push_back({c.name, e,
                       dir == Direction::backward ? generate_backward_inputs(e->spec, c, seed)
                                                  : generate_inputs(e->spec, c, seed),
                       Config::make(e->spec, c.config)});
  KernelCheckOptions o;
  o.cross = true;
  o.direction = dir;
  o.launch.poison = true;
  test::check_units(units, seed, o);
}

TEST(CudaVarlen, ForwardKernelsPassTheVarlenSuite) {
  TTR_REQUIRE_DEVICE();
  judge_suite(Direction::forward, 61);
}

TEST(CudaVarlen, BackwardKernelsPassTheVarlenSuite) {
  TTR_REQUIRE_DEVICE();
  judge_suite(Direction::backward, 62);
}

// Sequence n of a packed tensor as a fixed-length batch of one row: its tokens
// (per-token tensors), its row (per-sequence ones: h0, dht, ht, dh0, ...), or the
// whole tensor (per-head ones).
Tensor<double> cut(const TensorSpec& ts, const Tensor<double>& t, const std::vector<std::int64_t>& cu, std::size_t n) {
  switch (axis_kind(ts)) {
    case AxisKind::per_token: {
      const std::int64_t row = static_cast<std::int64_t>(t.data.size()) / t.dim(1);  // values per token (B = 1)
      Tensor<double> x(t.shape, 0.0);
      x.shape[1] = cu[n + 1] - cu[n];
      x.data.assign(t.data.begin() + cu[n] * row, t.data.begin() + cu[n + 1] * row);
      return x;
    }
    case AxisKind::per_sequence: {
      const std::int64_t row = static_cast<std::int64_t>(t.data.size()) / t.dim(0), i = static_cast<std::int64_t>(n);
      Tensor<double> x(t.shape, 0.0);
      x.shape[0] = 1;
      x.data.assign(t.data.begin() + i * row, t.data.begin() + (i + 1) * row);
      return x;
    }
    default:
      return t;
  }
}

TensorMap<double> sequence_alone(const LayerSpec& spec, const TensorMap<double>& in, const std::vector<std::int64_t>& cu,
                                 std::size_t n) {
  TensorMap<double> out;
  for (const auto& [name, t] : in)
    if (name != kCuSeqlens) out[name] = cut(*spec.input(name), t, cu, n);
  return out;
}

// Bit for bit: the kernels start every sequence from its own state and chunk grid.
TEST(CudaVarlen, PackedBatchEqualsItsSequencesRunAlone) {
  TTR_REQUIRE_DEVICE();
  std::int64_t compared = 0;  // (kernel, dtype, sequence, tensor) comparisons made
  for (Direction dir : {Direction::forward, Direction::backward})
    for (const LayerEntry* e : layers_with(dir)) {
      const LayerSpec spec = dir == Direction::backward ? backward_spec(e->spec) : e->spec;
      for (const VectorCase& c : varlen_cases(*e)) {
        if (c.name != "chunk_edges" && c.name != "empty_sequences") continue;  // the short ones
        const TensorMap<double> in = dir == Direction::backward ? generate_backward_inputs(e->spec, c, 71)
                                                                : generate_inputs(e->spec, c, 71);
        const Config cfg = Config::make(e->spec, c.config);
        const std::vector<std::int64_t> cu = cu_seqlens_of(in);
        for (Form f : {Form::chunk, Form::sequential}) {
          const KernelImpl* k = e->kernel(Backend::cuda, f, dir);
          if (!k) continue;
          for (Tier dtype : {Tier::bf16, Tier::fp32}) {
            const std::string what = fmt::format("{} {} {} {} {}", e->spec.name, k->name(), direction_name(dir),
                                                 tier_name(dtype), c.name);
            KernelOptions opt;
            opt.poison = true;
            const TensorMap<double> packed = k->run(in, cfg, dtype, opt);
            for (std::size_t n = 0; n + 1 < cu.size(); ++n) {
              if (cu[n + 1] == cu[n]) continue;  // an empty sequence has no fixed-length form (T ≥ 1)
              const TensorMap<double> alone = k->run(sequence_alone(spec, in, cu, n), cfg, dtype, opt);
              for (const auto& [name, t] : alone) {
                if (axis_kind(*spec.output(name)) == AxisKind::per_head) continue;  // summed over the sequences
                const Tensor<double> part = cut(*spec.output(name), packed.at(name), cu, n);
                ASSERT_EQ(part.data.size(), t.data.size()) << what << " " << name;
                std::int64_t diff = 0;
                for (std::size_t i = 0; i < t.data.size(); ++i)
                  diff += std::memcmp(&t.data[i], &part.data[i], sizeof(double)) != 0;
                EXPECT_EQ(diff, 0) << what << " " << name << ": sequence " << n << " differs from it run alone";
                ++compared;
              }
            }
          }
        }
      }
    }
  // Every layer's kernels, both directions: not a vacuous pass.
  std::printf("CudaVarlen: %lld (kernel, dtype, sequence, tensor) comparisons, all bit-identical\n",
              static_cast<long long>(compared));
  EXPECT_GT(compared, 500);
}

// The judge catches a kernel that misses a boundary (state leaking from one
// sequence into the next, FLA #836/#837): the kernel run on offsets with one
// boundary removed gives the o a leaking kernel would, judged against the true
// offsets' oracle; it fails on o, and the report locates the worst row in the
// sequence that lost its start.
TEST(CudaVarlen, AMissedBoundaryFailsTheJudge) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("gated_delta_rule");
  Regime r;
  r.cu_seqlens = {0, 40, 100, 160};
  r.optional_inputs = false;
  const VectorCase c{"leak", "", {{"B", 1}, {"T", 160}, {"H", 2}, {"K", 32}, {"V", 32}}, r, {}};
  const TensorMap<double> in = generate_inputs(e.spec, c, 81);
  const Config cfg = Config::make(e.spec, c.config);
  TensorMap<double> merged = in;  // sequences 1 and 2 as one: the boundary at 100 missed
  merged.at(kCuSeqlens).data = {0, 40, 160};
  if (merged.count("h0")) {
    Tensor<double>& h0 = merged.at("h0");
    const std::size_t row = h0.data.size() / 3;
    h0.data.erase(h0.data.begin() + 2 * row, h0.data.end());
    h0.shape[0] = 2;
  }
  Judge judge(e, in, cfg, {Tier::mpfr, 128});
  for (Form f : {Form::chunk, Form::sequential})
    for (Tier dtype : {Tier::bf16, Tier::fp32}) {
      const std::string what = fmt::format("{} {}", form_name(f), tier_name(dtype));
      const KernelImpl* k = e.kernel(Backend::cuda, f);
      TensorMap<double> good = k->run(in, cfg, dtype, {});
      const ModelSpec ms = kernel_model(e, f, dtype, 8, 81);
      EXPECT_TRUE(judge(good, ms).pass) << what;
      good.at("o") = k->run(merged, cfg, dtype, {}).at("o");
      const CheckResult bad = judge(good, ms);
      EXPECT_FALSE(bad.pass) << what;
      for (const TensorVerdict& v : bad.tensors)
        if (v.name == "o") {
          EXPECT_FALSE(v.pass) << what;
          EXPECT_EQ(v.worst.sequence, 2) << what << ": the sequence whose start was missed";
        }
    }
}

}  // namespace
}  // namespace ttr