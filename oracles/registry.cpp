#include "oracles/registry.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {

// The runners, one per (layer, form) x tier of tiers.def, defined in the
// generated TUs (oracles/CMakeLists.txt); the static_assert below keeps the
// hand-written tier list in step with tiers.def.
namespace runners {
#define TTR_LAYER(layer)
#define TTR_LAYER_FORM(layer, form)                                                                  \
  LayerResult layer##__##form##__fp32(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__fp64(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__bf16(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__fp16(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__mpfr(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__mpfi(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__mca(const TensorMap<double>&, const Config&, const RunOptions&);
#include "oracles/layers/layers.def"
#undef TTR_LAYER_FORM
#undef TTR_LAYER
}  // namespace runners

namespace layers {
#define TTR_LAYER(layer) LayerSpec spec_##layer();
#define TTR_LAYER_FORM(layer, form)
#include "oracles/layers/layers.def"
#undef TTR_LAYER
#undef TTR_LAYER_FORM
}  // namespace layers

namespace {

constexpr std::size_t tier_count() {
  std::size_t n = 0;
#define TTR_TIER(t) ++n;
#include "oracles/tiers.def"
#undef TTR_TIER
  return n;
}
static_assert(tier_count() == kTierCount, "runner.hpp declares one runner per tier of tiers.def");

std::vector<LayerEntry> build() {
  std::vector<LayerEntry> out;
  std::map<std::string, std::size_t> index;
#define TTR_LAYER(layer)            \
  index[#layer] = out.size();       \
  out.push_back({layers::spec_##layer(), {}});
#define TTR_LAYER_FORM(layer, form)                                                                         \
  out[index.at(#layer)].forms[Form::form] = {&runners::layer##__##form##__fp32,                             \
                                             &runners::layer##__##form##__fp64,                             \
                                             &runners::layer##__##form##__bf16,                             \
                                             &runners::layer##__##form##__fp16,                             \
                                             &runners::layer##__##form##__mpfr,                             \
                                             &runners::layer##__##form##__mpfi,                             \
                                             &runners::layer##__##form##__mca};
#include "oracles/layers/layers.def"
#undef TTR_LAYER
#undef TTR_LAYER_FORM
  return out;
}

}  // namespace

const std::vector<LayerEntry>& registry() {
  static const std::vector<LayerEntry> r = build();
  return r;
}

const LayerEntry& find_layer(const std::string& name) {
  std::string known;
  for (const auto& e : registry()) {
    if (e.spec.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.spec.name;
  }
  throw InputError(fmt::format("unknown layer '{}' (known: {})", name, known));
}

Form parse_form(const std::string& s) {
  for (Form f : {Form::sequential, Form::chunk, Form::scan})
    if (s == form_name(f)) return f;
  throw InputError(fmt::format("unknown form '{}' (sequential|chunk|scan)", s));
}

// LayerEntry::runner and run_layer: oracles/layer_entry.cpp (no reference to the
// runner table, so a program may build its own LayerEntry from a few runners).

}  // namespace ttr
