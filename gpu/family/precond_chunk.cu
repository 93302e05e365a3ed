// The preconditioned delta family (PGDN/PKDA, PDN eqs. (6) and (9)): the chunk
// kernels with the residual read along k and the write along k̃ = B_t ⊙ k_t, so
// the UT matrix is the asymmetric tril(Diag(β) [K K̃ᵀ ⊙ Γ], −1). The diagonal
// preconditioner that produces k̃ is either the caller's or atk_write_keys
// (gpu/family/atk_chunk.cu). The decay is the caller's (a.decay).
#include <cuda_runtime.h>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"

namespace ttr::gpu {
void precond_delta_chunk_forward(DeltaArgs a, const void* k_tilde) {
  a.w = k_tilde;
  a.kaczmarz = false;
  delta_chunk_forward(a);
}

void precond_delta_chunk_forward(DeltaArgs a, AtkArgs p) {
  validate(a);
  p.B = a.B, p.T = a.T, p.H = a.H, p.K = a.K, p.dtype = a.dtype, p.key_dtype = a.dtype, p.k = a.k,
  p.cu_seqlens = a.cu_seqlens, p.stream = a.stream;
  auto stream = static_cast<cudaStream_t>(a.stream);
  // B·T rows: with varlen (B sequences, T the longest) at least the packed tokens.
  const std::size_t bytes = static_cast<std::size_t>(a.B) * a.T * a.H * a.K * (a.dtype == DType::bf16 ? 2 : 4);
  void* kt = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(&kt, bytes, stream));
  p.k_tilde = kt;
  try {
    atk_write_keys(p);
    precond_delta_chunk_forward(a, kt);
  } catch (...) {
    (void)cudaFreeAsync(kt, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(kt, stream));
}
}  // namespace ttr::gpu
