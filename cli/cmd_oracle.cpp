// `ttrcheck oracle`: the high-precision outputs of a layer on an input file.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/oracle.hpp"

namespace ttr::cli {

Command add_oracle(CLI::App& app) {
  struct Opts {
    std::string layer, in, out, form = "sequential";
    unsigned bits = 256;
    bool certified = false, backward = false;
    int chunk_size = 64;
    std::string oracle_tier = "mpfr";
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("oracle", "compute a layer's outputs in MPFR (float64 tensors rounded to nearest)");
  cmd->add_option("--layer", o->layer, "layer name (see `ttrcheck layers`)")->required();
  cmd->add_option("--in", o->in, "inputs (safetensors)")->required();
  cmd->add_option("--out", o->out, "outputs (safetensors, F64)")->required();
  cmd->add_option("--bits", o->bits, "MPFR precision in bits (at least this many are used)")
      ->check(CLI::Range(24u, 100000u));
  cmd->add_flag("--certified", o->certified, "also write an MPFI enclosure '<name>.lower'/'<name>.upper' per output (sequential form only)");
  cmd->add_option("--form", o->form, "sequential|chunk|scan");
  cmd->add_option("--chunk-size", o->chunk_size, "chunk size C for --form chunk")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--oracle-tier", o->oracle_tier,
                  "mpfr (default: MPFR throughout) | auto (double-double where its estimated own error is negligible "
                  "against float64's bound, MPFR slices elsewhere); recorded as metadata 'oracle_tier'");
  add_backward_flag(*cmd, o->backward);
  add_set_option(*cmd, o->sets);
  return [o]() {
    check_outputs({{"--in", o->in}}, {{"--out", o->out}});
    const Direction dir = o->backward ? Direction::backward : Direction::forward;
    const LoadedInputs in = load_inputs(o->layer, o->in, o->sets, dir);
    OracleOptions opt;
    opt.direction = dir;
    opt.form = parse_form(o->form);
    opt.bits = o->bits;
    opt.certified = o->certified;
    opt.chunk_size = o->chunk_size;
    opt.mode = parse_oracle_mode(o->oracle_tier);
    const io::TensorFile out = compute_oracle(*in.layer, in.inputs, in.config, opt, in.file.metadata);
    io::write_safetensors_atomic(o->out, out);
    return 0;
  };
}

}  // namespace ttr::cli
