// The chunk forward's three stages as generic kernels (block_gemm on shared-memory
// tiles: WMMA for bf16 operands, FMA for fp32), the fp32 path of delta_chunk.cu; bf16
// runs delta_chunk_bf16.cuh, the same arithmetic at the same narrowing points. Included
// by delta_chunk.cu inside ttr::gpu::(anonymous), after unit_lower_inverse and
// Shape/Work; the stage list and the narrowing points are that file's header.

// ---------------------------------------------------------------- stage 1
// GIVEN_T: work.Tn holds the chunk's narrowed inverse already (Work::t_given): read, not formed.
template <class E, Decay D, bool GIVEN_T = false>
__global__ void __launch_bounds__(kThreads) ut_transform_kernel(Shape s, const E* __restrict__ k,
                                                                 const E* __restrict__ w, const E* __restrict__ v,
                                                                 const E* __restrict__ beta,
                                                                 const float* __restrict__ g, bool kaczmarz,
                                                                 float eps, Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldv = padded_ld<E>(V), ldc = padded_ld<E>(kChunk);
  SmemArena arena{smem};
  E* kt = arena.take<E>(kChunk, K);
  E* wt = w ? arena.take<E>(kChunk, K) : kt;
  E* vt = arena.take<E>(kChunk, V);
  E* tn = arena.take<E>(kChunk, kChunk);
  float* A = arena.take<float>(kChunk, kChunk);
  float* Tf = arena.take<float>(kChunk, kChunk);
  // W and U's fp32 results reuse A and T's space (adjacent, 2·64·68 floats ≥
  // 64·(128+4)): they are formed after the narrowed inverse has been taken.
  float* out = A;
  float* bg = arena.take<float>(kChunk, s.Kg);
  float* bt = arena.take<float>(1, kChunk);
  float* eb = arena.take<float>(1, kChunk);  // e^{b_t} (scalar decay)
  const int lda = padded_ld<float>(kChunk), ldo = padded_ld<float>(max(K, V)), ldg = padded_ld<float>(s.Kg);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;  // (b, t0, h)
  load_rows(kt, ldk, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  if (w) load_rows(wt, ldk, w + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(vt, ldv, v + row0 * V, static_cast<std::int64_t>(s.H) * V, kChunk, c, V);
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    bt[t] = t < c ? Elem<E>::to_float(beta[row0 + static_cast<std::int64_t>(t) * s.H]) : 0.0f;
  }
  // b_t = Σ_{s ≤ t} g_s from the chunk start, in fp32, in token order (as
  // reference/family/chunk_common.hpp: cumulative_gates). Padding rows add 0, so
  // row 63 holds b_last of a partial chunk too.
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) {
    const int t = i / s.Kg, d = i % s.Kg;
    bg[t * ldg + d] = (D != Decay::none && t < c) ? g[(row0 + static_cast<std::int64_t>(t) * s.H) * s.Kg + d] : 0.0f;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < s.Kg; d += blockDim.x) {
    float acc = 0.0f;
    for (int t = 0; t < kChunk; ++t) bg[t * ldg + d] = acc += bg[t * ldg + d];
  }
  __syncthreads();
  if (D == Decay::scalar && threadIdx.x < kChunk) eb[threadIdx.x] = expf(bg[threadIdx.x * ldg]);
  // Kaczmarz (KLA-Z eq. (3)): β̃ = β/(‖k‖² + eps) in fp32 from the stored key,
  // then stored in E like any β.
  if (kaczmarz && threadIdx.x < c) {
    const int t = threadIdx.x;
    float kk = 0.0f;
    for (int d = 0; d < K; ++d) {
      const float x = Elem<E>::to_float(kt[t * ldk + d]);
      kk += x * x;
    }
    bt[t] = narrow<E>(bt[t] / (kk + eps));
  }
  if constexpr (GIVEN_T) {
    const E* Tg = static_cast<const E*>(work.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk;
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) tn[(i / kChunk) * ldc + i % kChunk] = Tg[i];
  } else {
    // A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1)
    if constexpr (D != Decay::per_key) block_gemm<false, true>(A, lda, kt, ldk, wt, ldk, kChunk, kChunk, K, false);
    __syncthreads();
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
      const int t = i / kChunk, j = i % kChunk;
      float a = 0.0f;
      if (j < t) {
        if constexpr (D == Decay::per_key) {
          for (int d = 0; d < K; ++d)
            a = fmaf(Elem<E>::to_float(kt[t * ldk + d]) * Elem<E>::to_float(wt[j * ldk + d]),
                     expf(bg[t * ldg + d] - bg[j * ldg + d]), a);
        } else {
          a = A[t * lda + j];
          if constexpr (D == Decay::scalar) a *= expf(bg[t * ldg] - bg[j * ldg]);
        }
        a *= bt[t];
      }
      A[t * lda + j] = a;
    }
    __syncthreads();
    unit_lower_inverse(A, lda, [&](int t, int j, float x) { Tf[t * lda + j] = x; });
    __syncthreads();
    // The narrowed inverse (FLA's solve_tril output, k.dtype), and the operands
    // β ⊙ K ⊙ e^{b} (the decayed key narrowed, then β times it narrowed) and β ⊙ V,
    // written over the k and v tiles (A no longer needs them).
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
      const int t = i / kChunk, j = i % kChunk;
      tn[t * ldc + j] = Elem<E>::from_float(Tf[t * lda + j]);
    }
  }
  // The write keys decayed to the chunk end, narrow(w ⊙ e^{b_last − b_t}) (the
  // state update's operand; factors ≤ 1), stored for the state pass.
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  {
    E* WDg = static_cast<E*>(work.WD) + wrow * K;
    const float* blast = bg + (kChunk - 1) * ldg;
    for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
      const int t = i / K, d = i % K, col = D == Decay::per_key ? d : 0;
      float x = Elem<E>::to_float(wt[t * ldk + d]);
      if constexpr (D != Decay::none) x *= expf(blast[col] - bg[t * ldg + col]);
      WDg[static_cast<std::int64_t>(t) * K + d] = Elem<E>::from_float(x);
    }
  }
  __syncthreads();  // wt may be kt, overwritten next
  if (!GIVEN_T && work.Tn) {  // the narrowed inverse, kept for the backward (delta_chunk_stages.cuh)
    E* Tg = static_cast<E*>(work.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk;
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) Tg[i] = tn[(i / kChunk) * ldc + i % kChunk];
  }
  for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
    const int t = i / K, d = i % K;
    float x = Elem<E>::to_float(kt[t * ldk + d]);
    if constexpr (D == Decay::scalar) x = narrow<E>(x * eb[t]);
    if constexpr (D == Decay::per_key) x = narrow<E>(x * expf(bg[t * ldg + d]));
    kt[t * ldk + d] = Elem<E>::from_float(bt[t] * x);
  }
  for (int i = threadIdx.x; i < kChunk * V; i += blockDim.x) {
    const int t = i / V, j = i % V;
    vt[t * ldv + j] = Elem<E>::from_float(bt[t] * Elem<E>::to_float(vt[t * ldv + j]));
  }
  __syncthreads();
  // W = T (β ⊙ K ⊙ e^{b}),  U = T (β ⊙ V): stored narrowed (FLA's w, u).
  E* Wg = static_cast<E*>(work.W) + wrow * K;
  E* Ug = static_cast<E*>(work.U) + wrow * V;
  block_gemm<false, false>(out, ldo, tn, ldc, kt, ldk, kChunk, K, kChunk, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
    const int t = i / K, d = i % K;
    Wg[static_cast<std::int64_t>(t) * K + d] = Elem<E>::from_float(out[t * ldo + d]);
  }
  __syncthreads();
  block_gemm<false, false>(out, ldo, tn, ldc, vt, ldv, kChunk, V, kChunk, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * V; i += blockDim.x) {
    const int t = i / V, j = i % V;
    Ug[static_cast<std::int64_t>(t) * V + j] = Elem<E>::from_float(out[t * ldo + j]);
  }
  float* Gg = work.G + wrow * s.Kg;
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) Gg[i] = bg[(i / s.Kg) * ldg + i % s.Kg];
}

