#include "cuda_gate/gate.hpp"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "oracles/error_model.hpp"
#include "oracles/registry.hpp"

namespace ttr::cuda {

std::vector<GateCheck> check_unit(const LayerEntry& layer, const VectorCase& c, std::uint64_t seed,
                                  const UnitOptions& opt) {
  return check_inputs(layer, generate_inputs(layer.spec, c, seed), Config::make(layer.spec, c.config), c.name, seed,
                      opt);
}

std::vector<GateCheck> check_inputs(const LayerEntry& layer, const TensorMap<double>& in, const Config& cfg,
                                    const std::string& case_name, std::uint64_t seed, const UnitOptions& opt) {
  const LayerSpec& spec = layer.spec;
  const TensorMap<double> oracle = run_layer(layer, Form::sequential, {Tier::mpfr, 128}, in, cfg).values;
  std::vector<GateCheck> out;
  for (Tier dtype : opt.dtypes) {
    auto model_of = [&](Form form) {
      ModelSpec ms;
      ms.form = form;
      ms.dtype = dtype;
      ms.chunk_size = kChunkSize;
      ms.samples = opt.samples;
      ms.seed = seed;
      return model_errors(layer, in, cfg, oracle, ms);
    };
    const ErrorModel chunk_model = model_of(Form::chunk);
    // fp32 recurrent: exactly the sequential form in fp32 (every operation fp32,
    // nothing stored narrower), so the sequential fp32 model. bf16 recurrent: the
    // chunk form's bf16 model (module comment).
    ErrorModel rec_model = chunk_model;
    if (dtype == Tier::fp32) {
      // Quadrature sum of the sequential fp32 model (the delta recurrence, run
      // token by token) and the chunk model (precond: the write key k̃ comes from
      // the chunkwise preconditioner, cuda_gate/runner.cpp): independent errors.
      rec_model = model_of(Form::sequential);
      for (auto& [name, t] : rec_model.rms)
        if (const auto r = chunk_model.rms.find(name); r != chunk_model.rms.end())
          for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = std::hypot(t.data[i], r->second.data[i]);
    }
    TensorMap<double> chunk_out, rec_out;
    for (Kernel k : opt.kernels) {
      TensorMap<double> cand = run(spec.name, k, dtype, in, cfg);
      GateCheck g;
      g.id = fmt::format("{}/{}/{}/{}/{}", spec.name, kernel_name(k), tier_name(dtype), case_name, seed);
      g.result = compare(spec, oracle, k == Kernel::chunk ? chunk_model : rec_model, cand);
      out.push_back(std::move(g));
      (k == Kernel::chunk ? chunk_out : rec_out) = std::move(cand);
    }
    if (opt.cross && !chunk_out.empty() && !rec_out.empty()) {
      // The recurrent kernel's output in the oracle's place: the difference of two
      // independent errors, each modelled, has the quadrature sum of the two rms.
      ErrorModel both = chunk_model;
      for (auto& [name, t] : both.rms)
        if (const auto r = rec_model.rms.find(name); r != rec_model.rms.end())
          for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = std::hypot(t.data[i], r->second.data[i]);
      GateCheck g;
      g.id = fmt::format("{}/cuda-chunk-vs-recurrent/{}/{}/{}", spec.name, tier_name(dtype), case_name, seed);
      g.result = compare(spec, rec_out, both, chunk_out);
      out.push_back(std::move(g));
    }
  }
  return out;
}

GateReport run_gate(const ttr::GateOptions& opt) {
  GateReport rep;
  rep.status = status();
  if (!rep.status.usable()) return rep;
  validate_gate_options(opt);
  std::vector<GateCase> cases = gate_cases(opt.suite);
  if (!opt.cases.empty())
    std::erase_if(cases, [&](const GateCase& c) {
      return std::find(opt.cases.begin(), opt.cases.end(), c.name) == opt.cases.end();
    });
  struct Unit {
    const LayerEntry* layer;
    VectorCase c;
    std::uint64_t seed;
  };
  std::vector<Unit> units;
  for (const std::string& name : layers()) {
    if (!opt.layers.empty() && std::find(opt.layers.begin(), opt.layers.end(), name) == opt.layers.end()) continue;
    const LayerEntry& e = find_layer(name);
    for (const GateCase& gc : cases) {
      const int n = opt.seeds > 0 ? opt.seeds : gc.seeds;
      for (int s = 0; s < n; ++s)
        units.push_back({&e, VectorCase{gc.name, "", gc.dims, gc.regime, gate_config(e.spec)},
                         opt.seed + static_cast<std::uint64_t>(s)});
    }
  }
  UnitOptions uo;
  uo.samples = opt.samples;
  std::vector<std::vector<GateCheck>> results(units.size());
  std::atomic<std::size_t> next{0};
  std::mutex m;
  std::exception_ptr failure;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < units.size();) {
      try {
        results[i] = check_unit(*units[i].layer, units[i].c, units[i].seed, uo);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(m);
        if (!failure) failure = std::current_exception();
        return;
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
  for (auto& r : results)
    for (auto& c : r) {
      rep.pass = rep.pass && c.result.pass;
      rep.checks.push_back(std::move(c));
    }
  return rep;
}

}  // namespace ttr::cuda
