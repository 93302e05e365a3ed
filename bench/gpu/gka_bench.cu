// Times GKA's chunk forward (gpu/gka/chunk.cu) against its recurrent kernel
// (gpu/gka/sequential.cu), and the chunk backward (gpu/gka/chunk_backward.cu)
// against the recurrent backward (gpu/gka/sequential_backward.cu), on the same
// inputs (and cotangent do), solver = chebyshev: median of CUDA-event timings, the
// chunk kernels' achieved TFLOP/s (products counted below), and the relative RMS
// difference of the two kernels' o, dq, dk, dv.
// Usage: gka_bench [B T H K V iters reps] (default the issue's shape B=4 T=4096
// H=8 K=V=128, 30 iterations, 10 repetitions; the recurrent kernel 3).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/gpu/timing.cuh"
#include "gpu/api.hpp"

namespace {

// Matrix-product FLOPs of the chunk forward per (b, h) chunk of C = 64 tokens:
// state pass 2CK(K+V); eq. (5): K H_0ᵀ 2CK², G 2C²K, (G⊙G)M̃ 2C³; per Chebyshev
// step Ξ H_0ᵀ 2CK², Ξ Kᵀ and (·)K 4C²K; readout Q̃ S_0 2CKV, Q̃ Kᵀ 2C²K, (·)V 2C²V.
double chunk_flops(double B, double T, double H, double K, double V, double iters) {
  const double C = 64, n = std::ceil(T / C);
  const double per = 2 * C * K * (K + V) + 2 * C * K * K + 2 * C * C * K + 2 * C * C * C +
                     iters * (2 * C * K * K + 4 * C * C * K) + 2 * C * K * V + 2 * C * C * K + 2 * C * C * V;
  return B * H * n * per;
}

// Matrix-product FLOPs of the chunk backward per (b, h) chunk (gpu/gka/chunk_backward.cu):
// the forward state pass and the recomputed forward (as above, without the readout),
// the readout's adjoint (S_c do: 2CKV + 2C²V + 2C²K; the rank-one pass 2CKV + 2CKV +
// 2C²K + 2C²V + 2C²K + 2C²V), the Lemma 2 solve (r steps as the forward's), per
// reversed step A ξ and Aᵀ dξ (2 × (2CK² + 4C²K)) and the rank-one pass (6CK² + 8C²K),
// eq. (5)'s adjoint (2CK² + 4CK² + 2C³ + 2C²K) and the state passing's (4CK² + 4CKV).
double chunk_backward_flops(double B, double T, double H, double K, double V, double iters) {
  const double C = 64, n = std::ceil(T / C);
  const double step = 2 * C * K * K + 4 * C * C * K;
  const double per = 2 * C * K * (K + V) + 2 * C * K * K + 2 * C * C * K + 2 * C * C * C + iters * step +
                     (2 * C * K * V + 2 * C * C * V + 2 * C * C * K) +
                     (4 * C * K * V + 4 * C * C * K + 4 * C * C * V) + iters * step +
                     iters * (2 * step + 6 * C * K * K + 8 * C * C * K) + (6 * C * K * K + 2 * C * C * C + 2 * C * C * K) +
                     (4 * C * K * K + 4 * C * K * V);
  return B * H * n * per;
}

}  // namespace

