// Strict reader and writer for safetensors files, the test-vector format (docs/design.md,
// "Interfaces"): an 8-byte little-endian header length N, N bytes of a UTF-8 JSON
// object describing each tensor (dtype, shape, data_offsets relative to the end of
// the header) plus an optional "__metadata__" string map, then the raw little-endian
// data buffer.
//
// The reader accepts exactly what the `safetensors` Python package accepts, and is
// stricter where the package is lax (duplicate keys, extra fields in a tensor entry,
// a non-object "__metadata__"): a vector file that a user hands us must mean one
// thing only. Every defect is reported as a ttr::InputError whose single-line message
// names the file and the culprit tensor or field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ttr::io {

enum class DType { F64, F32, BF16, F16, I64 };

// The safetensors spelling: "F64", "F32", "BF16", "F16", "I64".
std::string_view dtype_name(DType);
// Exact, case-sensitive inverse of dtype_name; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view);
// Bytes per element.
std::size_t dtype_size(DType);
bool is_floating(DType);

struct RawTensor {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;  // empty shape = scalar (1 element)
  std::vector<std::uint8_t> data;   // little-endian bytes, size == numel * dtype_size
  // Product of the dimensions (1 for a scalar). Assumes a shape that was validated
  // (by the reader or from_f64): no negative dimension, no overflow.
  std::int64_t numel() const;
};

struct TensorFile {
  std::map<std::string, RawTensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" (string -> string only)
};

// Parses a whole file held in memory. `source_name` prefixes every error message.
TensorFile parse_safetensors(std::span<const std::uint8_t> bytes, const std::string& source_name);
// Reads and parses a file; errors name the path.
TensorFile read_safetensors(const std::filesystem::path& path);

// Serializes like the Python package: compact header JSON (entry fields in the order
// dtype, shape, data_offsets; "__metadata__" first and only when non-empty), padded
// with spaces to a multiple of 8 bytes; data packed contiguously in tensor-name order.
// Throws InputError for a tensor that cannot be written (empty or reserved name,
// negative dimension, data size not matching dtype and shape, invalid UTF-8).
std::vector<std::uint8_t> serialize_safetensors(const TensorFile&);

// Writes to a temporary file in the same directory, fsyncs, renames over `path`; on
// any failure removes the temporary and throws InputError("<path>: cannot write:
// <reason>"). Never leaves a partial file.
void write_safetensors_atomic(const std::filesystem::path& path, const TensorFile&);

// Value conversion. Exact for F64/F32/BF16/F16; an I64 value beyond 2^53 in magnitude
// (not always representable as a double) is an InputError naming `what` and the
// element, e.g. what = "in.safetensors: tensor 'q'".
std::vector<double> to_f64(const RawTensor&, const std::string& what);

// Rounds to nearest, ties to even, into F32/BF16/F16 (overflow -> inf, NaN stays NaN);
// F64 is exact; I64 requires integral values within the int64 range (else InputError).
// values.size() must equal the shape's element count and dimensions must be
// non-negative (else std::invalid_argument: that is a programming error, not input).
RawTensor from_f64(std::span<const double> values, std::vector<std::int64_t> shape, DType dtype);

// Elements [begin, end) of the two conversions above, for callers that cut a large
// tensor into blocks on several threads (oracles/threads.hpp). to_f64_range writes
// out[begin, end) and assumes t's size was checked (to_f64's message); from_f64_range
// writes t's bytes of those elements, t already shaped and sized for `values`.
void to_f64_range(const RawTensor& t, std::size_t begin, std::size_t end, double* out, const std::string& what);
void from_f64_range(std::span<const double> values, RawTensor& t, std::size_t begin, std::size_t end);
// to_f64's check that t's bytes fit its dtype and shape (std::invalid_argument).
void check_f64_convertible(const RawTensor& t, const std::string& what);

}  // namespace ttr::io
