// The layer catalogue as data: one JSON object per layer (tensors, config keys,
// forms, implementations, backward cotangents and gradients), what `ttrcheck
// layers --json` prints and the Python API's `ttrcheck.layers()` returns.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "oracles/registry.hpp"

namespace ttr {

// "number", "integer", "boolean", "choice".
const char* key_type(KeyType t);
// What a layer is implemented by: forms per direction, kernels per backend
// (the declaration in oracles/layers/layers.def), e.g. "cpu chunk forward".
std::vector<std::string> implementations(const LayerEntry& e);
nlohmann::json layer_json(const LayerEntry& e);

}  // namespace ttr
