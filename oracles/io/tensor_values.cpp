// Tensor values: the bytes of a RawTensor as doubles and back (safetensors.hpp,
// "Value conversion"). Exact for F64/F32/BF16/F16 in; rounding to nearest, ties to
// even, out; I64 only where the value is an integer a double holds exactly.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/io/printable.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/io/tensor_bytes.hpp"
#include "reference/core/float16.hpp"

namespace ttr::io {

using detail::shape_str;
using detail::tensor_bytes;

namespace {

// binary32 as a BinaryFormat, used only to round doubles beyond FLT_MAX without UB.
using FP32Format = BinaryFormat<24, -126, 127>;

double load_element(const std::uint8_t* p, DType dtype, std::size_t index, const std::string& what) {
  switch (dtype) {
    case DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::BF16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_value(b);
    }
    case DType::F16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return fp16_value(b);
    }
    case DType::I64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      // Beyond 2^53 not every integer is a double; refuse rather than round silently.
      constexpr std::int64_t kExact = std::int64_t{1} << 53;
      if (v > kExact || v < -kExact)
        throw InputError(fmt::format("{}: element {} = {} exceeds 2^53 in magnitude and cannot be converted to a "
                                     "double exactly",
                                     printable(what, 4096), index, v));
      return static_cast<double>(v);
    }
  }
  throw std::logic_error("unknown DType");
}

float round_to_f32(double v) {
  // A double beyond the float range converts with undefined behaviour in C++, so round
  // those in double arithmetic (to +-FLT_MAX or +-inf) first; NaN passes through.
  if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) v = FP32Format::round(v);
  return static_cast<float>(v);  // RNE: the hardware's default rounding, never changed
}

std::int64_t to_i64(double v, std::size_t index) {
  if (!std::isfinite(v) || v != std::trunc(v))
    throw InputError(fmt::format("from_f64: value {} at index {} is not an integer, so it cannot be stored as I64", v,
                                 index));
  if (v < -0x1p63 || v >= 0x1p63)
    throw InputError(fmt::format("from_f64: value {} at index {} is outside the I64 range", v, index));
  return static_cast<std::int64_t>(v);
}

void store_element(std::uint8_t* p, double v, DType dtype, std::size_t index) {
  switch (dtype) {
    case DType::F64:
      std::memcpy(p, &v, 8);
      return;
    case DType::F32: {
      const float f = round_to_f32(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::BF16: {
      const std::uint16_t b = bf16_bits(BF16Format::round(v));
      std::memcpy(p, &b, 2);
      return;
    }
    case DType::F16: {
      const std::uint16_t b = fp16_bits(FP16Format::round(v));
      std::memcpy(p, &b, 2);
      return;
    }
    case DType::I64: {
      const std::int64_t i = to_i64(v, index);
      std::memcpy(p, &i, 8);
      return;
    }
  }
  throw std::logic_error("unknown DType");
}

}  // namespace

void check_f64_convertible(const RawTensor& t, const std::string& what) {
  const auto bytes = tensor_bytes(t.shape, t.dtype);
  if (!bytes || *bytes != t.data.size())
    throw std::invalid_argument(fmt::format("to_f64: {}: {} data bytes do not match dtype {} and shape {}",
                                            printable(what), t.data.size(), dtype_name(t.dtype), shape_str(t.shape)));
}

void to_f64_range(const RawTensor& t, std::size_t begin, std::size_t end, double* out, const std::string& what) {
  const std::size_t size = dtype_size(t.dtype);
  for (std::size_t i = begin; i < end; ++i) out[i] = load_element(t.data.data() + i * size, t.dtype, i, what);
}

std::vector<double> to_f64(const RawTensor& t, const std::string& what) {
  check_f64_convertible(t, what);
  std::vector<double> out(t.data.size() / dtype_size(t.dtype));
  to_f64_range(t, 0, out.size(), out.data(), what);
  return out;
}

RawTensor from_f64(std::span<const double> values, std::vector<std::int64_t> shape, DType dtype) {
  const auto bytes = tensor_bytes(shape, dtype);
  if (!bytes) throw std::invalid_argument("from_f64: invalid shape " + shape_str(shape));
  const std::size_t size = dtype_size(dtype);
  if (*bytes / size != values.size())
    throw std::invalid_argument(
        fmt::format("from_f64: {} values do not match shape {} ({} elements)", values.size(), shape_str(shape),
                    *bytes / size));
  RawTensor t{dtype, std::move(shape), std::vector<std::uint8_t>(static_cast<std::size_t>(*bytes))};
  from_f64_range(values, t, 0, values.size());
  return t;
}

void from_f64_range(std::span<const double> values, RawTensor& t, std::size_t begin, std::size_t end) {
  const std::size_t size = dtype_size(t.dtype);
  for (std::size_t i = begin; i < end; ++i) store_element(t.data.data() + i * size, values[i], t.dtype, i);
}

}  // namespace ttr::io
