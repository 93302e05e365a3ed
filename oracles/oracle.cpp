#include "oracles/oracle.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <future>
#include <stdexcept>

#include "oracles/error.hpp"
#include "oracles/slices.hpp"
#include "oracles/threads.hpp"
#include "oracles/varlen.hpp"

namespace ttr {

std::map<std::string, std::string> base_metadata(const std::string& kind, const LayerSpec& spec,
                                                 const Config& cfg) {
  return {{"kind", kind}, {"layer", spec.name}, {"config", cfg.json()}, {"tool_version", kToolVersion},
          {"tool", "ttrcheck"}};
}

io::TensorFile to_file(const TensorMap<double>& tensors, io::DType dtype, std::map<std::string, std::string> metadata) {
  io::TensorFile f;
  f.metadata = std::move(metadata);
  // cu_seqlens is always I64 (FLA's offsets), whatever the floating dtype of the rest.
  // The outputs are narrowed on every core (from_f64 element for element; an I64
  // value that does not fit fails at its lowest element, as from_f64 would).
  for (const auto& [name, t] : tensors) {
    const io::DType d = name == kCuSeqlens ? io::DType::I64 : dtype;
    if (numel(t.shape) < 0 || static_cast<std::size_t>(numel(t.shape)) != t.data.size())  // from_f64's contract
      throw std::invalid_argument(fmt::format("to_file: tensor '{}' holds {} values for {} elements", name,
                                              t.data.size(), numel(t.shape)));
    io::RawTensor raw{d, t.shape, std::vector<std::uint8_t>(t.data.size() * io::dtype_size(d))};
    parallel_blocks(t.data.size(), kTensorPassGrain,
                    [&](std::size_t b, std::size_t e) { io::from_f64_range(t.data, raw, b, e); });
    f.tensors.emplace(name, std::move(raw));
  }
  return f;
}

std::string inputs_digest(const TensorMap<double>& inputs) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  const auto bytes = [&h](std::uint64_t x, int n) {
    for (int i = 0; i < n; ++i, x >>= 8) h = (h ^ (x & 0xFFu)) * 1099511628211ull;
  };
  for (const auto& [name, t] : inputs) {  // std::map: name order
    for (unsigned char c : name) bytes(c, 1);
    bytes(0, 1);
    bytes(t.shape.size(), 8);
    for (auto d : t.shape) bytes(static_cast<std::uint64_t>(d), 8);
    for (double x : t.data) bytes(std::bit_cast<std::uint64_t>(x), 8);
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

io::TensorFile compute_oracle(const LayerEntry& layer, const LayerInputs& in, const Config& cfg,
                              const OracleOptions& opt, const std::map<std::string, std::string>& input_metadata) {
  // Every (sequence, head) its own run, on all cores, in the tier the request
  // asks for (oracles/oracle_tier.hpp, oracles/slices.hpp): bit-identical to one
  // run over the batch, whatever the thread count.
  if (opt.certified && opt.form != Form::sequential)
    throw InputError(fmt::format("--certified encloses the sequential form (the oracle) only, not the {} form",
                                 form_name(opt.form)));
  OracleRequest req;
  req.mode = opt.mode;
  req.bits = opt.bits;
  req.own_error = opt.certified;  // the enclosure's slack; the file carries values only
  // The digest is one serial pass over every input byte (0.5 s for the production
  // case's 400 MB): taken on a thread of its own beside the slices' runs (one more
  // than TTR_THREADS for that long) rather than after them.
  std::future<std::string> digest =
      std::async(std::launch::async, [&in] { return inputs_digest(in.tensors); });
  OracleResult point = compute_oracle_values(layer, opt.form, in.tensors, cfg, opt.direction, req, opt.chunk_size);
  const LayerSpec spec = direction_spec(layer.spec, opt.direction);
  auto meta = base_metadata("oracle", layer.spec, cfg);
  meta["form"] = form_name(opt.form);
  if (opt.direction != Direction::forward) meta["direction"] = direction_name(opt.direction);
  if (!one_token_at_a_time(opt.form)) meta["chunk_size"] = std::to_string(opt.chunk_size);
  meta["precision"] = fmt::format("mpfr:{}", opt.bits);
  meta["working_bits"] = std::to_string(point.working_bits);
  // Which tier produced it (docs/oracle-tiers.md): "mpfr:N", "dd"
  // or "dd+mpfr:N"; the escalated slices as "b:h" ("*:h" for every batch row).
  const OracleProvenance& pv = point.provenance;
  meta["oracle_tier"] = pv.tier;
  meta["oracle_unit"] = pv.unit;
  meta["oracle_slices"] = std::to_string(pv.slices);
  std::string escalated;
  for (const OracleSlice& sl : pv.escalated)
    escalated += fmt::format("{}{}:{}", escalated.empty() ? "" : ",", sl.b < 0 ? std::string("*") : std::to_string(sl.b),
                             sl.h < 0 ? std::string("*") : std::to_string(sl.h));
  meta["oracle_escalated"] = escalated;
  if (opt.mode == OracleMode::fast)
    meta["oracle_estimated_relative_error"] = fmt::format("{:.3g}", pv.max_error_over_target * 0x1p-53);
  meta["certified"] = opt.certified ? "true" : "false";
  if (const auto s = input_metadata.find("seed"); s != input_metadata.end()) meta["seed"] = s->second;
  meta["inputs_digest"] = digest.get();
  // Values beyond float64's range (KLA-K's precision with p̄ = 0 grows like ā^{-2t})
  // are written as ±inf; say so in the metadata rather than let it pass unnoticed.
  std::string nonfinite;
  for (const auto& [name, t] : point.values) {
    std::atomic<std::size_t> n{0};
    parallel_blocks(t.data.size(), kTensorPassGrain, [&](std::size_t b, std::size_t e) {
      std::size_t here = 0;
      for (std::size_t i = b; i < e; ++i) here += std::isfinite(t.data[i]) ? 0 : 1;
      n += here;
    });
    if (n) nonfinite += fmt::format("{}{}:{}", nonfinite.empty() ? "" : ",", name, n.load());
  }
  if (!nonfinite.empty()) meta["nonfinite_outputs"] = nonfinite;
  TensorMap<double> bounds;  // "<name>.lower", "<name>.upper" of a certified run
  if (opt.certified) {
    SliceOptions split;
    split.split = true;
    const LayerResult box = run_layer_sliced(layer, opt.form, {Tier::mpfi, opt.bits}, in.tensors, cfg, opt.chunk_size,
                                             opt.direction, split);
    for (const auto& [name, t] : point.values) {
      if (const TensorSpec* ts = spec.output(name); ts && !ts->certifiable) continue;
      const auto& lo = box.lower.at(name);
      const auto& hi = box.upper.at(name);
      const auto own = point.own_error.find(name);
      // The MPFR value is computed at the same precision as the enclosure; a point
      // outside it means one of the two tiers is wrong, never the user's input. A
      // double-double value (--oracle-tier auto) may lie off the enclosure by its
      // estimated own error, no more.
      for (std::size_t i = 0; i < t.data.size(); ++i)
        if (const double slack = own == point.own_error.end() ? 0.0 : own->second.data[i];
            !(lo.data[i] - slack <= t.data[i] && t.data[i] <= hi.data[i] + slack))
          throw std::logic_error(fmt::format("internal: {} output '{}' element {} = {} outside its enclosure [{}, {}]",
                                             layer.spec.name, name, i, t.data[i], lo.data[i], hi.data[i]));
      bounds[name + ".lower"] = lo;
      bounds[name + ".upper"] = hi;
    }
  }
  TensorMap<double> out = std::move(point.values);
  out.merge(bounds);
  return to_file(out, io::DType::F64, std::move(meta));
}

}  // namespace ttr
