// Tests of the strict safetensors reader (oracles/io/safetensors.hpp): what it accepts,
// what it rejects and with which line; the writer's are safetensors_write_test.cpp.
#include "oracles/io/safetensors.hpp"

#include <gtest/gtest.h>

#include "tests/support/cli.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "tests/io/safetensors_support.hpp"

namespace {

using namespace ttr::test::safetensors;  // fs, InputError, ttr::io and the helpers

// ---------------------------------------------------------------- basics

TEST(Safetensors, DTypeNamesSizesAndParsing) {
  for (const DType d : {DType::F64, DType::F32, DType::BF16, DType::F16, DType::I64}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_name(DType::BF16), "BF16");
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_TRUE(is_floating(DType::BF16));
  EXPECT_FALSE(is_floating(DType::I64));
  EXPECT_FALSE(parse_dtype("f32"));  // case-sensitive
  EXPECT_FALSE(parse_dtype("F32 "));
  EXPECT_FALSE(parse_dtype("I32"));
  EXPECT_FALSE(parse_dtype(""));
}

TEST(Safetensors, NumelOfScalarAndEmpty) {
  EXPECT_EQ((RawTensor{DType::F32, {}, {}}).numel(), 1);
  EXPECT_EQ((RawTensor{DType::F32, {2, 0, 3}, {}}).numel(), 0);
  EXPECT_EQ((RawTensor{DType::F32, {2, 3}, {}}).numel(), 6);
}

TEST(Safetensors, RoundTripEveryDtypeWithMetadata) {
  const TensorFile f = sample_file();
  const Bytes bytes = serialize_safetensors(f);
  // The header length is a multiple of 8 and the header is padded with spaces.
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const TensorFile g = parse_safetensors(bytes, kSource);
  expect_same(f, g);
  EXPECT_EQ(g.tensors.at("d_f16_scalar").shape.size(), 0u);
  EXPECT_EQ(g.tensors.at("z_empty2").data.size(), 0u);
  // Values survive exactly where representable.
  EXPECT_EQ(to_f64(g.tensors.at("b_f64"), "b"), (std::vector<double>{0.1, -1e300, 5e-324, 7.0}));
  EXPECT_EQ(to_f64(g.tensors.at("c_bf16"), "c"), (std::vector<double>{1.0, 0.5, -3.0}));
  EXPECT_EQ(to_f64(g.tensors.at("d_f16_scalar"), "d"), (std::vector<double>{65504.0}));
  EXPECT_EQ(to_f64(g.tensors.at("e_i64"), "e"), (std::vector<double>{-9007199254740992.0, 0.0, 42.0}));
  EXPECT_TRUE(to_f64(g.tensors.at("z_empty"), "z").empty());
  // Serialization is deterministic: writing what was read gives the same bytes.
  EXPECT_EQ(serialize_safetensors(g), bytes);
}

TEST(Safetensors, EmptyMetadataIsNotWritten) {
  TensorFile f;
  const double v[] = {1.0};
  f.tensors["x"] = from_f64(v, {1}, DType::F32);
  const Bytes bytes = serialize_safetensors(f);
  const std::string text(bytes.begin() + 8, bytes.end());
  EXPECT_EQ(text.find("__metadata__"), std::string::npos);
  EXPECT_TRUE(parse_safetensors(bytes, kSource).metadata.empty());
}

TEST(Safetensors, EmptyFileRoundTrips) {
  const Bytes bytes = serialize_safetensors(TensorFile{});
  // "{}" padded to 8 bytes.
  EXPECT_EQ(bytes, make_file("{}      ", {}, false));
  const TensorFile g = parse_safetensors(bytes, kSource);
  EXPECT_TRUE(g.tensors.empty());
}

// ---------------------------------------------------------------- file-level strictness

TEST(Safetensors, RejectsMissingAndUnreadableFiles) {
  const fs::path missing = fs::temp_directory_path() / "ttr_st_definitely_missing" / "in.safetensors";
  try {
    read_safetensors(missing);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(missing.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot read"), std::string::npos) << msg;
  }
  TempDir dir("readdir");
  EXPECT_THROW(read_safetensors(dir.path), InputError);
}

TEST(Safetensors, ReadsFromDisk) {
  TempDir dir("read");
  const fs::path p = dir.path / "in.safetensors";
  const Bytes bytes = serialize_safetensors(sample_file());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                           static_cast<std::streamsize>(bytes.size()));
  expect_same(read_safetensors(p), sample_file());
  // Errors from a file name its path.
  std::ofstream(p, std::ios::binary | std::ios::trunc).write("abc", 3);
  try {
    read_safetensors(p);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(p.string() + ": ", 0), 0u) << e.what();
  }
}

