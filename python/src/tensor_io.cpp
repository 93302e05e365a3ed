#include "tensor_io.hpp"

#include <cstring>
#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr::python {

io::TensorFile to_file(const std::vector<PyTensor>& tensors, const Metadata& metadata, const std::string& source) {
  io::TensorFile f;
  f.metadata = metadata;
  for (const auto& [name, dtype, shape, data] : tensors) {
    const std::string what = fmt::format("{}: tensor '{}'", source, name);
    const auto d = io::parse_dtype(dtype);
    if (!d) throw InputError(fmt::format("{} has dtype {}; expected a floating dtype (F64, F32, BF16, F16)", what, dtype));
    std::int64_t n = 1;
    for (const std::int64_t s : shape) {
      if (s < 0) throw InputError(fmt::format("{} has a negative dimension", what));
      n *= s;
    }
    if (static_cast<std::size_t>(n) * io::dtype_size(*d) != data.size())
      throw InputError(fmt::format("{}: {} bytes for {} elements of {}", what, data.size(), n, dtype));
    if (f.tensors.count(name)) throw InputError(fmt::format("{} is given twice", what));
    io::RawTensor t;
    t.dtype = *d;
    t.shape = shape;
    t.data.resize(data.size());
    if (data.size()) std::memcpy(t.data.data(), data.c_str(), data.size());
    f.tensors.emplace(name, std::move(t));
  }
  return f;
}

std::vector<PyTensor> from_file(const io::TensorFile& f) {
  std::vector<PyTensor> out;
  for (const auto& [name, t] : f.tensors)
    out.emplace_back(name, std::string(io::dtype_name(t.dtype)), t.shape,
                     nb::bytes(reinterpret_cast<const char*>(t.data.data()), t.data.size()));
  return out;
}

}  // namespace ttr::python
