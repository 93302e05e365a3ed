// Strict safetensors reader/writer. See safetensors.hpp for the contract.
//
// Reference behaviour (the Rust core that the `safetensors` Python package wraps):
// entries are sorted by data_offsets, each entry must begin exactly where the previous
// one ended, and the last must end exactly at the end of the file. So gaps, overlaps
// and trailing bytes are all rejected there, and we reject them too. The header limit
// of 100,000,000 bytes and the space padding to a multiple of 8 also follow it.
#include "oracles/io/safetensors.hpp"

#include "oracles/io/tensor_bytes.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "oracles/error.hpp"
#include "oracles/io/atomic_file.hpp"
#include "oracles/io/printable.hpp"

namespace ttr::io {

// Tensor bytes are stored little-endian and we copy them with memcpy.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4, "F32 must be IEEE binary32");
static_assert(std::numeric_limits<double>::is_iec559 && sizeof(double) == 8, "F64 must be IEEE binary64");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using detail::kMaxTensorBytes;
using detail::shape_str;
using detail::tensor_bytes;

// The Python package's MAX_HEADER_SIZE.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::array<DType, 5> kAllDTypes = {DType::F64, DType::F32, DType::BF16, DType::F16, DType::I64};
constexpr std::array<std::string_view, 3> kEntryFields = {"dtype", "shape", "data_offsets"};

// ---------------------------------------------------------------- messages

std::string quote_name(std::string_view s) { return "'" + printable(s) + "'"; }

std::string offsets_str(std::uint64_t begin, std::uint64_t end) { return fmt::format("[{}, {}]", begin, end); }

std::string accepted_dtypes() {
  std::vector<std::string_view> names;
  for (const DType d : kAllDTypes) names.push_back(dtype_name(d));
  return fmt::format("{}", fmt::join(names, ", "));
}

// Short description of a JSON value for "got ..." clauses. Containers are named, not
// dumped: dumping recurses and the value may be arbitrarily large or deep.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return fmt::format("an array of {} elements", v.size());
    case json::value_t::string: return "string " + quote_name(printable(v.get_ref<const std::string&>(), 60));
    default: return v.dump();  // number, boolean, null: a single short token
  }
}

[[noreturn]] void fail(const std::string& source, const std::string& message) {
  throw InputError(printable(source, 4096) + ": " + message);
}

// ---------------------------------------------------------------- helpers

// Offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or nullopt if all is valid.
std::optional<std::size_t> invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80u) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80u, hi = 0xBFu;  // allowed range of the second byte
    if (c >= 0xC2u && c <= 0xDFu) {
      len = 2;
    } else if (c == 0xE0u) {
      len = 3, lo = 0xA0u;
    } else if ((c >= 0xE1u && c <= 0xECu) || c == 0xEEu || c == 0xEFu) {
      len = 3;
    } else if (c == 0xEDu) {
      len = 3, hi = 0x9Fu;
    } else if (c == 0xF0u) {
      len = 4, lo = 0x90u;
    } else if (c >= 0xF1u && c <= 0xF3u) {
      len = 4;
    } else if (c == 0xF4u) {
      len = 4, hi = 0x8Fu;
    } else {
      return i;
    }
    if (len > s.size() - i) return i;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0u) != 0x80u) return i;
    }
    i += len;
  }
  return std::nullopt;
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void append_u64_le(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// JSON integers only: 3.0 and 1e2 are floats in the file and rejected, as are
// negatives. nlohmann stores non-negative literals as unsigned, negatives as signed
// ("-0" becomes signed 0, which we accept as 0).
std::optional<std::uint64_t> as_non_negative_integer(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

// ---------------------------------------------------------------- header parsing

// Splits the file into header text and data buffer, checking the length field.
struct Sections {
  std::string_view header;
  std::span<const std::uint8_t> data;
};

Sections split_sections(std::span<const std::uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, fmt::format("file is {} bytes long, shorter than the 8-byte header length field", bytes.size()));
  const std::uint64_t n = read_u64_le(bytes.data());
  if (n == 0) fail(source, "header length is 0; the header must be a JSON object");
  if (n > kMaxHeaderBytes)
    fail(source, fmt::format("header length {} exceeds the safetensors limit of {} bytes", n, kMaxHeaderBytes));
  const std::uint64_t after_length = bytes.size() - 8;
  if (n > after_length)
    fail(source, fmt::format("header length {} extends beyond the end of the file ({} bytes follow the length field)",
                             n, after_length));
  const auto header_len = static_cast<std::size_t>(n);
  return {std::string_view(reinterpret_cast<const char*>(bytes.data() + 8), header_len),
          bytes.subspan(8 + header_len)};
}

// Parses the header JSON. nlohmann keeps the last of duplicate keys silently; a parser
// callback sees every key, so we track the keys of each open object and report the
// first repeat (a duplicated tensor or field would make the file ambiguous).
json parse_header_json(std::string_view text, const std::string& source) {
  if (const auto bad = invalid_utf8_at(text))
    fail(source, fmt::format("header is not valid UTF-8 (byte {} of the header)", *bad));

  struct OpenObject {
    std::set<std::string> keys;
    std::string owner;     // key under which this object sits ("" at the top)
    std::string last_key;  // most recent key, the owner of a nested object
  };
  std::vector<OpenObject> open;
  std::string duplicate;
  const json::parser_callback_t track_keys = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.push_back({{}, open.empty() ? std::string() : open.back().last_key, {}});
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && parsed.is_string()) {
          OpenObject& top = open.back();
          top.last_key = parsed.get<std::string>();
          if (!top.keys.insert(top.last_key).second && duplicate.empty()) {
            duplicate = open.size() == 1
                            ? fmt::format("header has duplicate key {}", quote_name(top.last_key))
                            : fmt::format("header has duplicate key {} inside {}", quote_name(top.last_key),
                                          quote_name(top.owner));
          }
        }
        break;
      default:
        break;
    }
    return true;  // keep everything; we only observe
  };

  json header;
  try {
    header = json::parse(text.begin(), text.end(), track_keys);
  } catch (const json::exception& e) {
    fail(source, "header is not valid JSON: " + printable(e.what(), 300));
  }
  if (!duplicate.empty()) fail(source, duplicate);
  if (!header.is_object()) fail(source, "header is not a JSON object (got " + describe(header) + ")");
  return header;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& source) {
  if (!v.is_object()) fail(source, "'__metadata__' must be an object mapping strings to strings, got " + describe(v));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string())
      fail(source, fmt::format("'__metadata__' key {} must map to a string, got {}", quote_name(key), describe(value)));
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// One validated tensor entry of the header.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

void check_entry_fields(const json& v, const std::string& source, const std::string& what) {
  if (!v.is_object())
    fail(source, fmt::format("{}: entry must be an object with dtype, shape and data_offsets, got {}", what,
                             describe(v)));
  for (const auto& [key, value] : v.items()) {
    if (std::find(kEntryFields.begin(), kEntryFields.end(), key) == kEntryFields.end())
      fail(source, fmt::format("{}: unexpected field {} (allowed: dtype, shape, data_offsets)", what, quote_name(key)));
  }
  for (const std::string_view field : kEntryFields) {
    if (!v.contains(field)) fail(source, fmt::format("{}: missing field '{}'", what, field));
  }
}

DType parse_entry_dtype(const json& v, const std::string& source, const std::string& what) {
  if (!v.is_string()) fail(source, fmt::format("{}: dtype must be a string, got {}", what, describe(v)));
  const auto& name = v.get_ref<const std::string&>();
  const auto dtype = parse_dtype(name);
  if (!dtype) fail(source, fmt::format("{}: unknown dtype {} (accepted: {})", what, quote_name(name), accepted_dtypes()));
  return *dtype;
}