TEST(Safetensors, RejectsFilesShorterThanEightBytes) {
  expect_rejected({}, {"0 bytes", "8-byte"});
  expect_rejected(Bytes(7, 0), {"7 bytes"});
}

TEST(Safetensors, RejectsBadHeaderLengths) {
  expect_rejected(Bytes(8, 0), {"header length is 0"});
  Bytes too_large = {0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0};  // 100000001
  expect_rejected(too_large, {"100000001", "limit"});
  expect_rejected(Bytes(8, 0xFF), {"18446744073709551615"});
  Bytes beyond = make_file("{}");
  beyond[0] = 9;  // one byte more than the file holds
  expect_rejected(beyond, {"header length 9", "beyond the end"});
}

TEST(Safetensors, RejectsHeaderThatIsNotUtf8) {
  expect_rejected(make_file("{\"\xFF\":1}"), {"UTF-8", "byte 2"});
  expect_rejected(make_file("{\"\xC0\xAF\":1}"), {"UTF-8"});      // overlong '/'
  expect_rejected(make_file("{\"\xED\xA0\x80\":1}"), {"UTF-8"});  // surrogate U+D800
  expect_rejected(make_file("{\"\xF4\x90\x80\x80\":1}"), {"UTF-8"});  // above U+10FFFF
  expect_rejected(make_file("{\"\xE2\x82\":1}"), {"UTF-8"});          // truncated sequence
}

TEST(Safetensors, RejectsHeaderThatIsNotJson) {
  expect_rejected(make_file("{\"a\":"), {"not valid JSON"});
  expect_rejected(make_file("{} {}"), {"not valid JSON"});
  expect_rejected(make_file(std::string("{\0}", 3)), {"not valid JSON"});
}

TEST(Safetensors, RejectsHeaderThatIsNotAnObject) {
  expect_rejected(make_file("[1,2]"), {"not a JSON object", "array"});
  expect_rejected(make_file("\"x\""), {"not a JSON object"});
  expect_rejected(make_file("12"), {"not a JSON object"});
}

TEST(Safetensors, RejectsDuplicateKeys) {
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("a", "[1]", 0, 4) + "}", zeros(4)),
                  {"duplicate key 'a'"});
  expect_rejected(make_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                  {"duplicate key 'dtype' inside 'a'"});
  expect_rejected(make_file(R"({"__metadata__":{"k":"1","k":"2"}})"), {"duplicate key 'k' inside '__metadata__'"});
  expect_rejected(make_file(R"({"__metadata__":{},"__metadata__":{}})"), {"duplicate key '__metadata__'"});
}

TEST(Safetensors, RejectsBadMetadata) {
  expect_rejected(make_file(R"({"__metadata__":"x"})"), {"'__metadata__'", "string 'x'"});
  expect_rejected(make_file(R"({"__metadata__":["a"]})"), {"'__metadata__'", "array"});
  expect_rejected(make_file(R"({"__metadata__":null})"), {"'__metadata__'", "null"});
  expect_rejected(make_file(R"({"__metadata__":{"k":1}})"), {"'__metadata__' key 'k'", "got 1"});
  expect_rejected(make_file(R"({"__metadata__":{"k":{"n":"v"}}})"), {"'__metadata__' key 'k'"});
  // An empty metadata object is fine.
  EXPECT_TRUE(parse_safetensors(make_file(R"({"__metadata__":{}})"), kSource).metadata.empty());
}

