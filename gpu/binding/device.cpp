#include "gpu/binding/device.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/varlen.hpp"

namespace ttr::device {

std::string Status::reason() const {
  if (!built) return "skipped: CUDA kernels not built (configure with TTR_CUDA=ON)";
  if (devices == 0) return "skipped: no CUDA device";
  return "";
}

bool kernel_dtype_is_bf16(Tier dtype) {
  if (dtype != Tier::bf16 && dtype != Tier::fp32)
    throw InputError(fmt::format("the CUDA kernels run in bf16 or fp32, not {}", tier_name(dtype)));
  return dtype == Tier::bf16;
}

void throw_not_built() {
  throw InputError("this ttrcheck was built without the CUDA kernels (configure with TTR_CUDA=ON)");
}

int pad16(std::int64_t x) { return static_cast<int>((x + 15) / 16 * 16); }

std::vector<float> to_float(const Tensor<double>& t) {
  std::vector<float> f(t.data.size());
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(t.data[i]);
  return f;
}

namespace {
std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
}  // namespace

float round_bf16(float x) { return bf16_value(bf16_bits(x)); }

#ifndef TTR_WITH_CUDA

Status status() { return {}; }

#else

Status status() {
  Status s;
  s.built = true;
  s.devices = gpu::device_count();
  if (s.devices > 0) s.device = gpu::device_name(0);
#ifdef TTR_CUDA_CHECK_BUILD
  // cmake/Cuda.cmake: a build without a GPU compiles the kernels as a check. They
  // are correct but slow; whoever runs them on a GPU is told so wherever the
  // device is named (gate output, run metadata).
  if (s.devices > 0) s.device += " (kernels from a TTR_CUDA=CHECK build: device code unoptimised)";
#endif
  return s;
}

gpu::DType dtype_of(bool bf16) { return bf16 ? gpu::DType::bf16 : gpu::DType::fp32; }

gpu::DeviceBuffer upload(const std::vector<float>& x, std::int64_t rows, std::int64_t F, int Fp, bool bf16) {
  const std::size_t n = static_cast<std::size_t>(rows) * Fp;
  gpu::DeviceBuffer buf(n * (bf16 ? 2 : 4));
  if (bf16) {
    std::vector<std::uint16_t> h(n, 0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < F; ++f) h[r * Fp + f] = bf16_bits(x[r * F + f]);
    buf.upload(h.data(), n * 2);
  } else {
    std::vector<float> h(n, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < F; ++f) h[r * Fp + f] = x[r * F + f];
    buf.upload(h.data(), n * 4);
  }
  return buf;
}

KernelBatch kernel_batch(const TensorMap<double>& in) {
  const Tensor<double>& q = in.at("q");
  KernelBatch kb;
  const std::vector<std::int64_t> cu = cu_seqlens_of(in);
  if (cu.empty()) {
    kb.B = q.dim(0), kb.T = q.dim(1), kb.packed = kb.B * kb.T;
    return kb;
  }
  kb.B = static_cast<std::int64_t>(cu.size()) - 1;
  kb.packed = cu.back();
  kb.T = 1;
  for (std::size_t n = 0; n + 1 < cu.size(); ++n) kb.T = std::max(kb.T, cu[n + 1] - cu[n]);
  kb.cu = gpu::DeviceBuffer(cu.size() * sizeof(std::int64_t));
  kb.cu.upload(cu.data(), cu.size() * sizeof(std::int64_t));
  return kb;
}

gpu::DeviceBuffer upload_fp32(const std::vector<float>& f) {
  gpu::DeviceBuffer b(f.size() * 4);
  b.upload(f.data(), f.size() * 4);
  return b;
}

gpu::DeviceBuffer upload_state(const std::vector<float>& s, std::int64_t BH, int R, int C, int Rp, int Cp) {
  std::vector<float> h(static_cast<std::size_t>(BH) * Rp * Cp, 0.0f);
  for (std::int64_t b = 0; b < BH; ++b)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) h[(b * Rp + i) * Cp + j] = s[(b * R + i) * C + j];
  return upload_fp32(h);
}

Tensor<double> download(const gpu::DeviceBuffer& buf, Shape shape, bool bf16) {
  Tensor<double> t(std::move(shape), 0.0);
  if (bf16) {
    std::vector<std::uint16_t> h(t.data.size());
    buf.download(h.data(), h.size() * 2);
    for (std::size_t i = 0; i < h.size(); ++i) t.data[i] = bf16_value(h[i]);
  } else {
    std::vector<float> h(t.data.size());
    buf.download(h.data(), h.size() * 4);
    for (std::size_t i = 0; i < h.size(); ++i) t.data[i] = h[i];
  }
  return t;
}

Tensor<double> download_unpadded(const gpu::DeviceBuffer& buf, Shape shape, int Fp, bool bf16) {
  const std::int64_t F = shape.back();
  Shape padded = shape;
  padded.back() = Fp;
  const Tensor<double> p = download(buf, padded, bf16);
  Tensor<double> t(std::move(shape), 0.0);
  const std::int64_t rows = F == 0 ? 0 : static_cast<std::int64_t>(t.data.size()) / F;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < F; ++j) t.data[r * F + j] = p.data[r * Fp + j];
  return t;
}

Tensor<double> download_state(const gpu::DeviceBuffer& buf, std::int64_t B, std::int64_t H, int R, int C, int Rp,
                              int Cp) {
  const Tensor<double> p = download(buf, {B * H, Rp, Cp}, false);
  Tensor<double> t({B, H, R, C}, 0.0);
  for (std::int64_t b = 0; b < B * H; ++b)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) t.data[(b * R + i) * C + j] = p.data[(b * Rp + i) * Cp + j];
  return t;
}

#endif

}  // namespace ttr::device
