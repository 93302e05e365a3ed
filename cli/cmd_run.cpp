// `ttrcheck run`: a reference form in a chosen arithmetic on the CPU, the way a
// kernel under test runs (bf16/fp16/fp32 outputs are stored in that dtype).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "gate/mutants.hpp"
#include "oracles/oracle.hpp"
#include "gpu/binding/device.hpp"

namespace ttr::cli {
namespace {

io::DType dtype_for(Tier t) {
  switch (t) {
    case Tier::bf16: return io::DType::BF16;
    case Tier::fp16: return io::DType::F16;
    case Tier::fp32:
    case Tier::tf32: return io::DType::F32;  // TF32 values, stored as the fp32 a kernel returns
    default: return io::DType::F64;
  }
}

}  // namespace

Command add_run(CLI::App& app) {
  struct Opts {
    std::string layer, in, out, arith = "fp32", form = "sequential", mutant = "none", device = "cpu";
    int chunk_size = 64;
    bool backward = false;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "run", "run a layer form in bf16|fp16|fp32|tf32|fp64|dd|mpfr:N|mpfi:N on the CPU (or a CUDA kernel: --device cuda)");
  cmd->add_option("--layer", o->layer, "layer name")->required();
  cmd->add_option("--in", o->in, "inputs (safetensors)")->required();
  cmd->add_option("--out", o->out, "outputs (safetensors, in the arithmetic's dtype)")->required();
  cmd->add_option("--arith", o->arith, "bf16|fp16|fp32|tf32 (chunk, scan)|fp64|dd (sequential)|mpfr:N|mpfi:N");
  cmd->add_option("--form", o->form, "sequential|chunk|scan (|sequential_dg_sum: gla, simple_gla backward; |chunk_tf32_intra: kda, precond_kda, gated_delta_rule, precond_gated_delta_rule backward)");
  cmd->add_option("--chunk-size", o->chunk_size, "chunk size C for --form chunk")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mutant", o->mutant, "inject a catalogued bug into the chunk/scan form (`ttrcheck mutants`)");
  cmd->add_option("--device", o->device,
                  "cpu | cuda: the CUDA kernels of gpu/ (--form chunk: the chunk kernel, chunk size 64; "
                  "--form sequential: the sequential (FLA: fused_recurrent) kernel, also --backward for the delta family; "
                  "--arith bf16|fp32)");
  add_backward_flag(*cmd, o->backward);
  add_set_option(*cmd, o->sets);
  return [o]() {
    if (o->device != "cpu" && o->device != "cuda")
      throw InputError(fmt::format("--device {}: expected cpu or cuda", o->device));
    const Arith arith = parse_arith(o->arith);
    const Form form = parse_form(o->form);
    // The sequential forms are the oracle's definitions: no mutant reaches them.
    const Mutant mutant = parse_mutant(o->mutant);
    if (mutant != Mutant::none && form == Form::sequential)
      throw InputError(fmt::format("--mutant {}: the sequential form is never mutated (use --form chunk|scan)", o->mutant));
    check_outputs({{"--in", o->in}}, {{"--out", o->out}});
    const Direction dir = o->backward ? Direction::backward : Direction::forward;
    const LoadedInputs in = load_inputs(o->layer, o->in, o->sets, dir);
    if (mutant != Mutant::none && !mutant_info(mutant).affects(in.layer->spec.name, form, dir))
      fmt::print(stderr, "ttrcheck: warning: mutant {} does not affect {} --form {} {}: the output is unmutated\n",
                 o->mutant, in.layer->spec.name, form_name(form), direction_name(dir));
    if (o->device == "cuda") {
      if (mutant != Mutant::none) parse_cuda_mutant(o->mutant);  // one with a CUDA counterpart
      if (form == Form::scan) throw InputError("--device cuda runs --form chunk or sequential");
      if (arith.tier != Tier::bf16 && arith.tier != Tier::fp32)
        throw InputError(fmt::format("--device cuda runs --arith bf16 or fp32, not {}", o->arith));
      const KernelImpl* kernel = in.layer->kernel(Backend::cuda, form, dir);
      if (!kernel) {
        std::vector<std::string> have;
        for (const LayerEntry& e : registry())
          if (e.kernel(Backend::cuda, form, dir)) have.push_back(e.spec.name);
        throw InputError(fmt::format("--layer {}: no CUDA {} kernel{} (these have one: {})", in.layer->spec.name,
                                     form_name(form), o->backward ? " for --backward" : "", fmt::join(have, ", ")));
      }
      if (o->chunk_size != 64) throw InputError("--device cuda: the CUDA chunk kernels use --chunk-size 64");
      const device::Status st = device::status();
      if (!st.usable()) throw InputError(fmt::format("--device cuda: {}", st.reason()));
      const TensorMap<double> values = [&] {
        const MutantScope scope(mutant);
        return kernel->run(in.inputs.tensors, in.config, arith.tier, {});
      }();
      auto meta = base_metadata("run", in.layer->spec, in.config);
      meta["form"] = form_name(form);
      meta["precision"] = arith_name(arith);
      meta["device"] = "cuda: " + st.device;
      meta["kernel"] = kernel->name();
      if (mutant != Mutant::none) meta["mutant"] = o->mutant;
      if (o->backward) meta["direction"] = direction_name(dir);
      if (form == Form::chunk || form == Form::chunk_unscaled) meta["chunk_size"] = "64";
      if (const auto s = in.file.metadata.find("seed"); s != in.file.metadata.end()) meta["seed"] = s->second;
      io::write_safetensors_atomic(o->out, to_file(values, dtype_for(arith.tier), std::move(meta)));
      return 0;
    }
    const LayerResult r = [&] {
      const MutantScope scope(mutant);
      return run_layer(*in.layer, form, arith, in.inputs.tensors, in.config, o->chunk_size, dir);
    }();
    auto meta = base_metadata("run", in.layer->spec, in.config);
    meta["form"] = form_name(form);
    meta["precision"] = arith_name(arith);
    meta["policy"] = policy_description(arith, !one_token_at_a_time(form));
    if (o->backward) meta["direction"] = direction_name(dir);
    if (!one_token_at_a_time(form)) meta["chunk_size"] = std::to_string(o->chunk_size);
    meta["working_bits"] = std::to_string(r.working_bits);
    if (mutant != Mutant::none) meta["mutant"] = o->mutant;
    if (const auto s = in.file.metadata.find("seed"); s != in.file.metadata.end()) meta["seed"] = s->second;
    io::write_safetensors_atomic(o->out, to_file(r.values, dtype_for(arith.tier), std::move(meta)));
    return 0;
  };
}

}  // namespace ttr::cli