// ---------------------------------------------------------------- entry strictness

TEST(Safetensors, RejectsEntryThatIsNotAnObject) {
  expect_rejected(make_file(R"({"a":[1]})"), {"tensor 'a'", "must be an object"});
  expect_rejected(make_file(R"({"a":"F32"})"), {"tensor 'a'", "must be an object"});
}

TEST(Safetensors, RejectsMissingFields) {
  expect_rejected(make_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", zeros(4)), {"tensor 'a'", "'dtype'"});
  expect_rejected(make_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", zeros(4)), {"tensor 'a'", "'shape'"});
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1]}})", zeros(4)), {"tensor 'a'", "'data_offsets'"});
}

TEST(Safetensors, RejectsExtraFields) {
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offsets":[0,4]}})", zeros(4)),
                  {"tensor 'a'", "unexpected field 'offsets'"});
}

TEST(Safetensors, RejectsUnknownDtypes) {
  for (const std::string bad : {"F8", "f32", "I32", "float32", ""}) {
    expect_rejected(make_file(R"({"a":{"dtype":")" + bad + R"(","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                    {"tensor 'a'", "unknown dtype '" + bad + "'", "F64, F32, BF16, F16, I64"});
  }
  expect_rejected(make_file(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                  {"tensor 'a'", "dtype must be a string"});
}

TEST(Safetensors, RejectsBadShapes) {
  const auto with_shape = [](const std::string& shape) {
    return make_file(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", zeros(4));
  };
  expect_rejected(with_shape("1"), {"tensor 'a'", "shape must be an array"});
  expect_rejected(with_shape("{}"), {"tensor 'a'", "shape must be an array"});
  expect_rejected(with_shape("[1.0]"), {"tensor 'a'", "shape[0]", "1.0"});
  expect_rejected(with_shape("[1e0]"), {"tensor 'a'", "shape[0]"});
  expect_rejected(with_shape("[1,-1]"), {"tensor 'a'", "shape[1]", "-1"});
  expect_rejected(with_shape("[\"1\"]"), {"tensor 'a'", "shape[0]", "string '1'"});
  expect_rejected(with_shape("[null]"), {"tensor 'a'", "shape[0]", "null"});
  expect_rejected(with_shape("[18446744073709551616]"), {"tensor 'a'", "shape[0]"});  // 2^64: parsed as float
  expect_rejected(with_shape("[4611686018427387905]"), {"tensor 'a'", "shape[0]", "too large"});  // 2^62 + 1
  // Products: 2^31 * 2^31 * 4 bytes = 2^64 overflows; 2^60 * 4 = 2^62 is the limit, 2^61 * 4 is over.
  expect_rejected(with_shape("[2147483648,2147483648]"), {"tensor 'a'", "exceeds 2^62 bytes"});
  expect_rejected(with_shape("[2305843009213693952]"), {"tensor 'a'", "exceeds 2^62 bytes"});
  expect_rejected(with_shape("[1152921504606846976]"), {"tensor 'a'", "data_offsets [0, 4] do not match"});
  // A zero dimension first makes the product 0 whatever follows.
  expect_rejected(with_shape("[0,4611686018427387904,4]"), {"tensor 'a'", "(0 bytes)"});
}

TEST(Safetensors, RejectsBadDataOffsets) {
  const auto with_offsets = [](const std::string& offsets) {
    return make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + offsets + "}}", zeros(4));
  };
  for (const std::string bad : {"[0]", "[0,4,4]", "[]", "[-1,3]", "[0,4.0]", "[\"0\",4]", "{}", "4", "null"}) {
    expect_rejected(with_offsets(bad), {"tensor 'a'", "data_offsets must be an array of exactly two"});
  }
  expect_rejected(with_offsets("[4,0]"), {"tensor 'a'", "[4, 0]", "begin > end"});
}

TEST(Safetensors, RejectsOffsetsThatDoNotMatchDtypeAndShape) {
  const Bytes bytes =
      make_file(R"({"k":{"dtype":"F32","shape":[1,2,3,5],"data_offsets":[0,96]}})", zeros(96));
  EXPECT_EQ(parse_error(bytes),
            "t.safetensors: tensor 'k': data_offsets [0, 96] do not match dtype F32 and shape [1,2,3,5] (120 bytes)");
  // A scalar is one element.
  expect_rejected(make_file(R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,4]}})", zeros(4)),
                  {"tensor 's'", "dtype F64 and shape [] (8 bytes)"});
}

