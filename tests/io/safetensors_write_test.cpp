// Tests of the safetensors writer (oracles/io/safetensors.hpp): the bytes it writes
// (the Python package's layout, byte for byte) and the atomic write that never leaves
// a partial or a destroyed file.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"
#include "tests/io/safetensors_support.hpp"

namespace {

using namespace ttr::test::safetensors;

// ---------------------------------------------------------------- byte-exact

TEST(Safetensors, ByteExactSingleF32File) {
  TensorFile f;
  const double v[] = {1.0, -2.5};
  f.tensors["x"] = from_f64(v, {2}, DType::F32);
  // Header: {"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is
  // 5 + 15 + 12 + 20 + 2 = 54 bytes, padded with 2 spaces to 56 = 0x38.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(header.size(), 54u);
  Bytes expected = {0x38, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  expected.push_back(' ');
  expected.push_back(' ');
  // 1.0f = 0x3F800000 and -2.5f = 0xC0200000, little-endian.
  for (const int b : {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0}) expected.push_back(static_cast<std::uint8_t>(b));
  EXPECT_EQ(serialize_safetensors(f), expected);

  const TensorFile g = parse_safetensors(expected, kSource);
  ASSERT_EQ(g.tensors.size(), 1u);
  EXPECT_EQ(to_f64(g.tensors.at("x"), "x"), (std::vector<double>{1.0, -2.5}));
}

TEST(Safetensors, ByteExactMetadataFirstAndNameOrder) {
  TensorFile f;
  const double b[] = {7.0};
  f.tensors["b"] = from_f64(b, {1}, DType::I64);
  const double a[] = {-2.0};
  f.tensors["a"] = from_f64(a, {}, DType::F16);
  f.metadata["format"] = "pt";
  // "__metadata__" first, then tensors in name order packed from offset 0; 138 bytes
  // of JSON padded with 6 spaces to 144 = 0x90.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[2,10]}})";
  ASSERT_EQ(header.size(), 138u);
  Bytes expected = {0x90, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  expected.insert(expected.end(), 6, ' ');
  // -2.0 in fp16 is 0xC000; 7 as int64 little-endian.
  for (const int x : {0x00, 0xC0, 7, 0, 0, 0, 0, 0, 0, 0}) expected.push_back(static_cast<std::uint8_t>(x));
  EXPECT_EQ(serialize_safetensors(f), expected);
}

// ---------------------------------------------------------------- writing

TEST(Safetensors, WriteAtomicCreatesAndReplaces) {
  TempDir dir("write");
  const fs::path p = dir.path / "out.safetensors";
  write_safetensors_atomic(p, sample_file());
  expect_same(read_safetensors(p), sample_file());
  TensorFile other;
  const double v[] = {3.0};
  other.tensors["only"] = from_f64(v, {}, DType::F64);
  write_safetensors_atomic(p, other);
  expect_same(read_safetensors(p), other);
  EXPECT_EQ(dir.entries(), 1u);  // no temporary left behind
}

TEST(Safetensors, WriteAtomicIntoMissingDirectoryFails) {
  TempDir dir("missing");
  const fs::path p = dir.path / "no_such_dir" / "out.safetensors";
  try {
    write_safetensors_atomic(p, sample_file());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(p.string() + ": cannot write: ", 0), 0u) << msg;
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p.parent_path()));
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(Safetensors, WriteAtomicOfInvalidTensorLeavesOldFile) {
  TempDir dir("invalid");
  const fs::path p = dir.path / "out.safetensors";
  write_safetensors_atomic(p, sample_file());
  TensorFile bad;
  bad.tensors["w"] = RawTensor{DType::F32, {3}, Bytes(8, 0)};  // 8 bytes for 12 needed
  try {
    write_safetensors_atomic(p, bad);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(p.string() + ": cannot write: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
  }
  expect_same(read_safetensors(p), sample_file());
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(Safetensors, WriteAtomicOntoDirectoryFails) {
  TempDir dir("ontodir");
  const fs::path p = dir.path / "sub";
  fs::create_directory(p);
  EXPECT_THROW(write_safetensors_atomic(p, sample_file()), InputError);
  EXPECT_THROW(write_safetensors_atomic(dir.path / "sub/", sample_file()), InputError);
  EXPECT_TRUE(fs::is_directory(p));
  EXPECT_EQ(dir.entries(), 1u);  // the temporary was removed
}

TEST(Safetensors, SerializeRejectsUnwritableTensors) {
  const auto expect_bad = [](const TensorFile& f, const std::string& culprit) {
    try {
      serialize_safetensors(f);
      ADD_FAILURE() << "expected InputError for " << culprit;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(culprit), std::string::npos) << e.what();
    }
  };
  TensorFile f;
  f.tensors[""] = RawTensor{DType::F32, {}, Bytes(4, 0)};
  expect_bad(f, "empty name");
  f.tensors.clear();
  f.tensors["__metadata__"] = RawTensor{DType::F32, {}, Bytes(4, 0)};
  expect_bad(f, "'__metadata__' is reserved");
  f.tensors.clear();
  f.tensors["neg"] = RawTensor{DType::F32, {-1}, {}};
  expect_bad(f, "tensor 'neg'");
  f.tensors.clear();
  f.metadata["k"] = "\xFF";
  expect_bad(f, "metadata value of 'k'");
}

}  // namespace