template <class E>
std::size_t ut_smem(const Shape& s, bool separate_w) {
  return tile_bytes<E>(kChunk, s.K) * (separate_w ? 2 : 1) + tile_bytes<E>(kChunk, s.V) +
         tile_bytes<E>(kChunk, kChunk) + 2 * tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, s.Kg) +
         2 * tile_bytes<float>(1, kChunk);
}

// ---------------------------------------------------------------- stage 2
template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) state_pass_kernel(Shape s, int bv, int stages,
                                                               const float* __restrict__ h0, float* __restrict__ ht,
                                                               Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int j0 = blockIdx.x * bv, bh = blockIdx.y;
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldb = padded_ld<E>(bv), ldf = padded_ld<float>(bv);
  const int ldg = s.Kg;  // gates: flat rows (loaded as one contiguous block)
  SmemArena arena{smem};
  float* S = arena.take<float>(K, bv);
  E* h_op = arena.take<E>(K, bv);
  E* Dt = arena.take<E>(kChunk, bv);
  float* Df = arena.take<float>(kChunk, bv);
  float* dl = arena.take<float>(1, K);  // e^{b_last} per state row
  // Two stages of the per-chunk inputs (chunk n + 1 loads by cp.async while n
  // computes) where shared memory allows, else one.
  E *Wb[2], *wb[2], *Ub[2];
  float* gb[2];
  for (int i = 0; i < stages; ++i) {
    Wb[i] = arena.take<E>(kChunk, K);
    wb[i] = arena.take<E>(kChunk, K);
    Ub[i] = arena.take<E>(kChunk, bv);
    gb[i] = arena.take<float>(1, kChunk * s.Kg);
  }

  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V;
  for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
    const int r = i / bv, cc = i % bv;
    S[r * ldf + cc] = h0 ? h0[sbase + static_cast<std::int64_t>(r) * V + j0 + cc] : 0.0f;
  }
  const E* Wg = static_cast<const E*>(work.W) + static_cast<std::int64_t>(bh) * s.Tp * K;
  const E* Ug = static_cast<const E*>(work.U) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  const float* Gg = work.G + static_cast<std::int64_t>(bh) * s.Tp * s.Kg;
  const E* WDg = static_cast<const E*>(work.WD) + static_cast<std::int64_t>(bh) * s.Tp * K;
  E* Hg = static_cast<E*>(work.Hs) + static_cast<std::int64_t>(bh) * s.NT * K * V + j0;
  E* Dg = static_cast<E*>(work.D) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  auto prefetch = [&](int n) {
    const int t0 = n * kChunk, buf = n & (stages - 1);
    load_rows_async(Wb[buf], ldk, Wg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(wb[buf], ldk, WDg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(Ub[buf], ldb, Ug + static_cast<std::int64_t>(t0) * V, V, kChunk, kChunk, bv);
    load_flat_async(gb[buf], Gg + static_cast<std::int64_t>(t0) * s.Kg, kChunk * s.Kg);
    cp_async_commit();
  };
  const int len = s.len(bh / s.H), NT = s.chunks(bh / s.H);  // this sequence's chunks (varlen)
  if (stages == 2 && NT > 0) prefetch(0);
  for (int n = 0; n < NT; ++n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0), buf = n & (stages - 1);
    const E* Wt = Wb[buf];
    const E* wt = wb[buf];
    const E* Ut = Ub[buf];
    const float* bg = gb[buf];
    if (stages == 1) {
      prefetch(n);
      cp_async_wait<0>();
    } else if (n + 1 < NT) {
      prefetch(n + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // every thread's copies of chunk n have landed
    if (D != Decay::none)
      for (int r = threadIdx.x; r < (D == Decay::per_key ? K : 1); r += blockDim.x)
        dl[r] = expf(bg[(kChunk - 1) * ldg + r]);
    // h_n = narrow(S): the chunk-initial state as an operand (FLA stores h per chunk in k.dtype).
    for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
      const int r = i / bv, cc = i % bv;
      const E x = Elem<E>::from_float(S[r * ldf + cc]);
      h_op[r * ldb + cc] = x;
      Hg[static_cast<std::int64_t>(n) * K * V + static_cast<std::int64_t>(r) * V + cc] = x;
    }
    __syncthreads();
    // Δ = narrow(U − W h_n)
    block_gemm<false, false>(Df, ldf, Wt, ldk, h_op, ldb, kChunk, bv, K, false);
    __syncthreads();
    for (int i = threadIdx.x; i < kChunk * bv; i += blockDim.x) {
      const int t = i / bv, cc = i % bv;
      const E x = Elem<E>::from_float(Elem<E>::to_float(Ut[t * ldb + cc]) - Df[t * ldf + cc]);
      Dt[t * ldb + cc] = x;
      if (t < c) Dg[static_cast<std::int64_t>(t0 + t) * V + cc] = x;
    }
    // S ← Diag(e^{b_last}) S (the decayed write keys come from stage 1).
    if constexpr (D != Decay::none)
      for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
        const int r = i / bv, cc = i % bv;
        S[r * ldf + cc] *= dl[D == Decay::per_key ? r : 0];
      }
    __syncthreads();
    // S += (w ⊙ e^{b_last − b})ᵀ Δ
    block_gemm<true, false>(S, ldf, wt, ldk, Dt, ldb, K, bv, kChunk, true);
    __syncthreads();
  }
  if (ht)
    for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
      const int r = i / bv, cc = i % bv;
      ht[sbase + static_cast<std::int64_t>(r) * V + j0 + cc] = S[r * ldf + cc];
    }
}