TEST(Safetensors, RejectsOffsetsBeyondTheBuffer) {
  expect_rejected(make_file("{" + f32_entry("a", "[2]", 0, 8) + "}", zeros(4)),
                  {"tensor 'a'", "[0, 8]", "beyond the data buffer (4 bytes)"});
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 1000, 1004) + "}", zeros(4)), {"tensor 'a'", "beyond"});
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_rejected(make_file("{" + f32_entry("a", "[2]", 0, 8) + "," + f32_entry("b", "[2]", 4, 12) + "}", zeros(12)),
                  {"'a'", "'b'", "overlap"});
  // Two tensors sharing the same bytes.
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("b", "[1]", 0, 4) + "}", zeros(4)),
                  {"'a'", "'b'", "overlap"});
  // An empty tensor placed inside another one.
  expect_rejected(make_file("{" + f32_entry("a", "[2]", 0, 8) + "," + f32_entry("z", "[0]", 4, 4) + "}", zeros(8)),
                  {"'a'", "'z'", "overlap"});
}

TEST(Safetensors, RejectsGapsInTheBuffer) {
  // The safetensors package requires each tensor to begin where the previous ended.
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("b", "[1]", 8, 12) + "}", zeros(12)),
                  {"gap of 4 unused bytes before tensor 'b'", "[8, 12]"});
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 4, 8) + "}", zeros(8)),
                  {"gap of 4 unused bytes before tensor 'a'"});
}

TEST(Safetensors, RejectsTrailingBytes) {
  expect_rejected(make_file("{" + f32_entry("a", "[1]", 0, 4) + "}", zeros(5)), {"1 trailing bytes"});
  expect_rejected(make_file("{}", zeros(3)), {"3 trailing bytes"});
}

TEST(Safetensors, RejectsEmptyTensorName) {
  expect_rejected(make_file("{" + f32_entry("", "[1]", 0, 4) + "}", zeros(4)), {"empty name"});
}

TEST(Safetensors, MessagesStayOnOneLine) {
  // A tensor name with a newline and a tab: escaped, so the message is one line.
  expect_rejected(make_file(R"({"a\nb\t":{"dtype":"F8","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                  {"tensor 'a\\x0ab\\x09'"});
}

// ---------------------------------------------------------------- lenient where the package is

TEST(Safetensors, AcceptsAnyEntryOrderAndUnpaddedHeaders) {
  // Offsets need not follow name order (the Python package orders by dtype alignment
  // first), the header need not be padded, whitespace around the object is allowed.
  const Bytes bytes = make_file("  {" + f32_entry("b", "[1]", 0, 4) + "," + f32_entry("a", "[2]", 4, 12) + "}\n",
                                {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}, false);
  const TensorFile f = parse_safetensors(bytes, kSource);
  EXPECT_EQ(f.tensors.at("b").data, (Bytes{1, 0, 0, 0}));
  EXPECT_EQ(f.tensors.at("a").data, (Bytes{2, 0, 0, 0, 3, 0, 0, 0}));
}

TEST(Safetensors, AcceptsEmptyTensorsAtSharedOffsets) {
  const Bytes bytes = make_file("{" + f32_entry("a", "[1]", 0, 4) + "," + f32_entry("e", "[0]", 4, 4) + "," +
                                    f32_entry("f", "[0,3]", 0, 0) + "," + f32_entry("g", "[2,0]", 4, 4) + "}",
                                zeros(4));
  const TensorFile f = parse_safetensors(bytes, kSource);
  EXPECT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors.at("f").shape, (std::vector<std::int64_t>{0, 3}));
}

