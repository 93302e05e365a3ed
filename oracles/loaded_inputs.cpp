#include "oracles/loaded_inputs.hpp"

#include <utility>

#include "oracles/config_pairs.hpp"

namespace ttr {

LoadedInputs load_inputs(const std::string& layer_name, io::TensorFile file, const std::string& source,
                         const std::vector<std::string>& sets, Direction direction) {
  const LayerEntry& layer = find_layer(layer_name);
  const auto pairs = config_pairs(file.metadata, layer_name, sets, source);
  Config config = Config::make(layer.spec, pairs);
  LayerInputs inputs = validate_inputs(direction_spec(layer.spec, direction), file, source);
  return {&layer, std::move(file), std::move(inputs), std::move(config)};
}

}  // namespace ttr
