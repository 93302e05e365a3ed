// Every layer's spec in layers.def order, without the runners: for programs that
// parse and validate configs and inputs but run no layer (the parser fuzz harnesses).
#pragma once

#include <vector>

#include "oracles/spec.hpp"

namespace ttr {

std::vector<LayerSpec> layer_specs();

}  // namespace ttr
