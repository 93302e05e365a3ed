// Helpers of the safetensors tests (safetensors_test.cpp, safetensors_write_test.cpp):
// files built byte by byte, the reader's error line, a scratch directory, a sample
// file with every dtype.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"

namespace ttr::test::safetensors {

namespace fs = std::filesystem;
using ttr::InputError;
using namespace ttr::io;

using Bytes = std::vector<std::uint8_t>;
inline constexpr const char* kSource = "t.safetensors";

// A file from a header JSON text and a data buffer; the header is space-padded to a
// multiple of 8 unless pad is false.
inline Bytes make_file(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out;
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline Bytes zeros(std::size_t n) { return Bytes(n, 0); }

// The message of the InputError that parsing throws; fails the test if parsing
// succeeds or throws anything else.
inline std::string parse_error(const Bytes& bytes) {
  try {
    parse_safetensors(bytes, kSource);
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected InputError, parse succeeded";
  return {};
}

// Asserts an InputError whose one-line message names the file and every culprit.
inline void expect_rejected(const Bytes& bytes, std::initializer_list<std::string> culprits) {
  const std::string msg = parse_error(bytes);
  if (msg.empty()) return;
  EXPECT_EQ(msg.rfind(std::string(kSource) + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const std::string& c : culprits) EXPECT_NE(msg.find(c), std::string::npos) << "'" << c << "' not in: " << msg;
}

// A valid single F32 tensor entry with the given name and offsets.
inline std::string f32_entry(const std::string& name, const std::string& shape, std::uint64_t begin, std::uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) +
         "," + std::to_string(end) + "]}";
}

// A fresh empty directory, removed at scope exit.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("ttr_st_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), {})); }
};

inline TensorFile sample_file() {
  TensorFile f;
  const double a[] = {1.0, -2.5, 0.1, 1e-40, 3e38, -0.0};
  f.tensors["a_f32"] = from_f64(a, {2, 3}, DType::F32);
  const double b[] = {0.1, -1e300, 5e-324, 7.0};
  f.tensors["b_f64"] = from_f64(b, {4}, DType::F64);
  const double c[] = {1.0, 0.5, -3.0};
  f.tensors["c_bf16"] = from_f64(c, {3, 1}, DType::BF16);
  const double d[] = {65504.0};
  f.tensors["d_f16_scalar"] = from_f64(d, {}, DType::F16);
  const double e[] = {-9007199254740992.0, 0.0, 42.0};
  f.tensors["e_i64"] = from_f64(e, {1, 3}, DType::I64);
  f.tensors["z_empty"] = from_f64({}, {0}, DType::F32);
  f.tensors["z_empty2"] = from_f64({}, {2, 0, 3}, DType::BF16);
  f.metadata["format"] = "pt";
  f.metadata["note"] = "unicode \xC3\xA9 and \"quotes\"\n";
  return f;
}

inline void expect_same(const TensorFile& x, const TensorFile& y) {
  EXPECT_EQ(x.metadata, y.metadata);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (const auto& [name, t] : x.tensors) {
    const auto it = y.tensors.find(name);
    ASSERT_NE(it, y.tensors.end()) << name;
    EXPECT_EQ(t.dtype, it->second.dtype) << name;
    EXPECT_EQ(t.shape, it->second.shape) << name;
    EXPECT_EQ(t.data, it->second.data) << name;
  }
}

}  // namespace ttr::test::safetensors