int main(int argc, char** argv) {
  const bool shape = argc > 5;
  const int B = shape ? std::atoi(argv[1]) : 4, T = shape ? std::atoi(argv[2]) : 4096,
            H = shape ? std::atoi(argv[3]) : 8, K = shape ? std::atoi(argv[4]) : 128,
            V = shape ? std::atoi(argv[5]) : 128, iters = argc > 6 ? std::atoi(argv[6]) : 30,
            reps = argc > 7 ? std::atoi(argv[7]) : 10;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni;
  const std::size_t rows = static_cast<std::size_t>(B) * T * H, nq = rows * K, nv = rows * V;
  std::vector<float> q(nq), k(nq), v(nv), g(rows), beta(rows);
  for (auto& x : q) x = normal(rng);
  for (std::size_t r = 0; r < rows; ++r) {  // unit keys, as GKA's layers normalise them
    double s = 0;
    for (int i = 0; i < K; ++i) s += (k[r * K + i] = normal(rng)) * double(k[r * K + i]);
    for (int i = 0; i < K; ++i) k[r * K + i] = static_cast<float>(k[r * K + i] / std::sqrt(s));
  }
  for (auto& x : v) x = normal(rng);
  for (auto& x : g) x = -std::log1p(std::exp(-(normal(rng) + 4.0f)));  // log σ(x + 4): γ ≈ 0.98
  for (auto& x : beta) x = uni(rng);
  auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<__nv_bfloat16> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16_rn(x[i]);
    return y;
  };
  const auto dev = ttr::bench::to_device;
  const float* dg = static_cast<const float*>(dev(g.data(), rows * 4));
  const float* dbeta = static_cast<const float*>(dev(beta.data(), rows * 4));
  const double flops = chunk_flops(B, T, H, K, V, iters);
  std::printf("gka forward and backward (chebyshev, %d iterations) B=%d T=%d H=%d K=%d V=%d, median ms (chunk of %d, recurrent of %d)\n",
              iters, B, T, H, K, V, reps, std::max(1, reps / 3));
  for (int bf = 1; bf >= 0; --bf) {
    const std::size_t es = bf ? 2 : 4;
    ttr::gpu::GkaArgs a;
    a.B = B, a.T = T, a.H = H, a.K = K, a.V = V;
    a.dtype = bf ? ttr::gpu::DType::bf16 : ttr::gpu::DType::fp32;
    if (bf) {
      const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
      a.q = dev(qb.data(), nq * 2), a.k = dev(kb.data(), nq * 2), a.v = dev(vb.data(), nv * 2);
    } else {
      a.q = dev(q.data(), nq * 4), a.k = dev(k.data(), nq * 4), a.v = dev(v.data(), nv * 4);
    }
    a.g = dg, a.beta = dbeta, a.scale = 1.0f / std::sqrt(static_cast<float>(K)), a.iters = iters;
    void *oc, *orr;
    BENCH_CHECK(cudaMalloc(&oc, nv * es));
    BENCH_CHECK(cudaMalloc(&orr, nv * es));
    a.o = oc;
    const double tc = ttr::bench::median_ms([&] { ttr::gpu::gka_chunk_forward(a); }, reps);
    ttr::gpu::GkaArgs rec = a;
    rec.o = orr;
    const double tr = ttr::bench::median_ms([&] { ttr::gpu::gka_sequential_forward(rec); }, std::max(1, reps / 3));
    auto rel_rms = [&](const void* c, const void* r, std::size_t n) {  // of two device tensors in the dtype
      return ttr::bench::rel_rms(ttr::bench::download(c, n, bf), ttr::bench::download(r, n, bf));
    };
    std::printf("%s  chunk %.3f (%.1f TFLOP/s)  recurrent %.3f  recurrent/chunk %.1fx  o rel-rms(chunk-rec) %.2e\n",
                bf ? "bf16" : "fp32", tc, flops / (tc * 1e-3) / 1e12, tr, tr / tc, rel_rms(oc, orr, nv));
    // The backward kernels on the same inputs, cotangent do ~ N(0, 1).
    std::vector<float> dov(nv);
    for (auto& x : dov) x = normal(rng);
    ttr::gpu::GkaBackwardArgs ba;
    ba.fwd = a;
    if (bf) {
      const auto db = to_bf16(dov);
      ba.do_ = dev(db.data(), nv * 2);
    } else {
      ba.do_ = dev(dov.data(), nv * 4);
    }
    void *gq[2], *gk[2], *gv[2], *gg[2], *gb[2];
    for (int side = 0; side < 2; ++side) {
      BENCH_CHECK(cudaMalloc(&gq[side], nq * es));
      BENCH_CHECK(cudaMalloc(&gk[side], nq * es));
      BENCH_CHECK(cudaMalloc(&gv[side], nv * es));
      BENCH_CHECK(cudaMalloc(&gg[side], rows * 4));
      BENCH_CHECK(cudaMalloc(&gb[side], rows * 4));
    }
    auto grads = [&](int side) {
      ttr::gpu::GkaBackwardArgs x = ba;
      x.dq = gq[side], x.dk = gk[side], x.dv = gv[side];
      x.dg = static_cast<float*>(gg[side]), x.dbeta = static_cast<float*>(gb[side]);
      return x;
    };
    const ttr::gpu::GkaBackwardArgs bc = grads(0), br = grads(1);
    const double bwc = ttr::bench::median_ms([&] { ttr::gpu::gka_chunk_backward(bc); }, reps);
    const double bwr = ttr::bench::median_ms([&] { ttr::gpu::gka_sequential_backward(br); }, std::max(1, reps / 3));
    const double bflops = chunk_backward_flops(B, T, H, K, V, iters);
    std::printf("%s  backward: chunk %.3f (%.1f TFLOP/s)  recurrent %.3f  recurrent/chunk %.1fx  "
                "forward+backward: chunk %.3f  recurrent %.3f  rel-rms(chunk-rec) dq %.2e dk %.2e dv %.2e\n",
                bf ? "bf16" : "fp32", bwc, bflops / (bwc * 1e-3) / 1e12, bwr, bwr / bwc, tc + bwc, tr + bwr,
                rel_rms(gq[0], gq[1], nq), rel_rms(gk[0], gk[1], nq), rel_rms(gv[0], gv[1], nv));
  }
  return 0;
}
