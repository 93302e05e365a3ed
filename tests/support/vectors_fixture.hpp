// Test helpers around the layer registry and the vector suites: valid input files
// for a layer (to be broken on purpose by CLI tests), and every layer's sequential
// form evaluated directly in MPFR (outputs kept as mpfr_real, not rounded to
// double), for precision tests that need more than the CLI's F64 files give.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/core/tensor.hpp"

namespace ttr::test {

// The case named `case_name` of `suite` for `layer` (fails the test via throw if absent).
VectorCase suite_case(const std::string& layer, const std::string& suite, const std::string& case_name);

// Inputs of a suite case and its config (defaults filled in).
struct CaseInputs {
  TensorMap<double> tensors;
  Config config;
};
CaseInputs case_inputs(const std::string& layer, const std::string& suite, const std::string& case_name,
                       std::uint64_t seed = 0);

// Tensors (and metadata) as a safetensors file in one dtype, written atomically.
void write_tensors(const std::filesystem::path& path, const TensorMap<double>& tensors,
                   io::DType dtype = io::DType::F32, std::map<std::string, std::string> metadata = {});

// Config from the "config" metadata JSON of a file we wrote (as `ttrcheck` records it).
Config config_from_metadata(const std::string& layer, const std::map<std::string, std::string>& metadata);

// The layers whose sequential form `mpfr_sequential` evaluates (sorted): every
// layer of layers.def.
const std::vector<std::string>& mpfr_layer_names();

// Runs `layer`'s sequential form with T = mpfr_real at `bits` (the inputs converted
// exactly); the outputs carry `bits` (or a little more) of precision. The thread's
// default MPFR precision is left as it was.
TensorMap<mpfr_real> mpfr_sequential(const std::string& layer, const TensorMap<double>& inputs, const Config& cfg,
                                     unsigned bits);

// The input regimes the chunk/scan equivalence proofs run on (forward and
// backward): random, near-duplicate keys, decay and β edges (g exactly 0 and
// log(1e-30); β exactly 0 and 1), initial states; for KLA-K also p̄ = 0 with
// ā = 0.5 (precision growing like 4^t).
struct NamedRegime {
  const char* name;
  Regime regime;
};
std::vector<NamedRegime> equivalence_regimes(const LayerSpec& spec);

// Every (layer, form) pair of layers.def in direction d other than the sequential
// forms: the chunk and scan forms whose equivalence with the definition (forward)
// or with the exact adjoint (backward) the tests prove.
const std::vector<std::pair<std::string, std::string>>& mpfr_parallel_forms(Direction d = Direction::forward);

// Runs any form of `layer` in MPFR at `bits` (chunk and scan forms under the exact
// MPFR policy, chunk size `chunk_size`); as mpfr_sequential otherwise. Backward:
// the inputs carry the cotangents, the outputs are the gradients.
TensorMap<mpfr_real> mpfr_form(const std::string& layer, const std::string& form, const TensorMap<double>& inputs,
                               const Config& cfg, unsigned bits, int chunk_size,
                               Direction d = Direction::forward);

}  // namespace ttr::test
