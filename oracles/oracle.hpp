// Computing oracle outputs and writing them as files: the high-precision
// sequential (or chunk/scan) run, its metadata, and the certified enclosure.
#pragma once

#include <map>
#include <string>

#include "oracles/config.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/oracle_tier.hpp"
#include "oracles/registry.hpp"
#include "oracles/validate.hpp"

namespace ttr {

inline constexpr const char* kToolVersion = TTR_VERSION;

struct OracleOptions {
  Form form = Form::sequential;
  Direction direction = Direction::forward;  // backward: gradients from inputs and cotangents
  unsigned bits = 256;
  bool certified = false;  // also an MPFI enclosure: tensors "<name>.lower", "<name>.upper"
  int chunk_size = 64;
  // mpfr (the default of `ttrcheck oracle` and `vectors`: MPFR throughout), or
  // fast: double-double where its estimated own error is negligible against
  // float64's bound, MPFR slices elsewhere (oracles/oracle_tier.hpp). Recorded in
  // the metadata (`oracle_tier`, `oracle_escalated`, ...) either way.
  OracleMode mode = OracleMode::mpfr;
};

// The metadata every file we write carries (docs/design.md: layer, config, seed,
// precision, tool version), plus `kind` ("inputs", "oracle", "run").
std::map<std::string, std::string> base_metadata(const std::string& kind, const LayerSpec& spec,
                                                 const Config& cfg);

// Tensors as a file in one dtype.
io::TensorFile to_file(const TensorMap<double>& tensors, io::DType dtype,
                       std::map<std::string, std::string> metadata);

// A digest of input values (names, shapes and every value's float64 bits, in
// name order): "fnv1a64:<16 hex digits>". Recorded in an oracle's metadata as
// `inputs_digest` so that `check --oracle` refuses an oracle computed from other
// inputs. It guards against mix-ups, not against forgery (not cryptographic).
std::string inputs_digest(const TensorMap<double>& inputs);

// Runs the oracle and returns the output file (F64). `seed` is copied from the
// inputs' metadata when present; `inputs_digest` identifies the inputs.
io::TensorFile compute_oracle(const LayerEntry& layer, const LayerInputs& in, const Config& cfg,
                              const OracleOptions& opt, const std::map<std::string, std::string>& input_metadata);

}  // namespace ttr
