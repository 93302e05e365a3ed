#include "oracles/fuzz/target.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/mutants.hpp"

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
  CpuTarget(TargetSpec spec, Form form, int chunk, Mutant mutant)
      : spec_(spec), form_(form), chunk_(chunk), mutant_(mutant) {}
  TargetSpec spec() const override { return spec_; }
  Form form() const override { return form_; }
  int chunk_size() const override { return chunk_; }
  TensorMap<double> run(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg) const override {
    const MutantScope scope(mutant_);  // the kernel under test only: oracle and model run outside it
    return run_layer(layer, form_, {spec_.dtype, 0}, inputs, cfg, chunk_).values;
  }
  std::string replay_command(const std::string& layer, const std::string& inputs_file,
                             const std::string& outputs_file) const override {
    std::string c = fmt::format("ttrcheck run --layer {} --in {} --out {} --arith {} --form {}", layer, inputs_file,
                                outputs_file, tier_name(spec_.dtype), form_name(form_));
    if (form_ != Form::sequential) c += fmt::format(" --chunk-size {}", chunk_);
    if (mutant_ != Mutant::none) c += fmt::format(" --mutant {}", mutant_name(mutant_));
    return c;
  }

 private:
  TargetSpec spec_;
  Form form_;
  int chunk_;
  Mutant mutant_;
};

}  // namespace

std::unique_ptr<Target> make_target(const TargetSpec& spec, const LayerEntry& layer, Form form, int chunk,
                                    Mutant mutant) {
  if (!layer.has_form(form))
    throw InputError(fmt::format("--form: layer '{}' has no {} form", layer.spec.name, form_name(form)));
  if (spec.backend == Backend::cuda)
    // The CUDA backend lives in cuda_gate/ (cuda::make_fuzz_target), which links
    // this library: callers that want it ask it directly (cli/cmd_fuzz.cpp).
    throw InputError(fmt::format("--target {}: this caller has no CUDA backend", spec.text()));
  if (mutant != Mutant::none) {
    if (form == Form::sequential)
      throw InputError(fmt::format("--mutant {}: the sequential form is never mutated (use --form chunk|scan)",
                                   mutant_name(mutant)));
    if (!mutant_info(mutant).affects(layer.spec.name, form))
      throw InputError(fmt::format("--mutant {} does not affect {} --form {} (`ttrcheck mutants` lists its targets)",
                                   mutant_name(mutant), layer.spec.name, form_name(form)));
  }
  return std::make_unique<CpuTarget>(spec, form, chunk, mutant);
}

}  // namespace ttr::fuzz