template <class E>
std::size_t state_smem(const Shape& s, int bv, int stages) {
  return tile_bytes<float>(s.K, bv) + tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<float>(kChunk, bv) + tile_bytes<float>(1, s.K) +
         stages * (2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, bv) + tile_bytes<float>(1, kChunk * s.Kg));
}

// ---------------------------------------------------------------- stage 3
template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) output_kernel(Shape s, int bv, const E* __restrict__ q,
                                                           const E* __restrict__ wkey, float scale, E* __restrict__ o,
                                                           Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, j0 = blockIdx.y * bv, bh = blockIdx.z, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldb = padded_ld<E>(bv), ldf = padded_ld<float>(bv);
  const int ldc = padded_ld<E>(kChunk), lds = padded_ld<float>(kChunk), ldg = padded_ld<float>(s.Kg);
  SmemArena arena{smem};
  E* qt = arena.take<E>(kChunk, K);
  E* wt = arena.take<E>(kChunk, K);
  E* h_op = arena.take<E>(K, bv);
  E* Dt = arena.take<E>(kChunk, bv);
  E* sc = arena.take<E>(kChunk, kChunk);
  float* Sf = arena.take<float>(kChunk, kChunk);
  float* Of = arena.take<float>(kChunk, bv);
  float* bg = arena.take<float>(kChunk, s.Kg);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  load_rows(qt, ldk, q + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(wt, ldk, wkey + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(h_op, ldb,
            static_cast<const E*>(work.Hs) + (static_cast<std::int64_t>(bh) * s.NT + n) * K * V + j0, V, K, K, bv);
  load_rows(Dt, ldb, static_cast<const E*>(work.D) + wrow * V + j0, V, kChunk, c, bv);
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x)
    bg[(i / s.Kg) * ldg + i % s.Kg] = work.G[wrow * s.Kg + i];
  __syncthreads();
  // Scores [Q wᵀ ⊙ Γ]_{s ≤ t}, narrowed (the masked score matrix as an operand).
  if constexpr (D != Decay::per_key) block_gemm<false, true>(Sf, lds, qt, ldk, wt, ldk, kChunk, kChunk, K, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int t = i / kChunk, j = i % kChunk;
    float a = 0.0f;
    if (j <= t) {
      if constexpr (D == Decay::per_key) {
        for (int d = 0; d < K; ++d)
          a = fmaf(Elem<E>::to_float(qt[t * ldk + d]) * Elem<E>::to_float(wt[j * ldk + d]),
                   expf(bg[t * ldg + d] - bg[j * ldg + d]), a);
      } else {
        a = Sf[t * lds + j];
        if constexpr (D == Decay::scalar) a *= expf(bg[t * ldg] - bg[j * ldg]);
      }
    }
    sc[t * ldc + j] = Elem<E>::from_float(a);
  }
  __syncthreads();
  // Q ⊙ e^{b}, narrowed, over the q tile (scalar decay: one e^{b_t} per row, kept in Of).
  if constexpr (D == Decay::scalar)
    if (threadIdx.x < kChunk) Of[threadIdx.x] = expf(bg[threadIdx.x * ldg]);
  __syncthreads();
  if constexpr (D != Decay::none)
    for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
      const int t = i / K, d = i % K;
      const float f = D == Decay::per_key ? expf(bg[t * ldg + d]) : Of[t];
      qt[t * ldk + d] = Elem<E>::from_float(Elem<E>::to_float(qt[t * ldk + d]) * f);
    }
  __syncthreads();
  // O = (Q ⊙ e^{b}) h_n + scores Δ in one fp32 accumulator.
  block_gemm<false, false>(Of, ldf, qt, ldk, h_op, ldb, kChunk, bv, K, false);
  __syncthreads();
  block_gemm<false, false>(Of, ldf, sc, ldc, Dt, ldb, kChunk, bv, kChunk, true);
  __syncthreads();
  for (int i = threadIdx.x; i < c * bv; i += blockDim.x) {
    const int t = i / bv, cc = i % bv;
    o[(row0 + static_cast<std::int64_t>(t) * s.H) * V + j0 + cc] = Elem<E>::from_float(scale * Of[t * ldf + cc]);
  }
}

template <class E>
std::size_t output_smem(const Shape& s, int bv) {
  return 2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<E>(kChunk, kChunk) + tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, bv) +
         tile_bytes<float>(kChunk, s.Kg);
}
