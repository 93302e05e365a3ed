// Fuzz harness: the strict safetensors reader (oracles/io/safetensors.hpp) and
// what reads an inputs file after it: validation against every layer's spec and
// the config recorded in the metadata.
//
// Invariants of an accepted file: each tensor's data holds numel × dtype size
// bytes; the writer accepts it, and reading back what it wrote gives the same
// tensors and metadata (the reader and writer agree on the format); converting
// a tensor to doubles gives numel values or an InputError (I64 beyond 2^53).
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/harness/fuzz_support.hpp"
#include "oracles/config.hpp"
#include "oracles/config_pairs.hpp"
#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/layer_specs.hpp"
#include "oracles/validate.hpp"

namespace {

using namespace ttr;

bool same(const io::TensorFile& a, const io::TensorFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, t] : a.tensors) {
    const auto it = b.tensors.find(name);
    if (it == b.tensors.end()) return false;
    if (t.dtype != it->second.dtype || t.shape != it->second.shape || t.data != it->second.data) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<LayerSpec> specs = layer_specs();
  io::TensorFile file;
  try {
    file = io::parse_safetensors(std::span<const std::uint8_t>(data, size), "fuzz.safetensors");
  } catch (const InputError&) {
    return 0;
  }
  for (const auto& [name, t] : file.tensors) {
    TTR_FUZZ_REQUIRE(t.data.size() == static_cast<std::size_t>(t.numel()) * io::dtype_size(t.dtype),
                     "accepted tensor '" + name + "' whose data size does not match its dtype and shape");
    try {
      TTR_FUZZ_REQUIRE(io::to_f64(t, name).size() == static_cast<std::size_t>(t.numel()),
                       "to_f64 of '" + name + "' returned the wrong count");
    } catch (const InputError&) {
      TTR_FUZZ_REQUIRE(t.dtype == io::DType::I64, "to_f64 refused a floating tensor '" + name + "'");
    }
  }
  std::vector<std::uint8_t> bytes;
  try {
    bytes = io::serialize_safetensors(file);
  } catch (const InputError& e) {
    TTR_FUZZ_REQUIRE(false, std::string("the writer refuses a file the reader accepted: ") + e.what());
  }
  io::TensorFile again;
  try {
    again = io::parse_safetensors(bytes, "round-trip");
  } catch (const InputError& e) {
    TTR_FUZZ_REQUIRE(false, std::string("the reader refuses what the writer wrote: ") + e.what());
  }
  TTR_FUZZ_REQUIRE(same(file, again), "write then read changed the file");

  // What `ttrcheck check|oracle|run --layer L --in FILE` does next (cli/common.cpp).
  for (const LayerSpec& spec : specs) {
    try {
      // Accepted inputs are what the runners may assume: known tensors, finite
      // values inside each tensor's range.
      const LayerInputs in = validate_inputs(spec, file, "fuzz.safetensors");
      for (const auto& [name, t] : in.tensors) {
        const TensorSpec* ts = spec.input(name);
        TTR_FUZZ_REQUIRE(ts != nullptr, "validate_inputs passed an unknown tensor '" + name + "'");
        TTR_FUZZ_REQUIRE(t.numel() == static_cast<std::int64_t>(t.data.size()), "tensor '" + name + "' size");
        for (const double x : t.data)
          TTR_FUZZ_REQUIRE(std::isfinite(x) && ts->range.contains(x),
                           "validate_inputs passed a value outside the range of '" + name + "'");
      }
    } catch (const InputError&) {
    }
    try {
      Config::make(spec, config_pairs(file.metadata, spec.name, {}, "fuzz.safetensors"));
    } catch (const InputError&) {
    }
  }
  return 0;
}
