// The byte count of a tensor within the reader's limit, and a shape as error lines
// print it: shared by the safetensors reader and writer (safetensors.cpp) and the
// value conversions (tensor_values.cpp). Internal to oracles/io.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "oracles/io/safetensors.hpp"

namespace ttr::io::detail {

// Any tensor larger than this is certainly a corrupt header; the limit also keeps
// every byte count and offset sum far from uint64/int64 overflow.
inline constexpr std::uint64_t kMaxTensorBytes = std::uint64_t{1} << 62;

// Bytes held by a tensor of this shape and dtype, or nullopt when a dimension is
// negative or the count exceeds kMaxTensorBytes.
std::optional<std::uint64_t> tensor_bytes(std::span<const std::int64_t> shape, DType dtype);

// "[2,3,4]"
std::string shape_str(std::span<const std::int64_t> shape);

}  // namespace ttr::io::detail
