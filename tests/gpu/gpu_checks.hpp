// Shared by the GPU tests: skip without a device, the dims of a case, and
// reporting gate checks (one GPUCHECK line each, which scripts/gpu-check
// collects into its table) and asserting they pass with no NaN/Inf.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gate/kernel_checks.hpp"
#include "gate/error_model.hpp"
#include "oracles/registry.hpp"
#include "reference/core/thread_caches.hpp"

namespace ttr::test {

#define TTR_REQUIRE_DEVICE()                       \
  do {                                             \
    const device::Status st = device::status();    \
    if (!st.usable()) GTEST_SKIP() << st.reason(); \
  } while (0)

// A layer's CUDA kernel of `form` on given inputs (the registry's binding).
inline TensorMap<double> run_kernel(const std::string& layer, Form form, Tier dtype, const TensorMap<double>& in,
                                    const Config& cfg) {
  const KernelImpl* k = find_layer(layer).kernel(Backend::cuda, form);
  if (!k) throw std::invalid_argument(layer + " has no CUDA " + form_name(form) + " kernel");
  return k->run(in, cfg, dtype, {});
}

// check_kernels on a vector case's inputs.
inline std::vector<GateCheck> check_unit(const LayerEntry& e, const VectorCase& c, std::uint64_t seed,
                                         const KernelCheckOptions& opt) {
  const TensorMap<double> in = generate_inputs(e.spec, c, seed);
  return check_kernels(e, in, Config::make(e.spec, c.config), c.name, seed, opt);
}

// Delta-family layers read K, V; kla_kalman reads N, D: both are bound.
inline Dims dims(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

inline double worst_ratio(const CheckResult& r) {
  double w = 0;
  for (const auto& t : r.tensors) w = std::max(w, t.max_ratio);
  return w;
}

inline void report(const std::vector<GateCheck>& checks) {
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  for (const GateCheck& c : checks) {
    std::string detail;
    for (const auto& t : c.result.tensors)
      if (t.present) detail += fmt::format(" {}={:.3g}", t.name, t.max_ratio);
    std::printf("GPUCHECK %-70s %-4s max_ratio=%.3g%s\n", c.id.c_str(), c.result.pass ? "pass" : "FAIL",
                worst_ratio(c.result), detail.c_str());
  }
  std::fflush(stdout);
}

inline void expect_pass(const std::vector<GateCheck>& checks) {
  for (const GateCheck& c : checks) {
    EXPECT_TRUE(c.result.pass) << c.id << ": max ratio " << worst_ratio(c.result);
    for (const auto& t : c.result.tensors) {
      EXPECT_EQ(t.nan_count, 0) << c.id << " " << t.name << ": NaN (unwritten output?)";
      EXPECT_EQ(t.inf_count, 0) << c.id << " " << t.name;
    }
  }
}


// Head (b, h) of a tensor whose axes are named `dims` (a layer spec's names):
// every axis named "B" or "H" is cut to that index (per-token [B,T,H,...], states
// [B,H,...], per-head parameters [H,...]).
inline Tensor<double> slice_bh(const Tensor<double>& t, const std::vector<std::string>& dims, std::int64_t b,
                               std::int64_t h) {
  Shape sh = t.shape;
  for (std::size_t d = 0; d < sh.size(); ++d)
    if (dims[d] == "B" || dims[d] == "H") sh[d] = 1;
  Tensor<double> s(sh, 0.0);
  std::vector<std::int64_t> idx(sh.size(), 0);
  for (double& e : s.data) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < sh.size(); ++d)
      flat = flat * t.shape[d] + (dims[d] == "B" ? b : dims[d] == "H" ? h : idx[d]);
    e = t.data[flat];
    for (std::size_t d = sh.size(); d-- > 0;) {
      if (++idx[d] < sh[d]) break;
      idx[d] = 0;
    }
  }
  return s;
}

