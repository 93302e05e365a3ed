#include "oracles/gate.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "oracles/error.hpp"
#include "oracles/mutants.hpp"
#include "reference/core/mutant.hpp"

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

// One (layer, case, seed): the oracle is computed once and shared by its forms × dtypes.
struct Unit {
  const LayerEntry* layer;
  GateCase c;
  std::uint64_t seed;
  std::vector<std::pair<Form, Tier>> kernels;
  std::size_t first;  // index of its first check in the plan
};

// FLA's criterion: per output tensor, ‖c − r‖₂/‖r‖₂ over the whole tensor against
// an fp32 run of the sequential form, reported as a ratio to 0.005 (threshold 1).
CheckResult fla_compare(const LayerSpec& spec, const TensorMap<double>& reference, const TensorMap<double>& cand,
                        Tier dtype, Form form, int chunk) {
  CheckResult r;
  r.layer = spec.name;
  r.dtype = dtype;
  r.model_form = form;
  r.chunk_size = chunk;
  r.threshold = 1.0;
  for (const TensorSpec& out : spec.outputs) {
    if (!out.certifiable) continue;
    TensorVerdict v;
    v.name = out.name;
    const Tensor<double>& ref = reference.at(out.name);
    const Tensor<double>& c = cand.at(out.name);
    double num = 0, den = 0;
    for (std::size_t e = 0; e < ref.data.size(); ++e) {
      const double d = c.data[e] - ref.data[e];
      num += d * d;
      den += ref.data[e] * ref.data[e];
      if (std::isnan(c.data[e])) ++v.nan_count;
      if (std::isinf(c.data[e])) ++v.inf_count;
      if (std::isfinite(d)) v.max_abs_error = std::max(v.max_abs_error, std::fabs(d));
    }
    v.elements = ref.numel();
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    v.max_ratio = std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel / kFlaRelRmsThreshold;
    v.pass = v.max_ratio <= 1.0;
    r.pass = r.pass && v.pass;
    r.tensors.push_back(v);
  }
  return r;
}

void run_unit(const Unit& u, const GateOptions& opt, const Mutant mutant, std::vector<GateCheck>& out) {
  const LayerSpec& spec = u.layer->spec;
  const auto sets = gate_config(spec);
  const VectorCase vc{u.c.name, "", u.c.dims, u.c.regime, sets};
  const TensorMap<double> in = generate_inputs(spec, vc, u.seed);
  const Config cfg = Config::make(spec, sets);
  TensorMap<double> reference;
  if (opt.criterion == Criterion::model)
    reference = run_layer(*u.layer, Form::sequential, {Tier::mpfr, kGateOracleBits}, in, cfg).values;
  else
    reference = run_layer(*u.layer, Form::sequential, {Tier::fp32, 0}, in, cfg).values;
  for (std::size_t i = 0; i < u.kernels.size(); ++i) {
    const auto [form, dtype] = u.kernels[i];
    TensorMap<double> cand;
    {
      const MutantScope scope(mutant);  // the kernel under test only, never the oracle or the model
      cand = run_layer(*u.layer, form, {dtype, 0}, in, cfg, u.c.chunk_size).values;
    }
    GateCheck& g = out[u.first + i];
    g.id = fmt::format("{}/{}/{}/{}/{}", spec.name, form_name(form), tier_name(dtype), u.c.name, u.seed);
    if (opt.criterion == Criterion::fla) {
      g.result = fla_compare(spec, reference, cand, dtype, form, u.c.chunk_size);
      continue;
    }
    ModelSpec ms;
    ms.form = form;
    ms.dtype = dtype;
    ms.chunk_size = u.c.chunk_size;
    ms.samples = opt.samples;
    ms.seed = u.seed;
    g.result = compare(spec, reference, model_errors(*u.layer, in, cfg, reference, ms), cand);
  }
}

}  // namespace

const std::vector<std::string>& gate_suite_names() {
  static const std::vector<std::string> n = {"default", "full"};
  return n;
}

