// Dispatch on a LayerEntry, apart from the registry's table of every runner
// (registry.cpp): the structured fuzz harness (fuzz/) builds entries holding only
// the runners it links.
#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/registry.hpp"

namespace ttr {

LayerRunner LayerEntry::runner(Form f, Tier t) const {
  const auto it = forms.find(f);
  if (it == forms.end()) {
    std::string have;
    for (const auto& [form, _] : forms) have += (have.empty() ? "" : ", ") + std::string(form_name(form));
    throw InputError(fmt::format("layer '{}' has no {} form (it has: {})", spec.name, form_name(f), have));
  }
  return it->second[static_cast<std::size_t>(t)];
}

LayerResult run_layer(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                      const Config& cfg, int chunk_size) {
  RunOptions opt;
  opt.bits = arith.bits;
  opt.chunk_size = chunk_size;
  return layer.runner(form, arith.tier)(inputs, cfg, opt);
}

}  // namespace ttr
