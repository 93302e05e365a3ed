// LayerEntry's lookups and run_layer, apart from the registry's table of every
// runner (registry.cpp): the structured fuzz harness (fuzz/) builds entries
// holding only the runners it links.
#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/tiers/dd_support.hpp"
#include "oracles/varlen.hpp"

namespace ttr {

std::string KernelImpl::name() const { return fmt::format("{}-{}", backend_name(backend), form_name(form)); }

const FormImpl* LayerEntry::form(Form f, Direction d) const {
  for (const FormImpl& x : forms)
    if (x.form == f && x.direction == d) return &x;
  return nullptr;
}

bool LayerEntry::has_form(Form f, Direction d) const { return form(f, d) != nullptr; }

std::vector<Form> LayerEntry::form_list(Direction d) const {
  std::vector<Form> out;
  for (Form f : kAllForms)
    if (has_form(f, d)) out.push_back(f);
  return out;
}

LayerRunner LayerEntry::runner(Form f, Tier t, Direction d) const {
  for (const FormImpl& x : forms)
    if (x.form == f && x.direction == d) {
      if (t == Tier::dd && !dd_tier_runs_here()) throw InputError(dd_tier_unavailable());
      if (const LayerRunner r = x.runners[static_cast<std::size_t>(t)]) return r;
      throw InputError(fmt::format("layer '{}' has no {} runner for its {} {} form", spec.name, tier_name(t),
                                   form_name(f), direction_name(d)));
    }
  std::string have;
  for (Form g : form_list(d)) have += (have.empty() ? "" : ", ") + std::string(form_name(g));
  if (d == Direction::forward)
    throw InputError(fmt::format("layer '{}' has no {} form (it has: {})", spec.name, form_name(f), have));
  throw InputError(fmt::format("layer '{}' has no {} {} form (it has: {})", spec.name, form_name(f),
                               direction_name(d), have.empty() ? "none yet" : have));
}

const KernelImpl* LayerEntry::kernel(Backend b, Form f, Direction d) const {
  for (const KernelImpl& k : kernels)
    if (k.backend == b && k.form == f && k.direction == d) return &k;
  return nullptr;
}

std::vector<const KernelImpl*> LayerEntry::kernel_list(Backend b, Direction d) const {
  std::vector<const KernelImpl*> out;
  for (Form f : {Form::chunk, Form::scan, Form::sequential, Form::chunk_unscaled, Form::scan_unscaled})  // the production algorithm first
    if (const KernelImpl* k = kernel(b, f, d)) out.push_back(k);
  return out;
}

Form parse_form(const std::string& s) {
  for (Form f : kAllForms)
    if (s == form_name(f)) return f;
  // FLA's and the papers' names of the one-token-at-a-time form (docs/architecture.md, "Names").
  if (s == "fused_recurrent" || s == "recurrent") return Form::sequential;
  throw InputError(fmt::format("unknown form '{}' (sequential|chunk|scan|chunk_unscaled|scan_unscaled|sequential_dg_sum|chunk_tf32_intra)", s));
}

Direction parse_direction(const std::string& s) {
  for (Direction d : {Direction::forward, Direction::backward})
    if (s == direction_name(d)) return d;
  throw InputError(fmt::format("unknown direction '{}' (forward|backward)", s));
}

// Declared in oracles/slices.hpp; here, beside run_layer, so that the slicer's
// library needs nothing of the registry.
LayerResult run_layer_sliced(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                             const Config& cfg, int chunk_size, Direction direction, SliceOptions so) {
  FormOptions opt;
  opt.bits = arith.bits;
  opt.chunk_size = chunk_size;
  so.kernel_form = !one_token_at_a_time(form);
  return run_sliced(direction_spec(layer.spec, direction), layer.runner(form, arith.tier, direction), inputs, cfg, opt,
                    so);
}

LayerResult run_layer(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                      const Config& cfg, int chunk_size, Direction direction) {
  // A varlen batch runs sequence by sequence (oracles/slices.hpp), as a kernel
  // form restarts its chunks at each sequence start; anything else as it is.
  if (inputs.count(kCuSeqlens)) return run_layer_sliced(layer, form, arith, inputs, cfg, chunk_size, direction, {});
  FormOptions opt;
  opt.bits = arith.bits;
  opt.chunk_size = chunk_size;
  return layer.runner(form, arith.tier, direction)(inputs, cfg, opt);
}

}  // namespace ttr