// Default: small shapes with T a multiple of no chunk size, many seeds (cheap,
// so calibration over 1000 seeds is affordable), the adversarial regimes of the
// WY/UT tests, and one realistic head size (K = V = 64, where accumulation
// order matters) at C = 64. Full: more seeds, longer sequences, stress regimes.
std::vector<GateCase> gate_cases(const std::string& suite) {
  Regime plain, edges, dup, states, norms;
  edges.decay_edges = edges.beta_edges = true;
  dup.near_duplicate_keys = true;
  states.optional_inputs = true;
  norms.key_log10_norm_lo = -1;
  norms.key_log10_norm_hi = 1;
  if (suite == "default")
    return {{"small", dims_of(1, 77, 2, 16, 16), plain, 16, 4},
            {"edges", dims_of(1, 77, 2, 16, 16), edges, 16, 2},
            {"near_duplicate_keys", dims_of(1, 77, 2, 16, 16), dup, 16, 2},
            {"initial_states", dims_of(2, 45, 1, 16, 16), states, 16, 2},
            {"realistic", dims_of(1, 130, 2, 64, 64), plain, 64, 1}};
  if (suite == "full")
    return {{"small", dims_of(1, 77, 2, 16, 16), plain, 16, 32},
            {"edges", dims_of(1, 77, 2, 16, 16), edges, 16, 16},
            {"near_duplicate_keys", dims_of(1, 77, 2, 16, 16), dup, 16, 16},
            {"initial_states", dims_of(2, 45, 1, 16, 16), states, 16, 16},
            {"key_norms", dims_of(1, 130, 2, 32, 32), norms, 32, 8},
            {"realistic", dims_of(1, 600, 2, 64, 64), plain, 64, 4},
            {"long", dims_of(1, 2100, 1, 64, 64), plain, 64, 1}};
  throw InputError(fmt::format("unknown gate suite '{}' (default|full)", suite));
}

std::vector<std::pair<std::string, std::string>> gate_config(const LayerSpec& spec) {
  if (spec.key("solver")) return {{"solver", "chebyshev"}};  // GKA's chunkwise solver (GKA §4.2)
  return {};
}

void validate_gate_options(const GateOptions& opt) {
  const std::vector<GateCase> cases = gate_cases(opt.suite);
  for (const auto& name : opt.cases)
    if (std::none_of(cases.begin(), cases.end(), [&](const GateCase& c) { return c.name == name; }))
      throw InputError(fmt::format("suite '{}' has no case '{}'", opt.suite, name));
  for (const auto& name : opt.layers) find_layer(name);
  if (!opt.mutant.empty()) parse_mutant(opt.mutant);
}

GateResult run_gate(const GateOptions& opt) {
  validate_gate_options(opt);
  std::vector<GateCase> cases = gate_cases(opt.suite);
  if (!opt.cases.empty())
    std::erase_if(cases, [&](const GateCase& c) {
      return std::find(opt.cases.begin(), opt.cases.end(), c.name) == opt.cases.end();
    });
  const Mutant mutant = opt.mutant.empty() ? Mutant::none : parse_mutant(opt.mutant);
  std::vector<Unit> units;
  std::size_t total = 0;
  for (const LayerEntry& e : registry()) {
    if (!opt.layers.empty() && std::find(opt.layers.begin(), opt.layers.end(), e.spec.name) == opt.layers.end())
      continue;
    std::vector<std::pair<Form, Tier>> kernels;
    for (const auto& [form, _] : e.forms)
      if (form != Form::sequential && (opt.forms.empty() || std::count(opt.forms.begin(), opt.forms.end(), form)))
        for (Tier t : {Tier::bf16, Tier::fp32}) kernels.emplace_back(form, t);
    if (kernels.empty()) continue;
    for (const GateCase& c : cases) {
      const int n = opt.seeds > 0 ? opt.seeds : c.seeds;
      for (int s = 0; s < n; ++s) {
        units.push_back({&e, c, opt.seed + static_cast<std::uint64_t>(s), kernels, total});
        total += kernels.size();
      }
    }
  }
  GateResult result;
  result.checks.resize(total);
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::vector<char> ran(units.size(), 0);
  std::mutex report;
  std::exception_ptr failure;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < units.size();) {
      if (opt.fail_fast && failed) return;
      try {
        run_unit(units[i], opt, mutant, result.checks);
        ran[i] = 1;
        for (std::size_t k = 0; k < units[i].kernels.size(); ++k)
          if (!result.checks[units[i].first + k].result.pass) failed = true;
      } catch (...) {
        const std::lock_guard<std::mutex> lock(report);
        if (!failure) failure = std::current_exception();
        return;
      }
      const std::size_t d = done += units[i].kernels.size();
      if (opt.progress) {
        const std::lock_guard<std::mutex> lock(report);
        opt.progress(d, total, result.checks[units[i].first].id);
      }
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = opt.threads > 0 ? static_cast<unsigned>(opt.threads) : hw;
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (opt.fail_fast) {  // keep the checks that ran, in plan order
    std::vector<GateCheck> kept;
    for (std::size_t i = 0; i < units.size(); ++i)
      if (ran[i])
        for (std::size_t k = 0; k < units[i].kernels.size(); ++k) kept.push_back(std::move(result.checks[units[i].first + k]));
    result.checks = std::move(kept);
  }
  for (const GateCheck& c : result.checks) result.pass = result.pass && c.result.pass;
  return result;
}

}  // namespace ttr
