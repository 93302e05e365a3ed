#include "gate/gate.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "oracles/error.hpp"
#include "oracles/slices.hpp"
#include "gate/kernel_checks.hpp"
#include "gate/mutants.hpp"
#include "reference/core/mutant.hpp"
#include "reference/core/thread_caches.hpp"

namespace ttr {
namespace {

// The gate's oracle precision: 128 bits. Its own rounding (2^-128 relative per
// operation, amplified by at most the suite's conditioning, κ ≲ 1e4 for GKA)
// stays more than 20 orders of magnitude below the fp32 errors the gate
// measures, at about half the cost of 256 bits.
constexpr unsigned kGateOracleBits = 128;

Dims dims_of(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

// One (layer, direction, case, seed): one judge, so the oracle is computed once
// and shared by the unit's kernels × dtypes.
struct Unit {
  const LayerEntry* layer;
  GateCase c;
  std::uint64_t seed;
  std::vector<std::pair<Form, PolicyChoice>> kernels;  // Backend::cpu: the forms × policies judged
  std::size_t expected;                        // checks it makes (progress)
  Direction direction = Direction::forward;
};

std::vector<GateCheck> run_cpu_unit(const Unit& u, const GateOptions& opt, const Mutant mutant) {
  const LayerSpec& spec = u.layer->spec;
  const VectorCase vc = gate_vector_case(spec, u.c);
  // Backward: the forward inputs plus a cotangent of every output (do, dht, …).
  const bool backward = u.direction == Direction::backward;
  const TensorMap<double> in = backward ? generate_backward_inputs(spec, vc, u.seed) : generate_inputs(spec, vc, u.seed);
  const Config cfg = Config::make(spec, vc.config);
  // The model criterion's oracle is MPFR; FLA's practice compares with an fp32
  // run of the sequential form.
  const Arith reference = opt.criterion == Criterion::model ? Arith{Tier::mpfr, kGateOracleBits} : Arith{Tier::fp32, 0};
  Judge judge(*u.layer, in, cfg, reference, u.direction);
  judge.set_strict_range(opt.strict_range);
  judge.set_oracle_mode(opt.oracle_mode);
  std::vector<GateCheck> out;
  for (const auto& [form, policy] : u.kernels) {
    TensorMap<double> cand;
    {
      const MutantScope scope(mutant);  // the kernel under test only, never the oracle or the model
      cand = run_layer(*u.layer, form, {concrete_tier(policy), 0}, in, cfg, u.c.chunk_size, u.direction).values;
    }
    const ModelSpec ms = policy_model(form, u.direction, policy, u.c.chunk_size, u.seed, opt.samples);
    const std::string id = fmt::format("{}/{}/{}/{}/{}{}", spec.name, form_name(form),
                                       policy_name(policy.dtype, policy.policy), u.c.name,
                                       u.seed, backward ? "/backward" : "");
    auto verdict = [&](const TensorMap<double>& c) {
      return opt.criterion == Criterion::model ? judge(c, ms) : judge.fla(c, ms, opt.criterion);
    };
    if (opt.inject_magnitudes.empty()) {
      GateCheck& g = out.emplace_back();
      g.id = id;
      g.result = verdict(cand);
      continue;
    }
    for (const double eps : opt.inject_magnitudes) {  // the same kernel outputs at every ε
      TensorMap<double> c = cand;
      inject_error(c, judge.spec().outputs, opt.inject, eps, u.c.chunk_size, u.seed);
      GateCheck& g = out.emplace_back();
      g.id = fmt::format("{}/inject={}@{:.4g}", id, inject_shape_name(opt.inject), eps);
      g.result = verdict(c);
    }
  }
  return out;
}

std::vector<GateCheck> run_kernel_unit(const Unit& u, const GateOptions& opt, const Mutant mutant) {
  const LayerSpec& spec = u.layer->spec;
  const VectorCase vc = gate_vector_case(spec, u.c);
  KernelCheckOptions ko;
  ko.backend = opt.backend;
  ko.samples = opt.samples;
  ko.strict_range = opt.strict_range;
  ko.oracle_mode = opt.oracle_mode;
  ko.direction = u.direction;
  ko.mutant = mutant;
  if (!opt.forms.empty()) ko.forms = opt.forms;
  if (!opt.policies.empty()) {
    ko.dtypes.clear();
    for (const PolicyChoice& p : opt.policies) ko.dtypes.push_back(p.dtype);  // native bf16/fp32 (validated)
  }
  const bool backward = u.direction == Direction::backward;
  return check_kernels(*u.layer, backward ? generate_backward_inputs(spec, vc, u.seed) : generate_inputs(spec, vc, u.seed),
                       Config::make(spec, vc.config), u.c.name, u.seed, ko);
}

}  // namespace

const std::vector<std::string>& gate_suite_names() {
  static const std::vector<std::string> n = {"default", "full", "production"};
  return n;
}

// Default: small shapes with T a multiple of no chunk size, many seeds (cheap,
// so calibration over 1000 seeds is affordable), the adversarial regimes of the
// WY/UT tests, and one realistic head size (K = V = 64, where accumulation
// order matters) at C = 64. Full: more seeds, longer sequences, stress regimes.
// The default suite is CI's gate, so its realistic case leaves out GKA's chunk
// backward: its Monte Carlo model reverses the Chebyshev solve (r = 30 steps of 12
// batched 64×64 products, GKA Alg. 2) in every sample, ~190 s of CPU for that one
// unit against ~5.6 s for each of GKA's small backward units; the full suite runs it.
std::vector<GateCase> gate_cases(const std::string& suite) {
  Regime plain, edges, dup, states, norms, varlen;
  edges.decay_edges = edges.beta_edges = true;
  // A varlen batch (docs/varlen.md): a boundary on the chunk edge 16, a one-token
  // sequence after it, one off the grid; initial states [N, H, K, V].
  varlen.optional_inputs = true;
  varlen.cu_seqlens = {0, 16, 17, 40, 77};
  dup.near_duplicate_keys = true;
  states.optional_inputs = true;
  norms.key_log10_norm_lo = -1;
  norms.key_log10_norm_hi = 1;
  if (suite == "default")
    return {{"small", dims_of(1, 77, 2, 16, 16), plain, 16, 4},
            {"edges", dims_of(1, 77, 2, 16, 16), edges, 16, 2},
            {"near_duplicate_keys", dims_of(1, 77, 2, 16, 16), dup, 16, 2},
            {"initial_states", dims_of(2, 45, 1, 16, 16), states, 16, 2},
            {"realistic", dims_of(1, 130, 2, 64, 64), plain, 64, 1, {"gka"}},
            {"varlen", dims_of(1, 77, 2, 16, 16), varlen, 16, 1}};
  if (suite == "full")
    return {{"small", dims_of(1, 77, 2, 16, 16), plain, 16, 32},
            {"edges", dims_of(1, 77, 2, 16, 16), edges, 16, 16},
            {"near_duplicate_keys", dims_of(1, 77, 2, 16, 16), dup, 16, 16},
            {"initial_states", dims_of(2, 45, 1, 16, 16), states, 16, 16},
            {"key_norms", dims_of(1, 130, 2, 32, 32), norms, 32, 8},
            {"realistic", dims_of(1, 600, 2, 64, 64), plain, 64, 4},
            {"long", dims_of(1, 2100, 1, 64, 64), plain, 64, 1},
            {"varlen", dims_of(1, 77, 2, 16, 16), varlen, 16, 8}};
  if (suite == "production") {
    // The `vectors` production cases (docs/varlen.md, "Suites"), one seed each: B=4
    // T=4096 H=8 K=V=128, T=16384 at B=1, 16 packed sequences of 32768 tokens. Their
    // shapes do not depend on the layer; the delta family's spec names them.
    std::vector<GateCase> cs;
    for (const VectorCase& v : suite_cases(find_layer("gated_delta_rule").spec, "production"))
      cs.push_back({v.name, v.dims, v.regime, 64, 1});
    return cs;
  }
  throw InputError(fmt::format("unknown gate suite '{}' (default|full|production)", suite));
}

std::vector<std::pair<std::string, std::string>> gate_config(const LayerSpec& spec) {
  if (spec.key("solver")) return {{"solver", "chebyshev"}};  // GKA's chunkwise solver (GKA §4.2)
  return {};
}

VectorCase gate_vector_case(const LayerSpec& spec, const GateCase& c) {
  return {c.name, "", c.dims, c.regime, gate_config(spec)};
}

void validate_gate_options(const GateOptions& opt) {
  const std::vector<GateCase> cases = gate_cases(opt.suite);
  for (const auto& name : opt.cases)
    if (std::none_of(cases.begin(), cases.end(), [&](const GateCase& c) { return c.name == name; }))
      throw InputError(fmt::format("suite '{}' has no case '{}'", opt.suite, name));
  for (const auto& name : opt.layers) find_layer(name);
  if (!opt.mutant.empty()) parse_mutant(opt.mutant);
  if (!opt.mutant.empty() && !opt.inject_magnitudes.empty())
    throw InputError("--inject and --mutant exclude each other (an injection measures a correct kernel)");
  for (const double eps : opt.inject_magnitudes)
    if (!(eps >= 0.0 && eps <= 1e6)) throw InputError(fmt::format("--inject-magnitudes: {} is not in [0, 1e6]", eps));
  if (opt.directions.empty()) throw InputError("the gate needs a direction (forward, backward or both)");
  for (std::size_t i = 0; i < opt.policies.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (opt.policies[i] == opt.policies[j])
        throw InputError(fmt::format("--policy {} given twice", policy_name(opt.policies[i].dtype, opt.policies[i].policy)));
  if (opt.backend != Backend::cpu)
    for (const PolicyChoice& p : opt.policies)
      if (!device_policy(p))
        throw InputError(fmt::format("--policy {}: the device's kernels run bf16 and fp32; a foreign arithmetic is "
                                     "judged on the CPU forms",
                                     policy_name(p.dtype, p.policy)));
}

bool device_policy(const PolicyChoice& p) {
  return p.policy == Policy::native && (p.dtype == Tier::bf16 || p.dtype == Tier::fp32);
}

GateResult run_gate(const GateOptions& opt) {
  validate_gate_options(opt);
  GateResult result;
  if (opt.backend != Backend::cpu) {
    if (opt.criterion != Criterion::model) throw InputError("the device kernels run under the model criterion only");
    if (!opt.mutant.empty()) parse_cuda_mutant(opt.mutant);  // only those with a CUDA counterpart
    if (!opt.inject_magnitudes.empty()) throw InputError("errors are injected into the CPU kernels' outputs only");
    const device::Status st = device::status();
    if (!st.usable()) {
      result.skipped = st.reason();
      return result;
    }
    result.device = st.device;
  }
  std::vector<GateCase> cases = gate_cases(opt.suite);
  if (!opt.cases.empty())
    std::erase_if(cases, [&](const GateCase& c) {
      return std::find(opt.cases.begin(), opt.cases.end(), c.name) == opt.cases.end();
    });
  const Mutant mutant = opt.mutant.empty() ? Mutant::none : parse_mutant(opt.mutant);
  const std::vector<PolicyChoice> policies =
      opt.policies.empty() ? std::vector<PolicyChoice>{{Tier::bf16, Policy::native}, {Tier::fp32, Policy::native}}
                           : opt.policies;
  std::vector<Unit> units;
  std::vector<std::size_t> plan_index;  // of each unit in the unsharded plan
  std::size_t total = 0, planned = 0;
  for (const LayerEntry& e : registry()) {
    if (!opt.layers.empty() && std::find(opt.layers.begin(), opt.layers.end(), e.spec.name) == opt.layers.end())
      continue;
    // Per layer: its forward units, then its backward units (so a forward-only
    // gate plans exactly what it planned before backward checks existed).
    for (const Direction dir : {Direction::forward, Direction::backward}) {
      if (std::find(opt.directions.begin(), opt.directions.end(), dir) == opt.directions.end()) continue;
      std::vector<std::pair<Form, PolicyChoice>> kernels;
      std::size_t expected = 0;
      if (opt.backend == Backend::cpu) {
        for (Form form : e.form_list(dir))
          if (form != Form::sequential && (opt.forms.empty() ? sweeps_by_default(form)
                                                             : std::count(opt.forms.begin(), opt.forms.end(), form) > 0))
            for (const PolicyChoice& p : policies) kernels.emplace_back(form, p);
        expected = kernels.size() * std::max<std::size_t>(1, opt.inject_magnitudes.size());
      } else {
        for (const KernelImpl* k : e.kernel_list(opt.backend, dir))
          if (opt.forms.empty() || std::count(opt.forms.begin(), opt.forms.end(), k->form) > 0)
            expected += policies.size();  // × bf16, fp32 (or the --policy subset of them)
      }
      if (expected == 0) continue;
      for (const GateCase& c : cases) {
        if (dir == Direction::backward && c.no_backward.count(e.spec.name)) continue;
        const int n = opt.seeds > 0 ? opt.seeds : c.seeds;
        for (int s = 0; s < n; ++s, ++planned) {
          if (!opt.shard.owns(planned)) continue;  // another shard's unit
          units.push_back({&e, c, opt.seed + static_cast<std::uint64_t>(s), kernels, expected, dir});
          plan_index.push_back(planned);
          total += expected;
        }
      }
    }
  }
  std::vector<std::vector<GateCheck>> results(units.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::vector<char> ran(units.size(), 0);
  std::mutex report;
  std::exception_ptr failure;
  // --threads, else the slicer's default (TTR_THREADS, OMP_NUM_THREADS, the cores).
  const unsigned n = static_cast<unsigned>(opt.threads > 0 ? opt.threads : slice_threads());
  // No more workers than units; the threads the units leave idle go to each unit's
  // oracle and model, over its (sequence, head) slices (a production-shape suite has
  // a few large units; the default suite's many small ones fill the cores alone, and
  // each runs on its worker's thread). The bytes do not depend on the split.
  const unsigned workers = std::max(1u, std::min(n, static_cast<unsigned>(units.size())));
  const int inner_threads = static_cast<int>(std::max(1u, n / workers));
  auto worker = [&] {
    const SliceThreadsScope inner(inner_threads);
    for (std::size_t i; (i = next++) < units.size();) {
      if (opt.fail_fast && failed) return;
      try {
        results[i] = opt.backend == Backend::cpu ? run_cpu_unit(units[i], opt, mutant)
                                                 : run_kernel_unit(units[i], opt, mutant);
        ran[i] = 1;
        for (const GateCheck& c : results[i])
          if (!c.result.pass) failed = true;
      } catch (...) {
        const std::lock_guard<std::mutex> lock(report);
        if (!failure) failure = std::current_exception();
        return;
      }
      const std::size_t d = done += units[i].expected;
      if (opt.progress && !results[i].empty()) {
        const std::lock_guard<std::mutex> lock(report);
        opt.progress(d, total, results[i].front().id);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < workers; ++t)
    pool.emplace_back([&] {
      const ThreadCaches caches;  // MPFR's per-thread caches, freed as the worker exits
      worker();
    });
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  for (std::size_t i = 0; i < units.size(); ++i)  // plan order; fail_fast: the units that ran
    if (ran[i])
      for (GateCheck& c : results[i]) {
        c.unit = plan_index[i];
        result.checks.push_back(std::move(c));
      }
  result.units = planned;
  for (const GateCheck& c : result.checks) result.pass = result.pass && c.result.pass;
  return result;
}

}  // namespace ttr
