#include "oracles/validate.hpp"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "oracles/error.hpp"
#include "oracles/threads.hpp"
#include "oracles/varlen.hpp"

namespace ttr {
namespace {

std::string names_of(const std::vector<TensorSpec>& ts) {
  std::string s;
  for (const auto& t : ts) s += (s.empty() ? "" : ", ") + t.name + (t.required ? "" : "?");
  return s;
}

std::string dims_str(const std::vector<std::string>& d) { return "[" + fmt::format("{}", fmt::join(d, ",")) + "]"; }

// Multi-index of flat element i for `shape`, as "[b,t,h,k]".
std::string index_str(std::int64_t i, const Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return "[" + fmt::format("{}", fmt::join(idx, ",")) + "]";
}

}  // namespace

std::string shape_str(const Shape& s) { return "[" + fmt::format("{}", fmt::join(s, ",")) + "]"; }

Shape shape_of(const TensorSpec& t, const Dims& dims) {
  Shape s;
  for (const auto& d : t.dims) s.push_back(dims.at(d));
  return s;
}

std::vector<double> widen(const io::RawTensor& t, const std::string& what) {
  io::check_f64_convertible(t, what);
  std::vector<double> out(t.data.size() / io::dtype_size(t.dtype));
  parallel_blocks(out.size(), kTensorPassGrain,
                  [&](std::size_t b, std::size_t e) { io::to_f64_range(t, b, e, out.data(), what); });
  return out;
}

LayerInputs validate_inputs(const LayerSpec& spec, const io::TensorFile& file, const std::string& source) {
  for (const auto& [name, _] : file.tensors)
    if (!spec.input(name))
      throw InputError(fmt::format("{}: unexpected tensor '{}' (layer '{}' takes: {})", source, name, spec.name,
                                   names_of(spec.inputs)));
  LayerInputs out;
  std::map<std::string, std::string> bound_by;  // dim -> tensor that fixed it
  // Varlen (oracles/varlen.hpp): the offsets first, so that every per-sequence
  // tensor is checked against N = len(cu_seqlens) - 1 instead of B.
  std::vector<std::int64_t> cu;
  if (const auto c = file.tensors.find(kCuSeqlens); c != file.tensors.end() && spec.input(kCuSeqlens)) {
    cu = read_cu_seqlens(c->second, source);
    Tensor<double> t;
    t.shape = {static_cast<std::int64_t>(cu.size())};
    for (std::int64_t x : cu) t.data.push_back(static_cast<double>(x));
    out.tensors.emplace(kCuSeqlens, std::move(t));
  }
  const std::int64_t sequences = cu.empty() ? 0 : static_cast<std::int64_t>(cu.size()) - 1;
  for (const auto& ts : spec.inputs) {
    if (ts.name == kCuSeqlens) continue;  // read above
    const auto it = file.tensors.find(ts.name);
    if (it == file.tensors.end()) {
      if (ts.required)
        throw InputError(fmt::format("{}: missing tensor '{}' {} ({}) required by layer '{}'", source, ts.name,
                                     dims_str(ts.dims), ts.doc, spec.name));
      continue;
    }
    const io::RawTensor& raw = it->second;
    const std::string what = fmt::format("{}: tensor '{}'", source, ts.name);
    // With cu_seqlens, a per-sequence tensor's leading dimension is N, not B.
    const bool per_sequence = !cu.empty() && axis_kind(ts) == AxisKind::per_sequence;
    if (per_sequence && !raw.shape.empty() && raw.shape[0] != sequences)
      throw InputError(fmt::format("{} has shape {}; with cu_seqlens of {} sequence(s) its leading dimension must be "
                                   "N = {} ({} with B -> N)",
                                   what, shape_str(raw.shape), sequences, sequences, dims_str(ts.dims)));
    if (!io::is_floating(raw.dtype))
      throw InputError(fmt::format("{} has dtype {}; expected a floating dtype (F64, F32, BF16, F16)", what,
                                   io::dtype_name(raw.dtype)));
    if (raw.shape.size() != ts.dims.size())
      throw InputError(fmt::format("{} has shape {}; expected rank {} {}", what, shape_str(raw.shape),
                                   ts.dims.size(), dims_str(ts.dims)));
    for (std::size_t d = per_sequence ? 1 : 0; d < ts.dims.size(); ++d) {
      const std::string& sym = ts.dims[d];
      const std::int64_t n = raw.shape[d];
      const std::int64_t min_size = sym == "T" ? 0 : 1;  // empty sequences are legal; empty heads are not
      if (n < min_size)
        throw InputError(fmt::format("{} has shape {}: dimension {} = {} must be >= {}", what,
                                     shape_str(raw.shape), sym, n, min_size));
      const auto b = out.dims.find(sym);
      if (b == out.dims.end()) {
        out.dims[sym] = n;
        bound_by[sym] = ts.name;
      } else if (b->second != n) {
        throw InputError(fmt::format("{} has shape {}; expected {} with {} = {} (from tensor '{}')", what,
                                     shape_str(raw.shape), dims_str(ts.dims), sym, b->second, bound_by[sym]));
      }
    }
    Tensor<double> t;
    t.shape = raw.shape;
    t.data = widen(raw, what);
    const auto bad = [&](double x) { return !std::isfinite(x) || !ts.range.contains(x); };
    if (const std::size_t i = first_where(t.data, bad); i < t.data.size()) {
      const double x = t.data[i];
      const std::int64_t at = static_cast<std::int64_t>(i);
      if (!std::isfinite(x))
        throw InputError(fmt::format("{}: element {} is {}; inputs must be finite", what, index_str(at, t.shape),
                                     std::isnan(x) ? "NaN" : (x > 0 ? "+Inf" : "-Inf")));
      throw InputError(fmt::format("{}: element {} = {} is outside {} ({})", what, index_str(at, t.shape), x,
                                   ts.range.str(), ts.doc));
    }
    if (ts.symmetric) {
      const std::int64_t n = t.shape.back();
      for (std::int64_t blk = 0; blk < t.numel() / (n * n); ++blk)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < i; ++j)
            if (t.data[(blk * n + i) * n + j] != t.data[(blk * n + j) * n + i])
              throw InputError(fmt::format("{}: not symmetric: element {} != its transpose", what,
                                           index_str((blk * n + i) * n + j, t.shape)));
    }
    out.tensors.emplace(ts.name, std::move(t));
  }
  if (!cu.empty()) {
    const auto B = out.dims.find("B"), T = out.dims.find("T");
    if (B != out.dims.end() && B->second != 1)
      throw InputError(fmt::format("{}: tensor '{}' has B = {}; with cu_seqlens the sequences are packed into one "
                                   "batch row (B = 1)",
                                   source, bound_by["B"], B->second));
    if (T != out.dims.end() && cu.back() != T->second)
      throw InputError(fmt::format("{}: tensor '{}': last element [{}] = {} must equal T = {} (from tensor '{}')", source,
                                   kCuSeqlens, cu.size() - 1, cu.back(), T->second, bound_by["T"]));
    out.dims["N+1"] = static_cast<std::int64_t>(cu.size());
  }
  return out;
}

}  // namespace ttr
