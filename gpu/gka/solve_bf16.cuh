// The bf16 chunk solve's Chebyshev iterations (GKA Alg. 1, all 64 tokens of a
// chunk at once; the stage-2 algorithm of gpu/gka/chunk.cu) on raw mma.sync
// fragments (gpu/core/mma_sync.cuh), the path that made the GDN forward fast
// (gpu/family/delta_chunk_bf16.cuh). Per step, for the rows ξ_c of Ξ:
//
//   Y = diag(ζ) Ξ H_0ᵀ + ((Ξ Kᵀ) ⊙ M̃ᵀ) K     (rows H_c ξ_c, §4.2)
//   ξ_c ← ξ_c − c_i (y_c + λ_c ξ_c − q̂_c) + (ω_i − 1)(ξ_c − ξ_c,prev)
//
// Work split: warp w owns the 16-row strip m = w % 4 of the chunk and the
// 16-column pairs P ≡ w / 4 (mod 2) of Y (the two warps of a strip split K).
// Rows of Y depend only on the same rows of Ξ, so a strip is a system of its
// own: its two warps meet at one named barrier (64 threads) per step, the four
// strips never wait for each other, and Ξ is double-buffered in shared memory
// (step i reads buffer (i−1) mod 2 and writes buffer i mod 2: a warp passes the
// barrier of step i only after its partner has finished reading step i's
// buffer, so the write of step i + 1 cannot overtake a read).
//   * ξ, ξ_prev, the accumulators of Ξ H_0ᵀ and of Ξ Kᵀ stay in registers, in
//     the mma accumulator layout, across all steps; q̂ = scale·q is re-read
//     from the chunk's narrowed q in shared memory.
//   * Ξ Kᵀ is computed by both warps of a strip for the strip's causal columns
//     only (column blocks ≤ m; the rest is masked to zero), masked by M̃ᵀ,
//     narrowed and repacked in registers as the A fragments of (·) K: the
//     accumulator layout of two adjacent 16×8 tiles is the A layout of their
//     16×16 block (mma_sync.cuh), so the masked product never touches memory.
//   * Ξ H_0ᵀ and Ξ Kᵀ share each k-step's A fragment of Ξ.
//
// Arithmetic: exactly the WMMA path's (the generic loop in chunk.cu, which
// remains the fp32 path and, for bf16, the TTR_GPU_GKA_SOLVE=wmma benchmark
// aid): the same HMMA instruction over the same k order for every product
// (zero blocks above the diagonal skipped: adding exact zeros changes nothing),
// ζ applied to Ξ H_0ᵀ in fp32 before (·)K accumulates onto it, the masked
// product and Ξ narrowed (round to nearest even) at the same points, and the
// scalar recursions by gpu/gka/chebyshev.cuh. The narrowing points are the CPU
// chunk form's (reference/gka/chunk.hpp: Ξ before each product, the masked
// product; products accumulate in fp32), so the gate's model of the chunk
// kernel is unchanged.
// Included by chunk.cu inside ttr::gpu::(anonymous), after SolveParams.

namespace frag {

using mma::bf16;
using mma::load_a;
using mma::load_b2;
using mma::load_b2_trans;
using mma::mma_bf16;
using mma::pack_bf16;

__device__ inline void st2(bf16* p, unsigned x) { *reinterpret_cast<unsigned*>(p) = x; }

// The two warps of strip `strip` (warps strip and strip + 4): barrier 1 + strip.
__device__ inline void strip_sync(int strip) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + strip), "r"(64) : "memory");
}

// The chunk's tiles and per-token scalars as the prologue of solve_kernel left them.
struct SolveTiles {
  const bf16* H0;     // K×K, narrowed chunk-initial H (ld ldh)
  const bf16* Kt;     // 64×K keys (ld ldh)
  const bf16* Qs;     // 64×K narrowed q (ld ldh), zero rows past the chunk's end
  bf16 *X0, *X1;      // Ξ, double-buffered (ld ldx)
  const float* MtT;   // MtT[c][j] = M̃_{j,c} (ld ldc)
  const float *zeta, *lam, *lpm, *rho2, *alp;
  int ldh, ldx, ldc;
};