std::vector<std::int64_t> parse_entry_shape(const json& v, const std::string& source, const std::string& what) {
  if (!v.is_array())
    fail(source, fmt::format("{}: shape must be an array of non-negative integers, got {}", what, describe(v)));
  std::vector<std::int64_t> shape;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto dim = as_non_negative_integer(v[i]);
    if (!dim) fail(source, fmt::format("{}: shape[{}] must be a non-negative integer, got {}", what, i, describe(v[i])));
    if (*dim > kMaxTensorBytes)
      fail(source, fmt::format("{}: shape[{}] = {} is too large (limit 2^62)", what, i, *dim));
    shape.push_back(static_cast<std::int64_t>(*dim));
  }
  return shape;
}

std::pair<std::uint64_t, std::uint64_t> parse_entry_offsets(const json& v, const std::string& source,
                                                             const std::string& what) {
  std::optional<std::uint64_t> begin, end;
  if (v.is_array() && v.size() == 2) begin = as_non_negative_integer(v[0]), end = as_non_negative_integer(v[1]);
  if (!begin || !end)
    fail(source, fmt::format("{}: data_offsets must be an array of exactly two non-negative integers, got {}", what,
                             v.is_array() && v.size() == 2 ? "[" + describe(v[0]) + ", " + describe(v[1]) + "]"
                                                           : describe(v)));
  if (*begin > *end)
    fail(source, fmt::format("{}: data_offsets {} have begin > end", what, offsets_str(*begin, *end)));
  return {*begin, *end};
}

Entry parse_entry(const std::string& name, const json& v, const std::string& source) {
  const std::string what = "tensor " + quote_name(name);
  check_entry_fields(v, source, what);
  Entry e{name, parse_entry_dtype(v["dtype"], source, what), parse_entry_shape(v["shape"], source, what), 0, 0};
  std::tie(e.begin, e.end) = parse_entry_offsets(v["data_offsets"], source, what);
  const auto bytes = tensor_bytes(e.shape, e.dtype);
  if (!bytes)
    fail(source, fmt::format("{}: shape {} with dtype {} exceeds 2^62 bytes", what, shape_str(e.shape),
                             dtype_name(e.dtype)));
  if (e.end - e.begin != *bytes)
    fail(source, fmt::format("{}: data_offsets {} do not match dtype {} and shape {} ({} bytes)", what,
                             offsets_str(e.begin, e.end), dtype_name(e.dtype), shape_str(e.shape), *bytes));
  return e;
}

// The entries must tile the data buffer exactly: in offset order each begins where the
// previous ended (no overlap, no gap) and the last ends at the end of the file. This is
// the Python package's rule; a gap could hide data and an overlap aliases tensors.
void check_layout(std::vector<Entry>& entries, std::uint64_t data_size, const std::string& source) {
  for (const Entry& e : entries) {
    if (e.end > data_size)
      fail(source, fmt::format("tensor {}: data_offsets {} extend beyond the data buffer ({} bytes)", quote_name(e.name),
                               offsets_str(e.begin, e.end), data_size));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      fail(source, fmt::format("tensors {} (data_offsets {}) and {} (data_offsets {}) overlap", quote_name(previous->name),
                               offsets_str(previous->begin, previous->end), quote_name(e.name),
                               offsets_str(e.begin, e.end)));
    if (e.begin > covered)
      fail(source, fmt::format("gap of {} unused bytes before tensor {} (data_offsets {}); the data buffer must be "
                               "covered contiguously",
                               e.begin - covered, quote_name(e.name), offsets_str(e.begin, e.end)));
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size)
    fail(source, fmt::format("{} trailing bytes after the last tensor (data buffer is {} bytes, tensors cover {})",
                             data_size - covered, data_size, covered));
}

// ---------------------------------------------------------------- writing

// A reason why a TensorFile cannot be serialized; the callers add the context.
struct WriteProblem {
  std::string reason;
};

void check_utf8_for_write(std::string_view text, const std::string& what) {
  if (invalid_utf8_at(text)) throw WriteProblem{what + " is not valid UTF-8"};
}

