// Host side of gpu/api.hpp: argument validation, device queries, buffers.
#include <cuda_runtime.h>

#include <string>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"

namespace ttr::gpu {

void validate(const DeltaArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu delta kernel: " + m); };
  if (a.B < 1 || a.T < 1 || a.H < 1) fail("B, T and H must be at least 1");
  if (static_cast<long long>(a.B) * a.H > 65535)
    fail("B·H = " + std::to_string(static_cast<long long>(a.B) * a.H) + " (the launch grids take at most 65535 heads)");
  for (auto [name, x] : {std::pair{"K", a.K}, std::pair{"V", a.V}})
    if (x < 16 || x > 128 || x % 16 != 0)
      fail(std::string(name) + " = " + std::to_string(x) + " (need a multiple of 16 in [16, 128])");
  if (!a.q || !a.k || !a.v || !a.beta || !a.o) fail("q, k, v, beta and o are required");
  if (a.decay != Decay::none && !a.g) fail("g is required for scalar and per-key decay");
}

void validate(const DeltaBackwardArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu delta backward kernel: " + m); };
  DeltaArgs f = a.fwd;
  f.o = a.dv;  // the forward's shape rules; its o is not written here
  validate(f);
  if (f.w && f.w != f.k && !a.atk) fail("a write key w != k needs the preconditioner's adjoint (atk)");
  if (a.atk) {
    if (!f.w) fail("atk needs the write key k̃ as fwd.w");
    if (f.kaczmarz) fail("atk and kaczmarz do not go together");
    if (f.decay != Decay::scalar) fail("atk takes a scalar gate g (the preconditioned CUDA layer is PGDN's)");
    const AtkArgs& p = a.atk->fwd;
    if (p.B != f.B || p.T != f.T || p.H != f.H || p.K != f.K || p.cu_seqlens != f.cu_seqlens)
      fail("atk: B, T, H, K and cu_seqlens must be the core's");
    if (!p.k || !p.g_atk || !p.beta_atk || !p.center) fail("atk: k, g_atk, beta_atk and center are required");
    if (!a.atk->dg_atk || !a.atk->dbeta_atk) fail("atk: dg_atk and dbeta_atk are required");
  }
  if (!a.do_ || !a.dq || !a.dk || !a.dv || !a.dbeta) fail("do, dq, dk, dv and dbeta are required");
  if (f.decay != Decay::none && !a.dg) fail("dg is required for scalar and per-key decay");
  if ((a.q_raw == nullptr) != (a.k_raw == nullptr)) fail("q_raw and k_raw go together (use_qk_l2norm_in_kernel)");
}

void validate(const GkaArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu gka kernel: " + m); };
  if (a.B < 1 || a.T < 1 || a.H < 1) fail("B, T and H must be at least 1");
  if (static_cast<long long>(a.B) * a.H > 65535)
    fail("B·H = " + std::to_string(static_cast<long long>(a.B) * a.H) + " (the launch grids take at most 65535 heads)");
  for (auto [name, x] : {std::pair{"K", a.K}, std::pair{"V", a.V}})
    if (x < 16 || x > 128 || x % 16 != 0)
      fail(std::string(name) + " = " + std::to_string(x) + " (need a multiple of 16 in [16, 128])");
  if (!a.q || !a.k || !a.v || !a.g || !a.o) fail("q, k, v, g and o are required");
  if (a.iters < 0) fail("iters = " + std::to_string(a.iters) + " (need ≥ 0)");
  if (a.fixed_lambda ? !(a.lambda_value > 0.0f) : !(a.a > 0.0f)) fail("need a > 0, or a fixed lambda > 0");
}

void validate(const GkaBackwardArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu gka backward kernel: " + m); };
  GkaArgs f = a.fwd;
  f.o = a.dv;  // the forward's shape rules; its o is not written here
  validate(f);
  if (!a.do_ || !a.dq || !a.dk || !a.dv || !a.dg) fail("do, dq, dk, dv and dg are required");
  if (f.beta && !a.dbeta) fail("dbeta is required when beta is given");
  if (f.alpha && !a.dalpha) fail("dalpha is required when alpha is given");
  if ((a.q_raw == nullptr) != (a.k_raw == nullptr)) fail("q_raw and k_raw go together (use_qk_l2norm_in_kernel)");
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for the caller
    return 0;
  }
  return n;
}

std::string device_name(int device) {
  if (device_count() <= device) return {};
  cudaDeviceProp p{};
  TTR_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : n_(bytes) {
  if (bytes) TTR_CUDA_CHECK(cudaMalloc(&p_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) (void)cudaFree(p_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) (void)cudaFree(p_);
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > n_) throw std::invalid_argument("DeviceBuffer::upload: more bytes than the buffer holds");
  TTR_CUDA_CHECK(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice));
}
void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > n_) throw std::invalid_argument("DeviceBuffer::download: more bytes than the buffer holds");
  TTR_CUDA_CHECK(cudaMemcpy(host, p_, bytes, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill_bytes(unsigned char byte) {
  if (n_) TTR_CUDA_CHECK(cudaMemset(p_, byte, n_));
}
void synchronize() { TTR_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace ttr::gpu