// Head (b, h) of a layer's inputs.
inline TensorMap<double> slice_head(const LayerSpec& spec, const TensorMap<double>& in, std::int64_t b,
                                    std::int64_t h) {
  TensorMap<double> out;
  for (const auto& [name, t] : in) out[name] = slice_bh(t, spec.input(name)->dims, b, h);
  return out;
}

using Head = std::pair<std::int64_t, std::int64_t>;

// An environment variable set (value) or unset (nullptr) for the guard's lifetime, then
// restored to what it was (a run may set it for the whole binary: scripts/device-gdn-bench
// --new-env), also when the code between throws. For the kernels' run-time switches
// (gpu/core/env_switch.hpp: TTR_GPU_STATE_BV, TTR_GPU_WY, ...), read at every launch.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) before_ = v;
    EXPECT_EQ(0, value ? ::setenv(name, value, 1) : ::unsetenv(name)) << name;
  }
  ~ScopedEnv() { before_ ? ::setenv(name_, before_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> before_;
};

// Two runs of a kernel on the same inputs gave the same bits (no atomics, fixed orders).
inline void expect_same_bits(const TensorMap<double>& first, const TensorMap<double>& again, const std::string& what) {
  for (const auto& [name, t] : first) {
    const auto it = again.find(name);
    if (it == again.end() || it->second.data.size() != t.data.size()) {
      ADD_FAILURE() << what << " " << name << ": missing or of another size in the second run";
      continue;
    }
    EXPECT_EQ(0, std::memcmp(t.data.data(), it->second.data.data(), t.data.size() * sizeof(double)))
        << what << " " << name << ": repeated run differs";
  }
}

// Head (b, h) of a batch run equals, bit for bit, the same head run alone (no
// cross-block interference); outputs in `skip` (per-head sums over the batch) aside.
inline void expect_head_equals_alone(const LayerSpec& spec, const TensorMap<double>& batch,
                                     const TensorMap<double>& alone, const Head& head, const std::string& what,
                                     const std::vector<std::string>& skip = {}) {
  for (const auto& [name, t] : alone) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    const Tensor<double> part = slice_bh(batch.at(name), spec.output(name)->dims, head.first, head.second);
    std::int64_t diff = 0;
    for (std::size_t i = 0; i < t.data.size(); ++i) diff += t.data[i] != part.data[i];
    EXPECT_EQ(diff, 0) << what << " " << name << " head (" << head.first << "," << head.second
                       << ") differs from the same head run alone";
  }
}

// A batch that fills the GPU against single heads, for every kernel × dtype: a
// repeated run is bit-identical, and every output of each sampled head equals,
// bit for bit, the same head run alone (no cross-block interference). The
// single-head chunk runs of `oracle_heads` (a subset of `heads`) must pass the
// oracle under the chunk model; those checks run in parallel.
inline void check_full_batch(const LayerEntry& e, const VectorCase& big, std::uint64_t seed,
                             const std::vector<Head>& heads, const std::vector<Head>& oracle_heads) {
  const TensorMap<double> in = generate_inputs(e.spec, big, seed);
  const Config cfg = Config::make(e.spec, big.config);
  struct OracleCheck {
    std::string id;
    TensorMap<double> in, cand;
    Tier dtype;
    CheckResult result;
  };
  std::vector<OracleCheck> checks;
  for (Tier dtype : {Tier::bf16, Tier::fp32})
    for (Form k : {Form::chunk, Form::sequential}) {
      const std::string what = fmt::format("{} {}", e.kernel(Backend::cuda, k)->name(), tier_name(dtype));
      const auto first = run_kernel(e.spec.name, k, dtype, in, cfg);
      expect_same_bits(first, run_kernel(e.spec.name, k, dtype, in, cfg), what);
      for (const auto& [b, h] : heads) {
        TensorMap<double> one = slice_head(e.spec, in, b, h);
        auto alone = run_kernel(e.spec.name, k, dtype, one, cfg);
        expect_head_equals_alone(e.spec, first, alone, {b, h}, what);
        if (k == Form::chunk && std::find(oracle_heads.begin(), oracle_heads.end(), Head{b, h}) != oracle_heads.end())
          checks.push_back({fmt::format("{}/cuda-chunk/{}/fill_head_{}_{}/{}", e.spec.name, tier_name(dtype), b, h, seed),
                            std::move(one), std::move(alone), dtype, {}});
      }
    }
  std::vector<std::thread> pool;
  for (OracleCheck& c : checks)
    pool.emplace_back([&e, &cfg, &c] {
      const ThreadCaches caches;
      const TensorMap<double> oracle = run_layer(e, Form::sequential, {Tier::mpfr, 128}, c.in, cfg).values;
      ModelSpec ms;
      ms.chunk_size = kKernelChunkSize;
      ms.dtype = c.dtype;
      c.result = compare(e.spec, oracle, model_errors(e, c.in, cfg, oracle, ms), c.cand);
    });
  for (auto& t : pool) t.join();
  for (const OracleCheck& c : checks) {
    report({GateCheck{c.id, c.result}});
    EXPECT_TRUE(c.result.pass) << c.id;
  }
  EXPECT_EQ(checks.size(), 2 * oracle_heads.size());
}