std::uint64_t checked_write_bytes(const std::string& name, const RawTensor& t) {
  const std::string what = "tensor " + quote_name(name);
  if (name.empty()) throw WriteProblem{"a tensor has an empty name"};
  if (name == kMetadataKey) throw WriteProblem{"'__metadata__' is reserved and cannot name a tensor"};
  check_utf8_for_write(name, "tensor name " + quote_name(name));
  const auto bytes = tensor_bytes(t.shape, t.dtype);
  if (!bytes) throw WriteProblem{fmt::format("{}: invalid shape {}", what, shape_str(t.shape))};
  if (t.data.size() != *bytes)
    throw WriteProblem{fmt::format("{}: holds {} bytes but dtype {} and shape {} need {}", what, t.data.size(),
                                   dtype_name(t.dtype), shape_str(t.shape), *bytes)};
  return *bytes;
}

std::vector<std::uint8_t> serialize_or_throw(const TensorFile& file) {
  // ordered_json keeps insertion order, so entries come out as the Python package
  // writes them: "__metadata__" first, then fields dtype, shape, data_offsets.
  ordered_json header = ordered_json::object();
  if (!file.metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [key, value] : file.metadata) {
      check_utf8_for_write(key, "metadata key " + quote_name(key));
      check_utf8_for_write(value, "metadata value of " + quote_name(key));
      meta[key] = value;
    }
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : file.tensors) {
    const std::uint64_t bytes = checked_write_bytes(name, tensor);
    ordered_json entry = ordered_json::object();
    entry["dtype"] = dtype_name(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = ordered_json::array({offset, offset + bytes});
    header[name] = std::move(entry);
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad like the Python package

  std::vector<std::uint8_t> out;
  out.reserve(8 + text.size() + offset);
  append_u64_le(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& [name, tensor] : file.tensors) out.insert(out.end(), tensor.data.begin(), tensor.data.end());
  return out;
}

[[noreturn]] void cannot_write(const std::filesystem::path& path, const std::string& reason) {
  fail(path.string(), "cannot write: " + reason);
}

}  // namespace

namespace detail {

// Bytes held by a tensor of this shape and dtype, or nullopt when a dimension is
// negative or the count exceeds kMaxTensorBytes (checked at every step, so no
// intermediate product can overflow).
std::optional<std::uint64_t> tensor_bytes(std::span<const std::int64_t> shape, DType dtype) {
  std::uint64_t total = dtype_size(dtype);
  for (const std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    const auto ud = static_cast<std::uint64_t>(d);
    if (ud != 0 && total > kMaxTensorBytes / ud) return std::nullopt;
    total *= ud;
  }
  return total;
}

std::string shape_str(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

}  // namespace detail

// ---------------------------------------------------------------- public API

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I64: return "I64";
  }
  throw std::logic_error("unknown DType");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DType d : kAllDTypes) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I64: return 8;
  }
  throw std::logic_error("unknown DType");
}

bool is_floating(DType d) { return d != DType::I64; }

std::int64_t RawTensor::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

TensorFile parse_safetensors(std::span<const std::uint8_t> bytes, const std::string& source_name) {
  const Sections sections = split_sections(bytes, source_name);
  const json header = parse_header_json(sections.header, source_name);

  TensorFile file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      file.metadata = parse_metadata(value, source_name);
      continue;
    }
    if (key.empty()) fail(source_name, "header has a tensor with an empty name");
    entries.push_back(parse_entry(key, value, source_name));
  }
  check_layout(entries, sections.data.size(), source_name);

  for (Entry& e : entries) {
    const auto data = sections.data.subspan(e.begin, e.end - e.begin);
    file.tensors.emplace(std::move(e.name),
                         RawTensor{e.dtype, std::move(e.shape), std::vector<std::uint8_t>(data.begin(), data.end())});
  }
  return file;
}

TensorFile read_safetensors(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = read_regular_file(path);
  return parse_safetensors(bytes, path.string());
}

std::vector<std::uint8_t> serialize_safetensors(const TensorFile& file) {
  try {
    return serialize_or_throw(file);
  } catch (const WriteProblem& p) {
    throw InputError("cannot serialize safetensors: " + p.reason);
  }
}

void write_safetensors_atomic(const std::filesystem::path& path, const TensorFile& file) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = serialize_or_throw(file);
  } catch (const WriteProblem& p) {
    cannot_write(path, p.reason);
  }
  write_file_atomic(path, bytes);
}

}  // namespace ttr::io
