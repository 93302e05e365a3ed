// Strict validation of a layer's input file against its spec: every required
// tensor present and no other, floating dtype, shapes consistent with the
// symbolic dims, every value finite and inside its range. Errors name the file,
// the tensor and, for values, the first offending element.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "oracles/spec.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

using Dims = std::map<std::string, std::int64_t>;

struct LayerInputs {
  TensorMap<double> tensors;
  Dims dims;  // B, T, H, K, V, ... bound from the tensors
};

LayerInputs validate_inputs(const LayerSpec& spec, const io::TensorFile& file, const std::string& source);

// io::to_f64 on slice_threads() threads (oracles/threads.hpp): the same values, the
// same error for the same element.
std::vector<double> widen(const io::RawTensor& t, const std::string& what);

// The shape of an output or input tensor for bound dims.
Shape shape_of(const TensorSpec& t, const Dims& dims);

// "[2,16,4,64]"
std::string shape_str(const Shape& s);

}  // namespace ttr