// One check_kernels call of the parallel runs below.
struct CheckUnit {
  std::string name;
  const LayerEntry* layer;
  TensorMap<double> in;
  Config cfg;
};

// Units on a thread each (the MPFR oracle and the error model dominate the time,
// units are independent), then, in order: each reported (GPUCHECK lines), passing
// with no NaN/Inf, with `checks` checks when given, and — `rounding` — no check
// exact (a kernel that rounds is never bit-exact against the oracle).
inline void check_units(const std::vector<CheckUnit>& units, std::uint64_t seed, const KernelCheckOptions& opt,
                        std::size_t checks = 0, bool rounding = false) {
  std::vector<std::vector<GateCheck>> results(units.size());
  std::vector<std::string> errors(units.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < units.size(); ++i)
    pool.emplace_back([&, i] {
      const ThreadCaches caches;
      try {
        results[i] = check_kernels(*units[i].layer, units[i].in, units[i].cfg, units[i].name, seed, opt);
      } catch (const std::exception& ex) {
        errors[i] = ex.what();
      }
    });
  for (auto& t : pool) t.join();
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::string what = units[i].layer->spec.name + " " + units[i].name;
    ASSERT_TRUE(errors[i].empty()) << what << ": " << errors[i];
    report(results[i]);
    expect_pass(results[i]);
    if (checks) {
      EXPECT_EQ(results[i].size(), checks) << what;
    }
    EXPECT_FALSE(results[i].empty()) << what;
    if (rounding) {
      for (const GateCheck& c : results[i]) EXPECT_GT(worst_ratio(c.result), 0.0) << c.id << ": a rounding kernel is never exact";
    }
  }
}

// A layer's cases through check_kernels (chunk, sequential and chunk vs
// sequential, bf16 and fp32), in parallel, reported in order. `split`: one unit
// per head (b, h) instead of one per case — the MPFR oracle and the error model
// dominate the time, heads are independent and the model is per output row, so
// a long case spreads over the cores.
inline void check_cases(const LayerEntry& e, const std::vector<VectorCase>& cases, std::uint64_t seed,
                        bool split = false) {
  std::vector<CheckUnit> units;
  for (const VectorCase& c : cases) {
    const TensorMap<double> in = generate_inputs(e.spec, c, seed);
    const Config cfg = Config::make(e.spec, c.config);
    const std::int64_t B = in.at("q").dim(0), H = in.at("q").dim(2);
    if (!split) {
      units.push_back({c.name, &e, in, cfg});
      continue;
    }
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        units.push_back({fmt::format("{}_b{}h{}", c.name, b, h), &e, slice_head(e.spec, in, b, h), cfg});
  }
  KernelCheckOptions opt;
  opt.cross = true;
  check_units(units, seed, opt, 6);  // {bf16, fp32} × {chunk, sequential, chunk-vs-sequential}
}

}  // namespace ttr::test
