// Host API of ttrcheck's CUDA kernels (issue 7): the delta-rule family's chunk
// forward (chunk size 64, UT transform, inter-chunk state passing, intra-chunk
// outputs — the algorithm of reference/family/delta_chunk.hpp, written the way a
// tensor-core kernel is) and its fused-recurrent forward (one token at a time).
//
// Layout is FLA's: q, k, w [B,T,H,K]; v, o [B,T,H,V]; beta [B,T,H]; g [B,T,H]
// (scalar decay) or [B,T,H,K] (per-key decay); h0, ht [B,H,K,V]. Activations
// (q, k, w, v, beta, o) are in `dtype`; gates and states are fp32, as model code
// passes them and as FLA returns ht. All pointers are device pointers.
//
// Every CUDA call's status is checked; a failure throws ttr::gpu::CudaError
// naming the call. This header needs no CUDA header: it is included by host code
// compiled with the ordinary C++ compiler.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "reference/core/mutant_id.hpp"

namespace ttr::gpu {

enum class DType { bf16, fp32 };
enum class Decay { none, scalar, per_key };

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The delta rule with decay (reference/family/delta.hpp):
//   S̄_t = Diag(d_t) S_{t-1};  δ_t = β_t (v_t − S̄_tᵀ k_t);  S_t = S̄_t + w_t δ_tᵀ;  o_t = scale · S_tᵀ q_t
// d_t = 1 (none), e^{g_t} (scalar), e^{g_t} per key row (per_key). w = k unless
// a separate write key is given (precond_*: k̃ = B_t ⊙ k_t, PDN eq. (9)).
// kaczmarz: β_t is replaced by β_t/(‖k_t‖² + eps) (KLA-Z eq. (3)) inside the kernel,
// computed in fp32 from the key as stored and then stored in `dtype` like any β.
struct DeltaArgs {
  int B = 0, T = 0, H = 0, K = 0, V = 0;
  DType dtype = DType::bf16;
  Decay decay = Decay::scalar;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* w = nullptr;     // write key; nullptr: w = k
  const void* v = nullptr;
  const void* beta = nullptr;  // [B,T,H]
  const float* g = nullptr;    // log decay; nullptr only with Decay::none
  const float* h0 = nullptr;   // optional initial state
  float* ht = nullptr;         // optional final state
  void* o = nullptr;
  float scale = 1.0f;
  bool kaczmarz = false;
  float kaczmarz_eps = 1e-6f;
  // FLA's varlen (docs/varlen.md; gpu/core/seqs.cuh): device [B+1] offsets, then B is
  // the number of sequences, T the longest sequence's length, the activations and
  // gates are [1, packed_tokens, H, ·] (packed_tokens = cu[B], given by the host) and
  // h0, ht [B, H, K, V]. nullptr: fixed length.
  const std::int64_t* cu_seqlens = nullptr;
  std::int64_t packed_tokens = 0;
  void* stream = nullptr;      // cudaStream_t (nullptr: the legacy default stream)
  // Optional, chunk forward only: where to keep each chunk's narrowed UT inverse
  // T = (I + A)⁻¹ (FLA's A, which its forward returns for the backward), in `dtype`,
  // delta_ut_inverse_bytes(*this) bytes; DeltaBackwardArgs::ut_inverse reads it back.
  void* ut_inverse_out = nullptr;
};
// The size of DeltaArgs::ut_inverse_out: B·H·⌈T/64⌉ tiles of 64 × 64 in `dtype` (an
// opaque layout; under varlen B counts sequences and T is the longest one's length).
std::size_t delta_ut_inverse_bytes(const DeltaArgs& a);

// Shapes the kernels accept: K, V multiples of 16 in [16, 128], T ≥ 1, B·H ≤ 65535.
// Throws std::invalid_argument naming the offending field otherwise.
void validate(const DeltaArgs& a);

// Chunkwise forward, chunk size 64 (three launches: UT transform per chunk,
// state passing over chunks, outputs per chunk). Allocates its workspace on the
// stream (stream-ordered allocation) and frees it before returning.
void delta_chunk_forward(const DeltaArgs& a);
// Sequential forward (FLA: fused_recurrent): one token at a time, state in registers.
void delta_sequential_forward(const DeltaArgs& a);

// The fused-recurrent backward (gpu/family/delta_sequential_backward.cu): the
// adjoint recurrence of reference/family/delta_backward.hpp, token by token, with
// the layer's chain rule (read + write key, Kaczmarz, L2 norm of q and k) after it.
// `fwd` holds the forward's inputs (its o and ht are not used); with
// use_qk_l2norm_in_kernel, fwd.q and fwd.k are the normalised rows and q_raw,
// k_raw the rows as given (dq, dk are then the gradients of the raw rows).
// A write key w ≠ k (the preconditioned layers: fwd.w = k̃) needs `atk`: the write
// key's gradient dk̃ goes through the preconditioner's adjoint and joins dk.
// Gradients: dq, dk [B,T,H,K], dv [B,T,H,V], dbeta [B,T,H] in
// `dtype`; dg fp32 of g's shape (required unless Decay::none); dh0 [B,H,K,V] fp32,
// optional. The workspace is allocated on the stream and freed before returning.
struct AtkBackwardArgs;
struct DeltaBackwardArgs {
  DeltaArgs fwd;
  const void* do_ = nullptr;   // [B,T,H,V], `dtype`
  const float* dht = nullptr;  // optional [B,H,K,V]
  const void* q_raw = nullptr;  // optional: use_qk_l2norm_in_kernel (both or neither)
  const void* k_raw = nullptr;
  float l2_eps = 1e-6f;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* dbeta = nullptr;
  float* dg = nullptr;
  float* dh0 = nullptr;
  // A catalogued bug planted in the chunk backward (gate/mutants.hpp, its `cuda`
  // entries; builds with TTR_CUDA_MUTANTS, gpu/core/mutant.cuh). The sequential
  // backward never reads it: the GPU's reference, like the CPU's.
  Mutant mutant = Mutant::none;
  // The preconditioned layers (PGDN): fwd.w = k̃ from atk_write_keys(atk->fwd), and
  // dk = dk_read + the preconditioner's part from dk̃ (gpu/family/atk_backward.cu).
  const AtkBackwardArgs* atk = nullptr;
  // Optional, chunk backward only: the UT inverses the chunk forward kept
  // (DeltaArgs::ut_inverse_out) on these inputs. Given, the backward reads them instead
  // of forming A and inverting it again, as FLA's backward reads its forward's A; the
  // gradients are the same bits either way (the same kernel made them).
  const void* ut_inverse = nullptr;
};
// Shapes as validate(DeltaArgs); throws std::invalid_argument naming the field.
void validate(const DeltaBackwardArgs& a);
void delta_sequential_backward(const DeltaBackwardArgs& a);
// The chunk backward (chunk 64; gpu/family/delta_chunk_backward.cu): the algorithm
// and narrowing points of reference/family/delta_chunk_backward.hpp, the same
// arguments and gradients. Seven launches (FLA's chunk_gated_delta_rule_bwd
// structure, parallel over chunks but for the two state passes); the workspace
// (0.67 GB at B = 4, T = 4096, H = 8, K = V = 128, bf16; docs/gpu.md) is allocated
// on the stream and freed before returning.
void delta_chunk_backward(const DeltaBackwardArgs& a);
// The same algorithm as one block per (b, h), sequential over chunks, fp32 FMA
// only (gpu/family/delta_chunk_backward_reference.cu): the plain GPU reference
// the staged kernel was written against, for benchmarks and comparisons.
void delta_chunk_backward_reference(const DeltaBackwardArgs& a);

// Row-wise L2 normalisation as FLA's use_qk_l2norm_in_kernel (reference/family/
// l2norm.hpp): y = x / sqrt(‖x‖² + eps), computed in fp32 from x as stored (`dtype`),
// written in `dtype` to y and, when y_fp32 is given, in fp32 there too. x == y is allowed.
void l2norm_rows(DType dtype, const void* x, void* y, float* y_fp32, std::int64_t rows, int F, float eps,
                 void* stream = nullptr);

// PGDN's diagonal preconditioner (PDN §3.3, eq. (9) as FLA computes it;
// reference/family/atk_chunk.hpp), chunkwise (64):
//   A_t = e^{g_atk,t} A_{t−1} + β_atk,t (k_t ⊙ k_t),  r_t = log(A_t + eps) − c_h,
//   k̃_t = exp(−log(x) · r_t/(1 + |r_t|)) ⊙ k_t   (B_t ∈ [1/x, x]),
// all in fp32; k̃ written in `dtype` (the chunk kernel's write key w), the final A fp32.
struct AtkArgs {
  int B = 0, T = 0, H = 0, K = 0;
  DType key_dtype = DType::fp32;  // how k is stored (fp32: e.g. l2norm_rows' y_fp32)
  const void* k = nullptr;        // [B,T,H,K]
  const float* g_atk = nullptr;   // [B,T,H]
  const float* beta_atk = nullptr;
  const float* A0 = nullptr;      // optional [B,H,K]
  const float* center = nullptr;  // [H]: c per head (log_atk_scale)
  float log_x = 0.405465108f;     // log(1.5)
  float eps = 1e-6f;
  DType dtype = DType::bf16;      // of k_tilde
  void* k_tilde = nullptr;        // [B,T,H,K]
  float* A_final = nullptr;       // optional [B,H,K]
  const std::int64_t* cu_seqlens = nullptr;  // varlen, as DeltaArgs
  void* stream = nullptr;
};
void atk_write_keys(const AtkArgs& a);

// The preconditioner's adjoint in a preconditioned layer's backward (PDN App. D,
// Fig. 9 (b), step 5; reference/family/atk_backward.hpp, dg_atk as the reverse
// running sum of the log-gate gradients, as the chunk backward form and FLA's
// chunk_atk_bwd form it): from the write key's gradient dk̃ (which the delta
// backward kernels compute and hand over) and the optional cotangent of the final
// A state, the gradients of g_atk, beta_atk, A0 and the centre, and the key's part
// dk_atk (added to dk before the L2 norm's chain rule). All fp32, A_{t−1} recomputed
// by the sequential recurrence; every sum in a fixed order.
struct AtkBackwardArgs {
  AtkArgs fwd;                      // the forward's inputs (k_tilde and A_final are not read)
  const float* dA_final = nullptr;  // optional [B,H,K]: the cotangent of the final A state
  float* dg_atk = nullptr;          // [B,T,H] fp32, required
  float* dbeta_atk = nullptr;       // [B,T,H] fp32, required
  float* dA0 = nullptr;             // optional [B,H,K] fp32 (meaningful with fwd.A0)
  float* dcenter = nullptr;         // optional [H] fp32: summed over sequences, tokens, channels
};

// The preconditioned chunk forward (PGDN/PKDA, PDN eqs. (6), (9)): the chunk
// kernels with the residual read along k and the write along k̃ = B_t ⊙ k_t, so
// the UT matrix is the asymmetric tril(Diag(β) [K K̃ᵀ ⊙ Γ], −1); a.decay as given.
void precond_delta_chunk_forward(DeltaArgs a, const void* k_tilde);
// The same with k̃ computed on the device from a.k (atk_write_keys: p.k, p.K, p.dtype
// and the shapes are taken from `a`; p.A_final optional).
void precond_delta_chunk_forward(DeltaArgs a, AtkArgs p);

// Kalman linear attention (KLA-K §4; docs/layers/kla_kalman.md), per slot (n, d):
//   φ = k_n² λv_d;  Λ_t = Λ_{t−1}/(ā² + p̄Λ_{t−1}) + φ;  η_t = ā/(ā² + p̄Λ_{t−1}) η_{t−1} + k_n λv_d v_d;
//   o_{t,d} = scale Σ_n q_n η/Λ;  o_var_{t,d} = scale² Σ_n q_n²/Λ;  lambda_T, eta_T the final states.
// Layout: q, k [B,T,H,N]; v, o, o_var [B,T,H,D] in `dtype`; lambda_v [B,T,H,D],
// a_bar, p_bar [H,N,D], lambda_init, eta_init, lambda_T, eta_T [B,H,N,D] fp32.
struct KlaArgs {
  int B = 0, T = 0, H = 0, N = 0, D = 0;
  DType dtype = DType::bf16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* lambda_v = nullptr;
  const float* a_bar = nullptr;
  const float* p_bar = nullptr;
  const float* lambda_init = nullptr;  // optional; nullptr: lambda0 everywhere
  const float* eta_init = nullptr;     // optional; nullptr: 0
  float lambda0 = 1.0f;
  float scale = 1.0f;
  void* o = nullptr;
  void* o_var = nullptr;
  float* lambda_T = nullptr;
  float* eta_T = nullptr;
  const std::int64_t* cu_seqlens = nullptr;  // varlen, as DeltaArgs (states [B,H,N,D], B sequences)
  void* stream = nullptr;
};
// Shapes the kernels accept: B, T, H, D ≥ 1, 1 ≤ N ≤ 128; every pointer but the
// initial states required. Throws std::invalid_argument naming the field.
void validate(const KlaArgs& a);
// Chunked two-level scans (chunks of 64): Möbius precision scan, then affine
// information-mean scan (gpu/kla_kalman/scan.cu). Five launches; workspace
// allocated on the stream and freed before returning. Every quantity of both
// scans carried as an fp32 mantissa with an int32 exponent (form `chunk`,
// docs/kla-scaled.md): finite wherever the true outputs are.
void kla_kalman_chunk_forward(const KlaArgs& a);
// The same in the paper's representation (form `chunk_unscaled`): plain floats,
// non-finite once Λ_t leaves fp32's range (p̄ = 0 and small ā).
void kla_kalman_chunk_unscaled_forward(const KlaArgs& a);
// The sequential form (FLA: fused_recurrent), one token at a time.
void kla_kalman_sequential_forward(const KlaArgs& a);

// The chunked-scan backward (gpu/kla_kalman/scan_backward.cu): reverse mode of the
// scaled chunk forward, the algorithm and narrowing points of the CPU `chunk`
// backward form (reference/kla_kalman/scan_backward.hpp): the forward's scans give
// Λ_t, η_t; the state adjoints are two affine scans over the reversed sequence on
// the forward's chunk grid (mean adjoint G^μ, then precision adjoint G^P); the
// per-token gradients are scaled products summed in scaled arithmetic. `fwd` holds
// the forward's inputs (its o, o_var, lambda_T, eta_T are not used). Cotangents
// do [B,T,H,D] and optional do_var in `dtype`, optional dlambda_T, deta_T
// [B,H,N,D] fp32. Gradients: dq, dk [B,T,H,N] and dv [B,T,H,D] in `dtype`;
// dlambda_v [B,T,H,D], da_bar, dp_bar [H,N,D] (summed over the batch),
// dlambda_init, deta_init [B,H,N,D] fp32 (the last two optional). The workspace
// (~52 bytes per token and slot, plus the forward's carries) is allocated on the
// stream and freed before returning.
struct KlaBackwardArgs {
  KlaArgs fwd;
  const void* do_ = nullptr;
  const void* do_var = nullptr;      // optional
  const float* dlambda_T = nullptr;  // optional
  const float* deta_T = nullptr;     // optional
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dlambda_v = nullptr;
  float* da_bar = nullptr;
  float* dp_bar = nullptr;
  float* dlambda_init = nullptr;  // optional
  float* deta_init = nullptr;     // optional
};
// Shapes as validate(KlaArgs); throws std::invalid_argument naming the field.
void validate(const KlaBackwardArgs& a);
void kla_kalman_chunk_backward(const KlaBackwardArgs& a);

// Gated KalmaNet (GKA eqs. (3), (4), (CH), Alg. 1; docs/layers/gka.md, solver = chebyshev):
//   H_t = γ_t H_{t−1} + β_t k_t k_tᵀ;  S_t = γ_t S_{t−1} + β_t k_t v_tᵀ;  λ_t = a‖H_t‖_F (or a fixed λ);
//   x_t = `iters` Chebyshev steps on (H_t + λ_t I) x = scale·q_t (L = ‖H_t‖_F + λ_t, μ = λ_t,
//   ξ_{−1} = 0, ξ_0 = 2 scale·q_t/(L + μ), weights from ω_0 = omega0);
//   q̃_t = scale·q_t + α_t (x_t − scale·q_t) (α absent: x_t);  o_t = S_tᵀ q̃_t;  where λ_t = 0: x_t = 0.
// Layout: q, k [B,T,H,K], v, o [B,T,H,V] in `dtype`; g (log γ), beta, alpha, lambda, fro
// [B,T,H] fp32; h0, ht [B,H,K,V] and hkk0, hkk [B,H,K,K] fp32. Gates and states fp32,
// as model code passes them (the CPU chunk form keeps them in acc).
struct GkaArgs {
  int B = 0, T = 0, H = 0, K = 0, V = 0;
  DType dtype = DType::bf16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;   // optional write gate (nullptr: 1)
  const float* alpha = nullptr;  // optional α-connection (nullptr: q̃ = x)
  const float* h0 = nullptr;     // optional S_0
  const float* hkk0 = nullptr;   // optional H_0 (symmetric positive semidefinite)
  void* o = nullptr;
  float* ht = nullptr;           // optional final S
  float* hkk = nullptr;          // optional final H
  float* lambda = nullptr;       // optional diagnostics λ_t, ‖H_t‖_F
  float* fro = nullptr;
  float scale = 1.0f;
  float a = 0.02f;               // adaptive ridge strength (eq. (4))
  bool fixed_lambda = false;
  float lambda_value = 0.0f;     // the fixed λ (> 0) when fixed_lambda
  int iters = 30;
  float omega0 = 2.0f;
  const std::int64_t* cu_seqlens = nullptr;  // varlen, as DeltaArgs (states [B,H,·,·], B sequences)
  std::int64_t packed_tokens = 0;            // with cu_seqlens: cu[B]
  void* stream = nullptr;
};
// Shapes the kernels accept: K, V multiples of 16 in [16, 128], T ≥ 1, B·H ≤ 65535, iters ≥ 0,
// a > 0 (or a fixed λ > 0). Throws std::invalid_argument naming the field.
void validate(const GkaArgs& a);
// Chunkwise forward, chunk 64 (GKA §4.2; gpu/gka/chunk.cu): state pass, per-chunk
// Chebyshev solve with H_c ξ from the chunk state plus the chunk's keys and
// ‖H_c‖_F by eq. (5), readout. Workspace allocated on the stream and freed.
void gka_chunk_forward(const GkaArgs& a);
// The sequential form (FLA: fused_recurrent), one token at a time with H and S in shared memory.
void gka_sequential_forward(const GkaArgs& a);

// The recurrent backward (gpu/gka/sequential_backward.cu), solver = chebyshev: the
// adjoint of gka_sequential_forward token by token (reference/gka/backward.hpp, the
// Chebyshev solve by the reverse pass over its stored iterates, the gradient through
// λ_t = a‖H_t‖_F and the bounds L, μ, the α-connection and the gates). `fwd` holds
// the forward's inputs and options (its o, ht, hkk, lambda, fro are not used); with
// use_qk_l2norm_in_kernel, fwd.q and fwd.k are the normalised rows and q_raw, k_raw
// the rows as given. Gradients: dq, dk [B,T,H,K], dv [B,T,H,V] in `dtype`; dg, and
// dbeta / dalpha when fwd.beta / fwd.alpha are given, [B,T,H] fp32; dh0 [B,H,K,V]
// and dhkk0 [B,H,K,K] (the symmetric part of the gradient) fp32, optional. The
// workspace ((⌈T/64⌉ + 65)·K(K+V) + (2·iters + 3)·K floats per head, plus dq, dk in
// fp32) is allocated on the stream and freed before returning.
struct GkaBackwardArgs {
  GkaArgs fwd;
  const void* do_ = nullptr;    // [B,T,H,V], `dtype`
  const float* dht = nullptr;   // optional [B,H,K,V]
  const float* dhkk = nullptr;  // optional [B,H,K,K]
  const void* q_raw = nullptr;  // optional: use_qk_l2norm_in_kernel (both or neither)
  const void* k_raw = nullptr;
  float l2_eps = 1e-6f;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dg = nullptr;
  float* dbeta = nullptr;
  float* dalpha = nullptr;
  float* dh0 = nullptr;
  float* dhkk0 = nullptr;
  // A catalogued bug planted in the chunk backward (gate/mutants.hpp, GKA's `cuda`
  // entries; builds with TTR_CUDA_MUTANTS). The recurrent kernel ignores it.
  Mutant mutant = Mutant::none;
};
// Shapes as validate(GkaArgs); throws std::invalid_argument naming the field.
void validate(const GkaBackwardArgs& a);
void gka_sequential_backward(const GkaBackwardArgs& a);
// The chunk backward (gpu/gka/chunk_backward.cu), chunk 64: the adjoint of the chunk
// form with the Chebyshev solve differentiated by GKA Alg. 2 for all tokens of a
// chunk at once (reference/gka/chunk_backward.hpp on the device). Arguments and
// outputs as gka_sequential_backward; the workspace is allocated on the stream and
// freed: per head and chunk 2K(K+V) + 64(K + V + 65) + 8 floats (the chunk-initial
// states and the chunk's results), per multiprocessor K(K+V) + 64(21K + 3V + 5·64 +
// iters + 1) (a block's matrices), dq and dk in fp32, K² per head.
void gka_chunk_backward(const GkaBackwardArgs& a);

// Device queries (no exception when there is no device: returns 0 / empty).
int device_count();
std::string device_name(int device = 0);
// Whether the current device runs the kernels compiled for sm_90a alone (Hopper's
// warpgroup MMA: the bf16 state passes' default there, `32w` by name,
// gpu/family/delta_state_tiling.cuh):
// compute capability 9.0.
bool hopper_state_pass_available();
// The warpgroup-MMA layer alone on the operand layouts of the Hopper state passes
// (gpu/core/wgmma_probe_sm90a.cu), host pointers, bf16 bits in: A 64 × 128, B 128 × 32,
// C 64 × 32, G 64 × 64 row-major; out P1 = A B (64 × 32), P2 = Aᵀ C and P3 = −Aᵀ C
// (128 × 32), P4 = Gᵀ C (64 × 32). Compute capability 9.0 only.
void hopper_mma_probe(const std::uint16_t* A, const std::uint16_t* B, const std::uint16_t* C, const std::uint16_t* G,
                      float* P1, float* P2, float* P3, float* P4);

// Small RAII device buffer for host code (tests, the gate, the CLI).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill_bytes(unsigned char byte);  // e.g. 0xFF: NaN in bf16 and fp32 (output poisoning)
 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};
void synchronize();

}  // namespace ttr::gpu
