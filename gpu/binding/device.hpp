// The host side of the CUDA kernels' bindings (gpu/<layer>/binding.cpp): the
// device's status and the conversions every binding shares — layer tensors (as
// double, by their docs/layers.md names) to the dtype a model passes, padded to
// the kernels' tile shapes, and back. Ordinary C++ (no CUDA header); the bodies
// that touch the device compile only with TTR_WITH_CUDA, so a build without the
// kernels still links every binding and reports "not built".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/arith.hpp"
#include "reference/core/tensor.hpp"

#ifdef TTR_WITH_CUDA
#include "gpu/api.hpp"
#endif

namespace ttr::device {

struct Status {
  bool built = false;   // compiled with TTR_CUDA
  int devices = 0;
  std::string device;   // name of device 0
  bool usable() const { return built && devices > 0; }
  std::string reason() const;  // "skipped: no CUDA device", "skipped: CUDA kernels not built ...", or ""
};
Status status();

// InputError unless dtype is bf16 or fp32 (the kernels' dtypes); true for bf16.
bool kernel_dtype_is_bf16(Tier dtype);
// Thrown by every binding in a build without the CUDA kernels.
[[noreturn]] void throw_not_built();

int pad16(std::int64_t x);
std::vector<float> to_float(const Tensor<double>& t);
// float → bf16 → float, round to nearest even (as Mixed16Policy<BF16Format>::narrow).
float round_bf16(float x);

#ifdef TTR_WITH_CUDA
gpu::DType dtype_of(bool bf16);
// A [rows, F] fp32 tensor padded with zeros to [rows, Fp] and uploaded as the
// dtype. Zero padding is exact for the kernels bound here: zero key/query
// coordinates add exact zeros to every sum and are never written; zero value
// columns stay zero.
gpu::DeviceBuffer upload(const std::vector<float>& x, std::int64_t rows, std::int64_t F, int Fp, bool bf16);
gpu::DeviceBuffer upload_fp32(const std::vector<float>& f);
// A [BH, R, C] fp32 state padded to [BH, Rp, Cp].
gpu::DeviceBuffer upload_state(const std::vector<float>& s, std::int64_t BH, int R, int C, int Rp, int Cp);
// A [rows, F] tensor downloaded as double from the dtype (bf16) or fp32.
Tensor<double> download(const gpu::DeviceBuffer& buf, Shape shape, bool bf16);
// A [rows, Fp] device tensor (dtype) as [..., F] doubles: the padding dropped.
Tensor<double> download_unpadded(const gpu::DeviceBuffer& buf, Shape shape, int Fp, bool bf16);
// The batch as the kernels take it (gpu/core/seqs.cuh). Fixed length: B and T of
// q. FLA's varlen (the inputs hold cu_seqlens; q is [1, packed, H, K]): B = the
// sequences, T = the longest one (at least 1: the kernels size their grids and
// workspaces by it), the offsets uploaded, `packed` = the tokens on the packed axis.
// Per-sequence tensors (h0, ht, dh0, ...) then have B rows.
struct KernelBatch {
  std::int64_t B = 0, T = 0, packed = 0;
  gpu::DeviceBuffer cu;  // empty without varlen
  const std::int64_t* offsets() const { return static_cast<const std::int64_t*>(cu.get()); }
};
KernelBatch kernel_batch(const TensorMap<double>& in);
// A [BH, Rp, Cp] fp32 device state as [B, H, R, C] doubles.
Tensor<double> download_state(const gpu::DeviceBuffer& buf, std::int64_t B, std::int64_t H, int R, int C, int Rp,
                              int Cp);
#endif

}  // namespace ttr::device
