#include "cuda_gate/fuzz_target.hpp"

#include <fmt/format.h>

#include "cuda_gate/runner.hpp"
#include "oracles/error.hpp"

namespace ttr::cuda {
namespace {

// The chunk kernel (chunk 64) on device 0. The error model is the CPU chunk
// form's at C = 64, the same the gate uses for this kernel (docs/gpu.md). The
// fused-recurrent kernel is not offered: its fp32 model combines two forms
// (docs/gpu.md) and the campaign models one.
class CudaChunkTarget final : public fuzz::Target {
 public:
  explicit CudaChunkTarget(fuzz::TargetSpec spec) : spec_(spec) {}
  fuzz::TargetSpec spec() const override { return spec_; }
  Form form() const override { return Form::chunk; }
  int chunk_size() const override { return 64; }
  TensorMap<double> run(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg) const override {
    return cuda::run(layer.spec.name, Kernel::chunk, spec_.dtype, inputs, cfg);
  }
  std::string replay_command(const std::string& layer, const std::string& inputs_file,
                             const std::string& outputs_file) const override {
    return fmt::format("ttrcheck run --device cuda --layer {} --in {} --out {} --arith {} --form chunk --chunk-size 64",
                       layer, inputs_file, outputs_file, tier_name(spec_.dtype));
  }

 private:
  fuzz::TargetSpec spec_;
};

}  // namespace

std::unique_ptr<fuzz::Target> make_fuzz_target(const fuzz::TargetSpec& spec, const LayerEntry& layer, Form form,
                                                int chunk, Mutant mutant) {
  const std::string t = spec.text();
  if (const Status s = status(); !s.usable()) throw InputError(fmt::format("--target {}: {}", t, s.reason()));
  if (!has_layer(layer.spec.name))
    throw InputError(fmt::format("--target {}: layer '{}' has no CUDA kernel", t, layer.spec.name));
  if (form != Form::chunk) throw InputError(fmt::format("--target {}: the CUDA targets run --form chunk", t));
  if (chunk != 64) throw InputError(fmt::format("--target {}: the CUDA chunk kernels use --chunk-size 64", t));
  if (mutant != Mutant::none)
    throw InputError(fmt::format("--target {}: mutants are planted in the CPU kernels, not on the GPU", t));
  return std::make_unique<CudaChunkTarget>(spec);
}

}  // namespace ttr::cuda