// `iters` steps, then q̃ (rows < c) to qt (row r at qt + r·K), narrowed.
__device__ inline void chebyshev(const SolveParams& p, const SolveTiles& t, int K, int c, bool with_alpha, bf16* qt) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, qd = lane % 4;
  const int strip = warp % 4, half = warp / 4, m0 = 16 * strip, pairs = K / 16;
  const int row[2] = {m0 + gq, m0 + gq + 8};  // the accumulator rows of this lane (e / 2)
  float lam[2], lpm[2], rho2[2], zeta[2], omega[2], ci[2];
  bool live[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lam[h] = t.lam[row[h]], lpm[h] = t.lpm[row[h]], rho2[h] = t.rho2[row[h]], zeta[h] = t.zeta[row[h]];
    live[h] = lam[h] != 0.0f;  // λ_c = 0 (H_c = 0): x_c = 0
    omega[h] = p.omega0, ci[h] = 0.0f;
  }
  auto sq_at = [&](int r, int col) { return __fmul_rn(p.scale, __bfloat162float(t.Qs[r * t.ldh + col])); };
  // ξ_{−1} = 0, ξ_0 = 2 q̂/(L + μ): element (i, jj, e) is row row[e / 2], column 16P + 8jj + 2qd + e % 2.
  float x[4][2][4], xp[4][2][4];
  {
    const float c0[2] = {live[0] ? __fdiv_rn(2.0f, lpm[0]) : 0.0f, live[1] ? __fdiv_rn(2.0f, lpm[1]) : 0.0f};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int P = half + 2 * i;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        const int col = 16 * P + 8 * jj + 2 * qd;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          x[i][jj][e] = P < pairs ? __fmul_rn(c0[e / 2], sq_at(row[e / 2], col + e % 2)) : 0.0f;
          xp[i][jj][e] = 0.0f;
        }
        if (P < pairs) {
          st2(t.X0 + row[0] * t.ldx + col, pack_bf16(x[i][jj][0], x[i][jj][1]));
          st2(t.X0 + row[1] * t.ldx + col, pack_bf16(x[i][jj][2], x[i][jj][3]));
        }
      }
    }
  }
  __syncthreads();
  for (int it = 1; it <= p.iters; ++it) {
    const bf16* Xc = (it & 1) ? t.X0 : t.X1;  // ξ_{it−1}: buffer (it − 1) mod 2
    bf16* Xn = (it & 1) ? t.X1 : t.X0;
    float Y[4][2][4], C[4][2][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) Y[i][jj][e] = 0.0f, C[i][jj][e] = 0.0f;
    // Ξ H_0ᵀ (this warp's column pairs) and Ξ Kᵀ (the strip's causal column blocks).
    for (int k0 = 0; k0 < K; k0 += 16) {
      unsigned a[4], bb[4];
      load_a(a, Xc, t.ldx, m0, k0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int P = half + 2 * i;
        if (P < pairs) {
          load_b2_trans(bb, t.H0, t.ldh, 16 * P, k0);
          mma_bf16(Y[i][0], a, bb);
          mma_bf16(Y[i][1], a, bb + 2);
        }
      }
#pragma unroll
      for (int s = 0; s < 4; ++s)
        if (s <= strip) {
          load_b2_trans(bb, t.Kt, t.ldh, 16 * s, k0);
          mma_bf16(C[s][0], a, bb);
          mma_bf16(C[s][1], a, bb + 2);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) Y[i][jj][e] = __fmul_rn(Y[i][jj][e], zeta[e / 2]);
    // + narrow((Ξ Kᵀ) ⊙ M̃ᵀ) K, the masked block s as the A fragment of k-step s.
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s <= strip) {
        unsigned a[4];
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int col = 16 * s + 8 * jj + 2 * qd;
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = row[e / 2], j = col + e % 2;
            v[e] = j <= r ? __fmul_rn(C[s][jj][e], t.MtT[r * t.ldc + j]) : 0.0f;
          }
          a[2 * jj] = pack_bf16(v[0], v[1]);      // row m0 + gq
          a[2 * jj + 1] = pack_bf16(v[2], v[3]);  // row m0 + gq + 8
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int P = half + 2 * i;
          if (P < pairs) {
            unsigned bb[4];
            load_b2(bb, t.Kt, t.ldh, 16 * s, 16 * P);
            mma_bf16(Y[i][0], a, bb);
            mma_bf16(Y[i][1], a, bb + 2);
          }
        }
      }
    // The weight schedule, then the step + momentum; Ξ narrowed into the other buffer.
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (live[h]) {
        omega[h] = gka::chebyshev_weight(rho2[h], omega[h]);
        ci[h] = gka::chebyshev_step_size(omega[h], lpm[h]);
      }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int P = half + 2 * i;
      if (P < pairs) {
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int col = 16 * P + 8 * jj + 2 * qd;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            if (live[h]) {
              const float nx = gka::chebyshev_step(x[i][jj][e], xp[i][jj][e], Y[i][jj][e], lam[h], ci[h], omega[h],
                                                   sq_at(row[h], col + e % 2));
              xp[i][jj][e] = x[i][jj][e];
              x[i][jj][e] = nx;
            }
          }
          st2(Xn + row[0] * t.ldx + col, pack_bf16(x[i][jj][0], x[i][jj][1]));
          st2(Xn + row[1] * t.ldx + col, pack_bf16(x[i][jj][2], x[i][jj][3]));
        }
      }
    }
    strip_sync(strip);
  }
  // q̃ = q̂ + α (x − q̂) (α absent: x), narrowed: the readout's operand.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int P = half + 2 * i;
    if (P < pairs) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        const int col = 16 * P + 8 * jj + 2 * qd;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row[h];
          if (r >= c) continue;
          float out[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float xv = x[i][jj][2 * h + e];
            out[e] = with_alpha ? __fmaf_rn(t.alp[r], __fsub_rn(xv, sq_at(r, col + e)), sq_at(r, col + e)) : xv;
          }
          st2(qt + static_cast<std::int64_t>(r) * K + col, pack_bf16(out[0], out[1]));
        }
      }
    }
  }
}

}  // namespace frag
