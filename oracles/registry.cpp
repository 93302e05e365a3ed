#include "oracles/registry.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/tier_list.hpp"
#include "oracles/varlen.hpp"

namespace ttr {

// The declared implementations: CPU runners (one per (layer, form, direction)
// × tier of tiers.def serving the form, defined in the generated TUs,
// oracles/CMakeLists.txt; a tier restricted by TTR_TIER_FORMS is declared for
// every form but its address is taken only where it serves) and
// device kernels (defined in gpu/<layer>/binding.cpp).
namespace runners {
#define TTR_FORM(layer, form, direction) \
  namespace layer##__##form##__##direction { TTR_EACH_TIER_RUNNER }
#include "oracles/layers/layers.def"
}  // namespace runners

namespace kernels {
#define TTR_KERNEL(layer, backend, form, direction)                                                           \
  TensorMap<double> layer##__##backend##__##form##__##direction(const TensorMap<double>&, const Config&, Tier, \
                                                                 const KernelOptions&);
#include "oracles/layers/layers.def"
}  // namespace kernels

namespace layers {
#define TTR_LAYER(layer, family) LayerSpec spec_##layer();
#include "oracles/layers/layers.def"
}  // namespace layers

namespace {

void own_algorithm(LayerEntry& e, Form f, Direction d) {
  for (FormImpl& x : e.forms)
    if (x.form == f && x.direction == d) {
      x.own_algorithm = true;
      return;
    }
  throw std::logic_error(fmt::format("layers.def: TTR_OWN_ALGORITHM({}, {}, {}) before its TTR_FORM line", e.spec.name,
                                     form_name(f), direction_name(d)));
}

std::deque<LayerEntry>& table() {
  static std::deque<LayerEntry> entries = [] {
    std::deque<LayerEntry> out;
    auto entry = [&](const char* name) -> LayerEntry& {
      for (LayerEntry& e : out)
        if (e.spec.name == name) return e;
      throw std::logic_error(fmt::format("layers.def: '{}' used before its TTR_LAYER line", name));
    };
// Every layer takes varlen batches (cu_seqlens, oracles/varlen.hpp) through the
// one generic slicer (oracles/slices.hpp), so the input is added here, once,
// rather than in each spec.
#define TTR_LAYER(layer, fam)            \
  out.push_back({layers::spec_##layer(), {}, {}}); \
  out.back().spec.family = #fam;         \
  add_varlen_input(out.back().spec);
#define TTR_FORM(layer, form, direction)                                                                     \
  entry(#layer).forms.push_back(                                                                             \
      {Form::form, Direction::direction, TTR_TIER_RUNNERS(runners::layer##__##form##__##direction, form)});
#define TTR_KERNEL(layer, backend, form, direction)                                                          \
  entry(#layer).kernels.push_back(                                                                           \
      {Backend::backend, Form::form, Direction::direction, &kernels::layer##__##backend##__##form##__##direction});
#define TTR_OWN_ALGORITHM(layer, form, direction) own_algorithm(entry(#layer), Form::form, Direction::direction);
#include "oracles/layers/layers.def"
    return out;
  }();
  return entries;
}

}  // namespace

const std::deque<LayerEntry>& registry() { return table(); }

const LayerEntry& register_layer(LayerEntry entry) {
  for (const LayerEntry& e : table())
    if (e.spec.name == entry.spec.name) throw InputError(fmt::format("layer '{}' is already registered", e.spec.name));
  add_varlen_input(entry.spec);  // as for the declared layers
  table().push_back(std::move(entry));
  return table().back();
}

void unregister_layer(const std::string& name) {
  std::deque<LayerEntry>& t = table();
  std::size_t declared = 0;
#define TTR_LAYER(layer, fam) ++declared;
#include "oracles/layers/layers.def"
  if (t.size() <= declared || t.back().spec.name != name)
    throw std::logic_error(fmt::format("unregister_layer('{}'): only the last layer added by register_layer can be removed", name));
  t.pop_back();
}

const LayerEntry& find_layer(std::string_view name) {
  std::string known;
  for (const auto& e : registry()) {
    if (e.spec.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.spec.name;
  }
  throw InputError(fmt::format("unknown layer '{}' (known: {})", name, known));
}

// LayerEntry's methods and run_layer: oracles/layer_entry.cpp (no reference to
// the runner table, so a program may build its own LayerEntry from a few runners).

}  // namespace ttr