// ---------------------------------------------------------------- robustness

// Mutates a valid file 2000 times (deterministically): parsing must either succeed or
// throw InputError, never crash (ASan/UBSan builds) or throw anything else.
TEST(Safetensors, MutatedFilesParseOrThrowInputError) {
  const Bytes valid = serialize_safetensors(sample_file());
  std::uint64_t header_end = 0;
  std::memcpy(&header_end, valid.data(), 8);
  header_end += 8;
  std::mt19937_64 rng(20240611);
  const auto pick = [&](std::uint64_t n) { return n == 0 ? 0 : rng() % n; };
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    Bytes b = valid;
    const int edits = 1 + static_cast<int>(pick(3));
    for (int e = 0; e < edits; ++e) {
      // Bias edits towards the header, where the structure is.
      const std::size_t limit = pick(4) == 0 ? b.size() : std::min<std::size_t>(header_end, b.size());
      const std::size_t pos = pick(limit);
      switch (pick(6)) {
        case 0:
          if (!b.empty()) b[pos] ^= static_cast<std::uint8_t>(1u << pick(8));
          break;
        case 1:
          if (!b.empty()) b[pos] = static_cast<std::uint8_t>(pick(256));
          break;
        case 2: {
          // Insert a structural JSON character or a random byte.
          static const char kChars[] = "{}[]\",:-0123456789 eE.tfn\\";
          const auto c = pick(2) ? kChars[pick(sizeof(kChars) - 1)] : static_cast<char>(pick(256));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(std::min(pos, b.size())), static_cast<std::uint8_t>(c));
          break;
        }
        case 3:
          if (!b.empty()) b.erase(b.begin() + static_cast<std::ptrdiff_t>(pos));
          break;
        case 4:
          b.resize(pick(b.size() + 1));
          break;
        default:
          if (b.size() >= 8) b[pick(8)] = static_cast<std::uint8_t>(pick(256));  // header length
          break;
      }
    }
    try {
      const TensorFile f = parse_safetensors(b, kSource);
      for (const auto& [name, t] : f.tensors) {
        EXPECT_EQ(t.data.size(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype)) << name;
      }
      ++accepted;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << ": unexpected exception " << e.what();
    }
  }
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 0);  // some edits hit data bytes or padding
}

// A hostile header nested 100000 levels deep: rejected, without recursing per level.
TEST(Safetensors, DeeplyNestedHeaderIsRejectedWithoutCrash) {
  const std::size_t depth = 100000;
  expect_rejected(make_file("{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}"),
                  {"tensor 'a'", "must be an object"});
  std::string objects;
  for (std::size_t i = 0; i < depth; ++i) objects += "{\"k\":";
  objects += "1" + std::string(depth, '}');
  expect_rejected(make_file(R"({"__metadata__":)" + objects + "}"), {"'__metadata__' key 'k'"});
}

// ---------------------------------------------------------------- seed corpus

// The fuzz seeds (fuzz/corpus/safetensors, made by make_safetensors_seeds.py): files
// named valid_* must parse, invalid_* must be rejected with InputError.
TEST(Safetensors, SeedCorpusIsClassifiedCorrectly) {
  // The repository's corpus: a missing one is a broken checkout, not a skip.
  const fs::path corpus = ttr::test::source_dir() / "fuzz/corpus/safetensors";
  ASSERT_TRUE(fs::is_directory(corpus)) << "no seed corpus at " << corpus;
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(read_safetensors(entry.path())) << name;
      ++seen;
    } else if (name.rfind("invalid_", 0) == 0) {
      EXPECT_THROW(read_safetensors(entry.path()), InputError) << name;
      ++seen;
    }
  }
  EXPECT_GT(seen, 0);
}

}  // namespace
