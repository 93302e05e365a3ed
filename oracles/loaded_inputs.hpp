// A layer's inputs as a command reads them: the tensors validated against the
// direction's spec, the config from the file's metadata overridden by --set
// pairs. Shared by the CLI (a file on disk) and the Python API (a TensorFile
// built from arrays), so both refuse bad input with the same one-line message.
#pragma once

#include <string>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "oracles/validate.hpp"

namespace ttr {

struct LoadedInputs {
  const LayerEntry* layer;
  io::TensorFile file;
  LayerInputs inputs;
  Config config;
};

// Validates `file` (named `source` in errors: a path, or "inputs" from Python)
// for `layer_name` in `direction` (backward: the forward inputs plus the output
// cotangents, `do` required). The config is the one recorded in the file's
// metadata when the file was made for the same layer (ttrcheck vectors records
// it), overridden key by key by `sets` ("key=value").
LoadedInputs load_inputs(const std::string& layer_name, io::TensorFile file, const std::string& source,
                         const std::vector<std::string>& sets, Direction direction = Direction::forward);

}  // namespace ttr
