#include "oracles/vector_files.hpp"

#include <fmt/format.h>
#include <utility>

#include "oracles/oracle.hpp"

namespace ttr {

CaseFiles case_files(const LayerEntry& l, const VectorCase& c, const VectorFileOptions& opt) {
  CaseFiles out;
  const Config cfg = Config::make(l.spec, c.config);
  out.stem = fmt::format("{}.{}.{}", l.spec.name, opt.suite, c.name);
  out.entry = {{"layer", l.spec.name}, {"case", c.name}, {"doc", c.doc}, {"dims", c.dims}, {"config", cfg.values()}};
  auto metadata = [&](bool backward) {
    auto meta = base_metadata("inputs", l.spec, cfg);
    meta["seed"] = std::to_string(opt.seed);
    meta["suite"] = opt.suite;
    meta["case"] = c.name;
    if (backward) meta["direction"] = "backward";
    return meta;
  };
  const auto meta = metadata(false);
  TensorMap<double> inputs = generate_inputs(l.spec, c, opt.seed);
  out.inputs = to_file(inputs, io::DType::F32, meta);
  if (opt.oracle) {
    OracleOptions o;
    o.bits = opt.bits;
    out.oracle = compute_oracle(l, LayerInputs{std::move(inputs), c.dims}, cfg, o, meta);
  }
  if (opt.backward) {
    const auto bmeta = metadata(true);
    TensorMap<double> binputs = generate_backward_inputs(l.spec, c, opt.seed);
    out.backward_inputs = to_file(binputs, io::DType::F32, bmeta);
    if (opt.oracle) {
      OracleOptions o;
      o.bits = opt.bits;
      o.direction = Direction::backward;
      out.backward_oracle = compute_oracle(l, LayerInputs{std::move(binputs), c.dims}, cfg, o, bmeta);
    }
  }
  return out;
}

}  // namespace ttr
