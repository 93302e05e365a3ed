// The files of one test-vector case, as `ttrcheck vectors` writes them and the
// Python API's `ttrcheck.vectors()` returns them: the inputs (F32, every value on
// the bf16 grid) with their metadata, the oracle outputs, and with `backward` the
// inputs plus cotangents and the gradients' oracle. One function for both, so
// the arrays a Python test draws are the CLI's files, value for value.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr {

struct VectorFileOptions {
  std::string suite;
  std::uint64_t seed = 0;
  unsigned bits = 256;       // oracle MPFR precision
  bool oracle = true;        // false: inputs only (--no-oracle)
  bool backward = false;     // also the backward inputs (and their oracle)
};

struct CaseFiles {
  std::string stem;  // "<layer>.<suite>.<case>": files are <stem>.inputs.safetensors, ...
  io::TensorFile inputs;
  std::optional<io::TensorFile> oracle, backward_inputs, backward_oracle;
  // The case's manifest entry without file names: layer, case, doc, dims, config.
  nlohmann::json entry;
};

CaseFiles case_files(const LayerEntry& layer, const VectorCase& c, const VectorFileOptions& opt);

}  // namespace ttr
