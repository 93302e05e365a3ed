#include "oracles/layer_specs.hpp"

#include "oracles/varlen.hpp"

namespace ttr {

namespace layers {
#define TTR_LAYER(layer, family) LayerSpec spec_##layer();
#include "oracles/layers/layers.def"
}  // namespace layers

std::vector<LayerSpec> layer_specs() {
  std::vector<LayerSpec> out;
#define TTR_LAYER(layer, fam)                 \
  out.push_back(layers::spec_##layer()); \
  out.back().family = #fam;                   \
  add_varlen_input(out.back());
#include "oracles/layers/layers.def"
  return out;
}

}  // namespace ttr
