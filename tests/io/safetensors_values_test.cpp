// safetensors' element conversions (oracles/io/safetensors.hpp: from_f64, to_f64):
// rounding to nearest even into F32, BF16 and F16 at the ties and the range's ends,
// F64 bit for bit, I64 exact or rejected. Expected bit patterns are derived by hand
// from the formats' definitions (IEEE 754 binary32/binary16, bfloat16).
#include "oracles/io/safetensors.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "oracles/error.hpp"

namespace {

using ttr::InputError;
using namespace ttr::io;
using Bytes = std::vector<std::uint8_t>;

std::uint64_t bits_of(double x) { return std::bit_cast<std::uint64_t>(x); }

// Round-trips values through from_f64 and to_f64 for one dtype.
std::vector<double> round_values(std::initializer_list<double> values, DType dtype) {
  const std::vector<double> v(values);
  const RawTensor t = from_f64(v, {static_cast<std::int64_t>(v.size())}, dtype);
  return to_f64(t, "test");
}

double round_one(double x, DType dtype) { return round_values({x}, dtype).at(0); }

std::uint16_t bits16(double x, DType dtype) {
  const double v[] = {x};
  const RawTensor t = from_f64(v, {}, dtype);
  std::uint16_t b;
  std::memcpy(&b, t.data.data(), 2);
  return b;
}

// ---------------------------------------------------------------- rounding

TEST(Safetensors, F32RoundsToNearestEven) {
  // binary32 has p = 24: the ulp of 1 is 2^-23. 1 + 2^-24 is the midpoint of 1 and
  // 1 + 2^-23; the tie goes to the even significand, 1.
  EXPECT_EQ(round_one(1.0 + 0x1p-24, DType::F32), 1.0);
  // 1 + 3*2^-24 is the midpoint of 1 + 2^-23 (odd) and 1 + 2^-22 (even) -> 1 + 2^-22.
  EXPECT_EQ(round_one(1.0 + 3 * 0x1p-24, DType::F32), 1.0 + 0x1p-22);
  // Just above the midpoint rounds up.
  EXPECT_EQ(round_one(1.0 + 0x1p-24 + 0x1p-50, DType::F32), 1.0 + 0x1p-23);
  // Smallest subnormal 2^-149 is exact; 2^-150 is a tie between 0 and it -> 0.
  EXPECT_EQ(round_one(0x1p-149, DType::F32), 0x1p-149);
  EXPECT_EQ(round_one(0x1p-150, DType::F32), 0.0);
  // FLT_MAX = (2 - 2^-23) 2^127; the midpoint to 2^128 is 2^128 - 2^103, which ties
  // to the even neighbour 2^128 -> inf; just below it stays FLT_MAX.
  const double flt_max = std::numeric_limits<float>::max();
  EXPECT_EQ(round_one(0x1p128 - 0x1p103, DType::F32), INFINITY);
  EXPECT_EQ(round_one(0x1p128 - 0x1p103 - 0x1p80, DType::F32), flt_max);
  EXPECT_EQ(round_one(-1e300, DType::F32), -INFINITY);
  EXPECT_TRUE(std::isnan(round_one(NAN, DType::F32)));
  EXPECT_TRUE(std::signbit(round_one(-0.0, DType::F32)));
}

TEST(Safetensors, Bf16RoundsToNearestEven) {
  // bf16 has p = 8: the ulp of 1 is 2^-7. 1 + 2^-8 is the midpoint of 1 (even) and
  // 1 + 2^-7 (odd) -> 1.
  EXPECT_EQ(round_one(1.0 + 0x1p-8, DType::BF16), 1.0);
  // 1 + 3*2^-8 is the midpoint of 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6.
  EXPECT_EQ(round_one(1.0 + 3 * 0x1p-8, DType::BF16), 1.0 + 0x1p-6);
  // Smallest subnormal: emin = -126, 7 fraction bits -> 2^-133, encoding 0x0001.
  EXPECT_EQ(round_one(0x1p-133, DType::BF16), 0x1p-133);
  EXPECT_EQ(bits16(0x1p-133, DType::BF16), 0x0001);
  // 2^-134 is the tie between 0 (even) and 2^-133 -> +0; 3*2^-135 = 0.75 ulp -> 2^-133.
  EXPECT_EQ(round_one(0x1p-134, DType::BF16), 0.0);
  EXPECT_EQ(round_one(3 * 0x1p-135, DType::BF16), 0x1p-133);
  // Encodings: 1.0 is 0x3F80 (the top half of binary32 0x3F800000), -2 is 0xC000.
  EXPECT_EQ(bits16(1.0, DType::BF16), 0x3F80);
  EXPECT_EQ(bits16(-2.0, DType::BF16), 0xC000);
  // Max finite (2 - 2^-7) 2^127; the midpoint to 2^128 ties to 2^128 -> inf.
  EXPECT_EQ(round_one(0x1p128 - 0x1p119, DType::BF16), INFINITY);
  EXPECT_EQ(round_one(0x1p128 - 0x1p119 - 0x1p100, DType::BF16), 0x1p128 - 0x1p120);
  EXPECT_EQ(bits16(INFINITY, DType::BF16), 0x7F80);
  EXPECT_TRUE(std::isnan(round_one(NAN, DType::BF16)));
}

TEST(Safetensors, Fp16RoundsToNearestEven) {
  // fp16 has p = 11: the ulp of 1 is 2^-10. 1 + 2^-11 ties to 1 (even).
  EXPECT_EQ(round_one(1.0 + 0x1p-11, DType::F16), 1.0);
  // 1 + 3*2^-11 is the midpoint of 1 + 2^-10 (odd) and 1 + 2^-9 (even) -> 1 + 2^-9.
  EXPECT_EQ(round_one(1.0 + 3 * 0x1p-11, DType::F16), 1.0 + 0x1p-9);
  // Smallest subnormal: emin = -14, 10 fraction bits -> 2^-24, encoding 0x0001.
  EXPECT_EQ(round_one(0x1p-24, DType::F16), 0x1p-24);
  EXPECT_EQ(bits16(0x1p-24, DType::F16), 0x0001);
  // 2^-25 ties between 0 (even) and 2^-24 -> 0; 3*2^-26 = 0.75 ulp -> 2^-24.
  EXPECT_EQ(round_one(0x1p-25, DType::F16), 0.0);
  EXPECT_EQ(round_one(3 * 0x1p-26, DType::F16), 0x1p-24);
  // Max finite 65504 = (2 - 2^-10) 2^15 has an odd significand; the midpoint to 2^16
  // is 65520, which ties to the even 2^16 -> inf. 65519 is below it -> 65504.
  EXPECT_EQ(round_one(65520.0, DType::F16), INFINITY);
  EXPECT_EQ(round_one(-65520.0, DType::F16), -INFINITY);
  EXPECT_EQ(round_one(65519.0, DType::F16), 65504.0);
  EXPECT_EQ(bits16(65504.0, DType::F16), 0x7BFF);
  EXPECT_EQ(bits16(INFINITY, DType::F16), 0x7C00);
  EXPECT_EQ(bits16(1.0, DType::F16), 0x3C00);
  EXPECT_EQ(bits16(-2.0, DType::F16), 0xC000);
  EXPECT_TRUE(std::isnan(round_one(NAN, DType::F16)));
  EXPECT_TRUE(std::signbit(round_one(-0.0, DType::F16)));
}

TEST(Safetensors, F64IsBitExact) {
  const std::vector<double> v = round_values({0.1, -0.0, 5e-324, 1.7976931348623157e308, -INFINITY}, DType::F64);
  EXPECT_EQ(bits_of(v[0]), bits_of(0.1));
  EXPECT_EQ(bits_of(v[1]), bits_of(-0.0));
  EXPECT_EQ(bits_of(v[2]), bits_of(5e-324));
  EXPECT_EQ(v[3], 1.7976931348623157e308);
  EXPECT_EQ(v[4], -INFINITY);
}

TEST(Safetensors, I64ConversionIsExactOrRejected) {
  EXPECT_EQ(round_values({-0x1p53, 0x1p53, -0.0, 3.0}, DType::I64), (std::vector<double>{-0x1p53, 0x1p53, 0.0, 3.0}));
  // -2^63 fits in int64 (but to_f64 would refuse it: beyond 2^53).
  const double lowest[] = {-0x1p63};
  std::int64_t stored = 0;
  std::memcpy(&stored, from_f64(lowest, {}, DType::I64).data.data(), 8);
  EXPECT_EQ(stored, std::numeric_limits<std::int64_t>::min());
  // to_f64 refuses values that a double cannot hold exactly.
  RawTensor t{DType::I64, {2}, Bytes(16, 0)};
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  std::memcpy(t.data.data() + 8, &big, 8);
  try {
    to_f64(t, "in.safetensors: tensor 'q'");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("in.safetensors: tensor 'q'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("9007199254740993"), std::string::npos) << msg;
  }
  // from_f64 requires integral values within range.
  const double half[] = {1.0, 1.5};
  EXPECT_THROW(from_f64(half, {2}, DType::I64), InputError);
  const double nan[] = {NAN};
  EXPECT_THROW(from_f64(nan, {1}, DType::I64), InputError);
  const double too_big[] = {0x1p63};
  EXPECT_THROW(from_f64(too_big, {1}, DType::I64), InputError);
}

TEST(Safetensors, FromF64ChecksShapeAgainstValues) {
  const double v[] = {1.0, 2.0, 3.0};
  EXPECT_THROW(from_f64(v, {2, 2}, DType::F32), std::invalid_argument);
  EXPECT_THROW(from_f64(v, {-3}, DType::F32), std::invalid_argument);
  EXPECT_EQ(from_f64(v, {3, 1}, DType::BF16).data.size(), 6u);
}

}  // namespace
