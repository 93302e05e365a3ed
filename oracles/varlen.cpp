#include "oracles/varlen.hpp"

#include <cmath>
#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {

TensorSpec cu_seqlens_spec() {
  TensorSpec t{kCuSeqlens, {"N+1"}, false, Range::nonnegative(), Role::value,
               "I64 cumulative sequence offsets (FLA's cu_seqlens): N sequences packed into one batch row, B = 1; "
               "first 0, non-decreasing, last T; h0/ht (every [B,H,...] tensor) become [N,H,...]"};
  t.differentiable = false;
  t.not_differentiable_why = "integer offsets: the outputs are piecewise constant in them (no gradient)";
  return t;
}

void add_varlen_input(LayerSpec& spec) {
  if (!spec.input(kCuSeqlens)) spec.inputs.push_back(cu_seqlens_spec());
}

AxisKind axis_kind(const TensorSpec& t) {
  if (t.name == kCuSeqlens) return AxisKind::offsets;
  if (t.dims.empty()) return AxisKind::other;
  if (t.dims[0] == "B") return t.dims.size() >= 2 && t.dims[1] == "T" ? AxisKind::per_token : AxisKind::per_sequence;
  if (t.dims[0] == "H") return AxisKind::per_head;
  return AxisKind::other;
}

int head_axis(const TensorSpec& t) {
  const auto at = [&](std::size_t i) { return t.dims.size() > i && t.dims[i] == "H" ? static_cast<int>(i) : -1; };
  switch (axis_kind(t)) {
    case AxisKind::per_token: return at(2);
    case AxisKind::per_sequence: return at(1);
    case AxisKind::per_head: return at(0);
    default: return -1;
  }
}

std::vector<std::int64_t> read_cu_seqlens(const io::RawTensor& raw, const std::string& source) {
  const std::string what = fmt::format("{}: tensor '{}'", source, kCuSeqlens);
  if (raw.dtype != io::DType::I64)
    throw InputError(fmt::format("{} has dtype {}; expected I64 (cumulative sequence offsets, FLA's cu_seqlens)", what,
                                 io::dtype_name(raw.dtype)));
  if (raw.shape.size() != 1)
    throw InputError(fmt::format("{} has rank {}; expected rank 1 [N+1]", what, raw.shape.size()));
  if (raw.shape[0] < 2)
    throw InputError(fmt::format("{} has {} element(s); expected [N+1] with N >= 1 sequences", what, raw.shape[0]));
  std::vector<std::int64_t> cu(static_cast<std::size_t>(raw.shape[0]));
  for (std::size_t i = 0; i < cu.size(); ++i) {  // little-endian int64 (the safetensors format)
    std::uint64_t u = 0;
    for (int b = 7; b >= 0; --b) u = (u << 8) | raw.data[i * 8 + static_cast<std::size_t>(b)];
    cu[i] = static_cast<std::int64_t>(u);
  }
  if (cu[0] != 0) throw InputError(fmt::format("{}: element [0] = {}; the offsets must start at 0", what, cu[0]));
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      throw InputError(fmt::format("{}: element [{}] = {} is less than element [{}] = {}; the offsets must be "
                                   "non-decreasing",
                                   what, i, cu[i], i - 1, cu[i - 1]));
  return cu;
}

std::vector<std::int64_t> cu_seqlens_of(const TensorMap<double>& inputs) {
  const auto it = inputs.find(kCuSeqlens);
  if (it == inputs.end()) return {};
  std::vector<std::int64_t> cu;
  cu.reserve(it->second.data.size());
  for (double x : it->second.data) cu.push_back(static_cast<std::int64_t>(x));
  return cu;
}

}  // namespace ttr
