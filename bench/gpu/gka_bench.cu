// Times GKA's chunk forward (gpu/gka/chunk.cu) against its recurrent kernel
// (gpu/gka/sequential.cu) on the same inputs, solver = chebyshev: median of
// CUDA-event timings, the chunk kernel's achieved TFLOP/s (products counted
// below), and the relative RMS difference of the two kernels' o.
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
  std::printf("gka forward (chebyshev, %d iterations) B=%d T=%d H=%d K=%d V=%d, median ms (chunk of %d, recurrent of %d)\n",
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
    std::vector<float> x(nv), y(nv);
    auto fetch = [&](void* d, std::vector<float>& out) {
      if (bf) {
        std::vector<__nv_bfloat16> h(nv);
        BENCH_CHECK(cudaMemcpy(h.data(), d, nv * 2, cudaMemcpyDeviceToHost));
        for (std::size_t i = 0; i < nv; ++i) out[i] = __bfloat162float(h[i]);
      } else {
        BENCH_CHECK(cudaMemcpy(out.data(), d, nv * 4, cudaMemcpyDeviceToHost));
      }
    };
    fetch(oc, x);
    fetch(orr, y);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < nv; ++i) num += (x[i] - y[i]) * double(x[i] - y[i]), den += double(y[i]) * y[i];
    std::printf("%s  chunk %.3f (%.1f TFLOP/s)  recurrent %.3f  recurrent/chunk %.1fx  o rel-rms(chunk-rec) %.2e\n",
                bf ? "bf16" : "fp32", tc, flops / (tc * 1e-3) / 1e12, tr, tr / tc, std::sqrt(num / den));
  }
  return 0;
}
