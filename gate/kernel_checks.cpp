#include "gate/kernel_checks.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "reference/core/mutant.hpp"

namespace ttr {

ModelSpec kernel_model(Form form, Tier dtype, int samples, std::uint64_t seed, Direction direction) {
  ModelSpec ms;
  ms.direction = direction;
  // kla_kalman's `chunk_unscaled` kernel is modelled by the CPU form of that name
  // (the paper's representation); every other kernel as kernel_checks.hpp says.
  ms.form = form == Form::chunk_unscaled ? Form::chunk_unscaled : Form::chunk;
  ms.dtype = dtype;
  ms.chunk_size = kKernelChunkSize;
  ms.samples = samples;
  ms.seed = seed;
  if (form == Form::sequential && dtype == Tier::fp32) {
    ms.form = Form::sequential;
    ms.also = {Form::chunk};
  }
  return ms;
}

ModelSpec kernel_model(const LayerEntry& layer, Form form, Tier dtype, int samples, std::uint64_t seed,
                       Direction direction) {
  ModelSpec ms = kernel_model(form, dtype, samples, seed, direction);
  // A chunk form declared TTR_OWN_ALGORITHM (layers.def) is not the recurrence
  // taken in chunks: gka's chunk backward recovers the Chebyshev iterates by
  // running Alg. 1 backwards (GKA Alg. 2), an error of its own (tens of bf16 u in
  // dk, docs/error-model-gradients.md, "GKA's chunk backward") that a recurrent kernel,
  // which stores its iterates, does not make.
  const FormImpl* chunk = layer.form(Form::chunk, direction);
  if (form == Form::sequential && (!chunk || chunk->own_algorithm)) {
    ms.form = Form::sequential;
    ms.also.clear();
  }
  return ms;
}

std::vector<GateCheck> check_kernels(const LayerEntry& layer, const TensorMap<double>& in, const Config& cfg,
                                     const std::string& case_name, std::uint64_t seed, const KernelCheckOptions& opt) {
  const Direction dir = opt.direction;
  const std::string suffix = dir == Direction::backward ? "-backward" : "";
  Judge judge(layer, in, cfg, {Tier::mpfr, 128}, dir);
  judge.set_strict_range(opt.strict_range);
  judge.set_oracle_mode(opt.oracle_mode);
  std::vector<GateCheck> out;
  for (Tier dtype : opt.dtypes) {
    const KernelImpl* ran[2] = {nullptr, nullptr};  // chunk, sequential
    TensorMap<double> outputs[2];
    for (Form form : opt.forms) {
      const KernelImpl* k = layer.kernel(opt.backend, form, dir);
      if (!k) continue;
      TensorMap<double> cand;
      {
        const MutantScope scope(opt.mutant);  // the kernel under test only
        cand = k->run(in, cfg, dtype, opt.launch);
      }
      GateCheck g;
      g.id = fmt::format("{}/{}{}/{}/{}/{}", layer.spec.name, k->name(), suffix, tier_name(dtype), case_name, seed);
      g.result = judge(cand, kernel_model(layer, form, dtype, opt.samples, seed, dir));
      out.push_back(std::move(g));
      const int slot = form == Form::chunk ? 0 : (form == Form::sequential ? 1 : -1);
      if (slot >= 0) ran[slot] = k, outputs[slot] = std::move(cand);
    }
    if (opt.cross && ran[0] && ran[1]) {
      GateCheck g;
      g.id = fmt::format("{}/{}-vs-{}{}/{}/{}/{}", layer.spec.name, ran[0]->name(), form_name(Form::sequential),
                         suffix, tier_name(dtype), case_name, seed);
      g.result = judge.between(outputs[1], outputs[0], kernel_model(layer, Form::chunk, dtype, opt.samples, seed, dir),
                               kernel_model(layer, Form::sequential, dtype, opt.samples, seed, dir));
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace ttr
