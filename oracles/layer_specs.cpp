#include "oracles/layer_specs.hpp"

namespace ttr {

namespace layers {
#define TTR_LAYER(layer) LayerSpec spec_##layer();
#define TTR_LAYER_FORM(layer, form)
#include "oracles/layers/layers.def"
#undef TTR_LAYER
#undef TTR_LAYER_FORM
}  // namespace layers

std::vector<LayerSpec> layer_specs() {
  std::vector<LayerSpec> out;
#define TTR_LAYER(layer) out.push_back(layers::spec_##layer());
#define TTR_LAYER_FORM(layer, form)
#include "oracles/layers/layers.def"
#undef TTR_LAYER
#undef TTR_LAYER_FORM
  return out;
}

}  // namespace ttr
