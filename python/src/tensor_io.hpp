// Tensors between Python and ttrcheck's C++ core: the Python side (ttrcheck/_arrays.py)
// turns NumPy arrays and torch tensors into (name, dtype, shape, little-endian bytes),
// the safetensors spelling of a tensor; here they become an io::TensorFile, the very
// structure `ttrcheck` reads from disk, so every validation and error message is the
// CLI's. bf16 travels as its raw 16 bits (DLPack and NumPy have no standard bf16).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "oracles/io/safetensors.hpp"

namespace ttr::python {

namespace nb = nanobind;

using PyTensor = std::tuple<std::string, std::string, std::vector<std::int64_t>, nb::bytes>;
using Metadata = std::map<std::string, std::string>;

// InputError "<source>: tensor '<name>' ..." for an unknown dtype spelling or a
// byte count that does not match dtype and shape (the Python side checks too).
io::TensorFile to_file(const std::vector<PyTensor>& tensors, const Metadata& metadata, const std::string& source);
// The tensors back, in name order; metadata separately.
std::vector<PyTensor> from_file(const io::TensorFile& f);

}  // namespace ttr::python
