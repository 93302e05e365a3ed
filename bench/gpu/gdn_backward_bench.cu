// Times the delta family's backward kernels for gated_delta_rule (scalar decay):
// the chunk forward (gpu/family/delta_chunk.cu) for reference, the staged chunk
// backward (gpu/family/delta_chunk_backward.cu), the one-block-per-head chunk
// backward it replaced (gpu/family/delta_chunk_backward_reference.cu: "before")
// and the fused-recurrent backward (gpu/family/delta_sequential_backward.cu) on the
// same inputs: median of CUDA-event timings after a warm-up, the staged kernel's
// per-stage times (one more call with TTR_GPU_STAGE_TIMING=1), and the relative
// RMS difference of the staged kernel's dq, dk, dv, dβ, dg from the other two.
// Usage: gdn_backward_bench [B T H K V reps] (default B=4 T=4096 H=8 K=V=128, 5 repetitions).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/gpu/timing.cuh"
#include "gpu/api.hpp"

int main(int argc, char** argv) {
  const bool shape = argc > 5;
  const int B = shape ? std::atoi(argv[1]) : 4, T = shape ? std::atoi(argv[2]) : 4096,
            H = shape ? std::atoi(argv[3]) : 8, K = shape ? std::atoi(argv[4]) : 128,
            V = shape ? std::atoi(argv[5]) : 128, reps = argc > 6 ? std::atoi(argv[6]) : 5;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni;
  const std::size_t rows = static_cast<std::size_t>(B) * T * H, nq = rows * K, nv = rows * V;
  std::vector<float> q(nq), k(nq), v(nv), g(rows), beta(rows), dout(nv);
  for (auto& x : q) x = normal(rng);
  for (std::size_t r = 0; r < rows; ++r) {  // unit keys, as GDN's layers normalise them
    double s = 0;
    for (int i = 0; i < K; ++i) s += (k[r * K + i] = normal(rng)) * double(k[r * K + i]);
    for (int i = 0; i < K; ++i) k[r * K + i] = static_cast<float>(k[r * K + i] / std::sqrt(s));
  }
  for (auto& x : v) x = normal(rng);
  for (auto& x : dout) x = normal(rng);
  for (auto& x : g) x = -std::log1p(std::exp(-(normal(rng) + 4.0f)));  // log σ(x + 4)
  for (auto& x : beta) x = uni(rng);
  auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<__nv_bfloat16> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16_rn(x[i]);
    return y;
  };
  const auto dev = ttr::bench::to_device;
  const float* dg = static_cast<const float*>(dev(g.data(), rows * 4));
  std::printf("gated_delta_rule backward B=%d T=%d H=%d K=%d V=%d, median ms of %d (recurrent of %d)\n", B, T, H, K,
              V, reps, std::max(1, reps / 3));
  for (int bf = 1; bf >= 0; --bf) {
    const std::size_t es = bf ? 2 : 4;
    ttr::gpu::DeltaBackwardArgs a;
    ttr::gpu::DeltaArgs& f = a.fwd;
    f.B = B, f.T = T, f.H = H, f.K = K, f.V = V;
    f.dtype = bf ? ttr::gpu::DType::bf16 : ttr::gpu::DType::fp32;
    if (bf) {
      const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v), bb = to_bf16(beta), db = to_bf16(dout);
      f.q = dev(qb.data(), nq * 2), f.k = dev(kb.data(), nq * 2), f.v = dev(vb.data(), nv * 2);
      f.beta = dev(bb.data(), rows * 2), a.do_ = dev(db.data(), nv * 2);
    } else {
      f.q = dev(q.data(), nq * 4), f.k = dev(k.data(), nq * 4), f.v = dev(v.data(), nv * 4);
      f.beta = dev(beta.data(), rows * 4), a.do_ = dev(dout.data(), nv * 4);
    }
    f.g = dg, f.scale = 1.0f / std::sqrt(static_cast<float>(K));
    void *o, *grads[3][5];
    BENCH_CHECK(cudaMalloc(&o, nv * es));
    f.o = o;
    for (auto& set : grads) {
      BENCH_CHECK(cudaMalloc(&set[0], nq * es));
      BENCH_CHECK(cudaMalloc(&set[1], nq * es));
      BENCH_CHECK(cudaMalloc(&set[2], nv * es));
      BENCH_CHECK(cudaMalloc(&set[3], rows * es));
      BENCH_CHECK(cudaMalloc(&set[4], rows * 4));
    }
    auto use = [&](int i) {
      a.dq = grads[i][0], a.dk = grads[i][1], a.dv = grads[i][2], a.dbeta = grads[i][3];
      a.dg = static_cast<float*>(grads[i][4]);
    };
    const double tf = ttr::bench::median_ms([&] { ttr::gpu::delta_chunk_forward(f); }, reps);
    use(0);
    const double tc = ttr::bench::median_ms([&] { ttr::gpu::delta_chunk_backward(a); }, reps);
    setenv("TTR_GPU_STAGE_TIMING", "1", 1);
    std::fflush(stdout);
    ttr::gpu::delta_chunk_backward(a);  // prints "stage ms: ..." on stderr
    BENCH_CHECK(cudaDeviceSynchronize());
    unsetenv("TTR_GPU_STAGE_TIMING");
    use(1);
    const double tr = ttr::bench::median_ms([&] { ttr::gpu::delta_sequential_backward(a); }, std::max(1, reps / 3));
    use(2);
    const double tref =
        ttr::bench::median_ms([&] { ttr::gpu::delta_chunk_backward_reference(a); }, std::max(1, reps / 3));
    BENCH_CHECK(cudaDeviceSynchronize());
    const std::size_t n[5] = {nq, nq, nv, rows, rows};
    const char* names[5] = {"dq", "dk", "dv", "dbeta", "dg"};
    std::printf("%s: chunk forward %.3f ms, chunk backward %.3f ms (before: one block per head %.1f ms), recurrent "
                "backward %.3f ms\n",
                bf ? "bf16" : "fp32", tf, tc, tref, tr);
    for (int other = 2; other >= 1; --other) {
      std::printf("  rel-RMS chunk vs %s:", other == 2 ? "before" : "recurrent");
      for (int i = 0; i < 5; ++i)
        std::printf(" %s %.2e", names[i],
                    ttr::bench::rel_rms(ttr::bench::download(grads[0][i], n[i], bf && i < 4),
                                        ttr::bench::download(grads[other][i], n[i], bf && i < 4)));
      std::printf("\n");
    }
  }
  return 0;
}
