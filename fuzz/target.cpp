#include "fuzz/target.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "gate/kernel_checks.hpp"
#include "gate/mutants.hpp"
#include "gpu/binding/device.hpp"

namespace ttr::fuzz {

std::string TargetSpec::text() const {
  return fmt::format("{}:{}", backend == Backend::cpu ? "cpu" : "cuda", tier_name(dtype));
}

TargetSpec parse_target(const std::string& text) {
  const auto colon = text.find(':');
  const std::string backend = text.substr(0, colon), dtype = colon == std::string::npos ? "" : text.substr(colon + 1);
  TargetSpec t;
  if (backend == "cpu") t.backend = Backend::cpu;
  else if (backend == "cuda") t.backend = Backend::cuda;
  else
    throw InputError(fmt::format("--target '{}': unknown backend '{}' (cpu:bf16|cpu:fp32|cuda:bf16|cuda:fp32)", text,
                                 backend));
  if (dtype == "bf16") t.dtype = Tier::bf16;
  else if (dtype == "fp32") t.dtype = Tier::fp32;
  else
    throw InputError(fmt::format("--target '{}': unknown dtype '{}' (cpu:bf16|cpu:fp32|cuda:bf16|cuda:fp32)", text,
                                 dtype));
  return t;
}

namespace {

// The reference forms on the CPU under the dtype's arithmetic policy
// (docs/arithmetic-policies.md): what `ttrcheck run --arith D --form F` computes.
class CpuTarget final : public Target {
 public:
  CpuTarget(TargetSpec spec, Form form, int chunk, Mutant mutant, Direction direction)
      : spec_(spec), form_(form), chunk_(chunk), mutant_(mutant), direction_(direction) {}
  TargetSpec spec() const override { return spec_; }
  Form form() const override { return form_; }
  Direction direction() const override { return direction_; }
  int chunk_size() const override { return chunk_; }
  ModelSpec model() const override {
    ModelSpec ms;
    ms.form = form_;
    ms.direction = direction_;
    ms.dtype = spec_.dtype;
    ms.chunk_size = chunk_;
    return ms;
  }
  TensorMap<double> run(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg) const override {
    const MutantScope scope(mutant_);  // the kernel under test only: oracle and model run outside it
    return run_layer(layer, form_, {spec_.dtype, 0}, inputs, cfg, chunk_, direction_).values;
  }
  std::string replay_command(const std::string& layer, const std::string& inputs_file,
                             const std::string& outputs_file) const override {
    std::string c = fmt::format("ttrcheck run --layer {} --in {} --out {} --arith {} --form {}", layer, inputs_file,
                                outputs_file, tier_name(spec_.dtype), form_name(form_));
    if (!one_token_at_a_time(form_)) c += fmt::format(" --chunk-size {}", chunk_);
    if (mutant_ != Mutant::none) c += fmt::format(" --mutant {}", mutant_name(mutant_));
    if (direction_ == Direction::backward) c += " --backward";
    return c;
  }

 private:
  TargetSpec spec_;
  Form form_;
  int chunk_;
  Mutant mutant_;
  Direction direction_;
};

// A device kernel of the registry on device 0 (forward or backward), with the
// model the gate uses for it (gate/kernel_checks.hpp); a mutant with a CUDA
// counterpart switched on around its runs alone.
class KernelTarget final : public Target {
 public:
  KernelTarget(TargetSpec spec, const KernelImpl& kernel, const LayerEntry& layer, Mutant mutant)
      : spec_(spec), kernel_(kernel), layer_(layer), mutant_(mutant) {}
  TargetSpec spec() const override { return spec_; }
  Form form() const override { return kernel_.form; }
  Direction direction() const override { return kernel_.direction; }
  int chunk_size() const override { return kKernelChunkSize; }
  ModelSpec model() const override { return kernel_model(layer_, kernel_.form, spec_.dtype, 8, 0, kernel_.direction); }
  TensorMap<double> run(const LayerEntry&, const TensorMap<double>& inputs, const Config& cfg) const override {
    const MutantScope scope(mutant_);
    return kernel_.run(inputs, cfg, spec_.dtype, {});
  }
  std::string replay_command(const std::string& layer, const std::string& inputs_file,
                             const std::string& outputs_file) const override {
    return fmt::format("ttrcheck run --device {} --layer {} --in {} --out {} --arith {} --form {}{}{}{}",
                       backend_name(spec_.backend), layer, inputs_file, outputs_file, tier_name(spec_.dtype),
                       form_name(kernel_.form), one_token_at_a_time(kernel_.form) ? "" : " --chunk-size 64",
                       mutant_ != Mutant::none ? fmt::format(" --mutant {}", mutant_name(mutant_)) : "",
                       kernel_.direction == Direction::backward ? " --backward" : "");
  }

 private:
  TargetSpec spec_;
  const KernelImpl& kernel_;
  const LayerEntry& layer_;
  Mutant mutant_;
};

// A mutant must reach the target: never a sequential form or kernel (the
// oracle's definitions and the GPU's reference), and one of its catalogued targets.
void check_mutant_reaches(Mutant mutant, const LayerEntry& layer, Form form, Direction direction) {
  if (mutant == Mutant::none) return;
  if (form == Form::sequential)
    throw InputError(fmt::format("--mutant {}: the sequential form is never mutated (use --form chunk|scan)",
                                 mutant_name(mutant)));
  if (!mutant_info(mutant).affects(layer.spec.name, form, direction))
    throw InputError(fmt::format("--mutant {} does not affect {} --form {} {} (`ttrcheck mutants` lists its targets)",
                                 mutant_name(mutant), layer.spec.name, form_name(form), direction_name(direction)));
}

}  // namespace

std::unique_ptr<Target> make_target(const TargetSpec& spec, const LayerEntry& layer, Form form, int chunk,
                                    Mutant mutant, Direction direction) {
  if (spec.backend != Backend::cpu) {
    const std::string t = spec.text();
    if (mutant != Mutant::none) parse_cuda_mutant(mutant_name(mutant));  // one with a CUDA counterpart
    check_mutant_reaches(mutant, layer, form, direction);
    if (const device::Status st = device::status(); !st.usable())
      throw InputError(fmt::format("--target {}: {}", t, st.reason()));
    const KernelImpl* k = layer.kernel(spec.backend, form, direction);
    if (!k) throw InputError(fmt::format("--target {}: layer '{}' has no {} {} {} kernel", t, layer.spec.name,
                                         backend_name(spec.backend), form_name(form), direction_name(direction)));
    if ((form == Form::chunk || form == Form::chunk_unscaled) && chunk != kKernelChunkSize)
      throw InputError(fmt::format("--target {}: the CUDA chunk kernels use --chunk-size {}", t, kKernelChunkSize));
    return std::make_unique<KernelTarget>(spec, *k, layer, mutant);
  }
  if (!layer.has_form(form, direction))
    throw InputError(fmt::format("--form: layer '{}' has no {} {} form", layer.spec.name, form_name(form),
                                 direction_name(direction)));
  check_mutant_reaches(mutant, layer, form, direction);
  return std::make_unique<CpuTarget>(spec, form, chunk, mutant, direction);
}

}  // namespace ttr::fuzz
