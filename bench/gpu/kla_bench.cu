// Times kla_kalman's chunk forward (gpu/kla_kalman/scan.cu: scaled, and in the
// paper's unscaled representation) against its recurrent kernel on the same
// inputs: median of CUDA-event timings, and the relative RMS difference of o;
// then the chunked-scan backward (gpu/kla_kalman/scan_backward.cu, a cotangent of
// o and o_var, workspace allocation included) against the scaled chunk forward.
// Usage: kla_bench [B T H N D reps] (default the issue's shape B=4 T=4096 H=8
// N=16 D=64, 20 repetitions).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/gpu/timing.cuh"
#include "gpu/api.hpp"

using ttr::bench::median_ms;
#define CHECK BENCH_CHECK

int main(int argc, char** argv) {
  const int B = argc > 5 ? std::atoi(argv[1]) : 4, T = argc > 5 ? std::atoi(argv[2]) : 4096,
            H = argc > 5 ? std::atoi(argv[3]) : 8, N = argc > 5 ? std::atoi(argv[4]) : 16,
            D = argc > 5 ? std::atoi(argv[5]) : 64, reps = argc > 6 ? std::atoi(argv[6]) : 20;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni;
  const std::size_t nq = static_cast<std::size_t>(B) * T * H * N, nv = static_cast<std::size_t>(B) * T * H * D,
                    np = static_cast<std::size_t>(H) * N * D, ns = static_cast<std::size_t>(B) * H * N * D;
  std::vector<float> q(nq), k(nq), v(nv), lv(nv), a(np), p(np);
  for (auto& x : q) x = normal(rng) / std::sqrt(static_cast<float>(N));
  for (auto& x : k) x = normal(rng) / std::sqrt(static_cast<float>(N));
  for (auto& x : v) x = normal(rng);
  for (auto& x : lv) x = 0.5f + 1.5f * uni(rng);
  for (auto& x : a) x = 0.9f + 0.1f * uni(rng);
  for (auto& x : p) x = 0.001f + 0.099f * uni(rng);
  const auto dev = ttr::bench::to_device;
  auto to_bf16 = [](const std::vector<float>& x) {
    std::vector<__nv_bfloat16> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16_rn(x[i]);
    return y;
  };
  const float* dlv = static_cast<const float*>(dev(lv.data(), nv * 4));
  const float* da = static_cast<const float*>(dev(a.data(), np * 4));
  const float* dp = static_cast<const float*>(dev(p.data(), np * 4));
  float *lT, *eT;
  CHECK(cudaMalloc(&lT, ns * 4));
  CHECK(cudaMalloc(&eT, ns * 4));
  std::printf("kla_kalman forward B=%d T=%d H=%d N=%d D=%d, median of %d (ms)\n", B, T, H, N, D, reps);
  for (int bf = 1; bf >= 0; --bf) {
    const std::size_t es = bf ? 2 : 4;
    ttr::gpu::KlaArgs args;
    args.B = B, args.T = T, args.H = H, args.N = N, args.D = D;
    args.dtype = bf ? ttr::gpu::DType::bf16 : ttr::gpu::DType::fp32;
    if (bf) {
      const auto qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v);
      args.q = dev(qb.data(), nq * 2), args.k = dev(kb.data(), nq * 2), args.v = dev(vb.data(), nv * 2);
    } else {
      args.q = dev(q.data(), nq * 4), args.k = dev(k.data(), nq * 4), args.v = dev(v.data(), nv * 4);
    }
    args.lambda_v = dlv, args.a_bar = da, args.p_bar = dp, args.lambda_T = lT, args.eta_T = eT;
    void *oc, *vc, *orr, *vr;
    CHECK(cudaMalloc(&oc, nv * es));
    CHECK(cudaMalloc(&vc, nv * es));
    CHECK(cudaMalloc(&orr, nv * es));
    CHECK(cudaMalloc(&vr, nv * es));
    args.o = oc, args.o_var = vc;
    const double tc = median_ms([&] { ttr::gpu::kla_kalman_chunk_forward(args); }, reps);
    const double tu = median_ms([&] { ttr::gpu::kla_kalman_chunk_unscaled_forward(args); }, reps);
    ttr::gpu::kla_kalman_chunk_forward(args);  // o of the scaled kernel for the comparison below
    ttr::gpu::KlaArgs rec = args;
    rec.o = orr, rec.o_var = vr;
    const double tr = median_ms([&] { ttr::gpu::kla_kalman_sequential_forward(rec); }, reps);
    // Agreement of the two kernels' o (relative RMS).
    const double rms = ttr::bench::rel_rms(ttr::bench::download(oc, nv, bf), ttr::bench::download(orr, nv, bf));
    std::printf("%s  chunk %.3f  chunk_unscaled %.3f  (scaled/unscaled %.2fx)  recurrent %.3f  recurrent/chunk %.2fx"
                "  o rel-rms(chunk-rec) %.2e\n",
                bf ? "bf16" : "fp32", tc, tu, tc / tu, tr, tr / tc, rms);
    // The backward: the cotangents do, do_var are o's and o_var's own values (any
    // finite tensors of their shape would do), the gradients into fresh buffers.
    ttr::gpu::KlaBackwardArgs bw;
    bw.fwd = args;
    bw.do_ = oc, bw.do_var = vc;
    void *gq, *gk, *gv;
    float *glv, *ga, *gp;
    CHECK(cudaMalloc(&gq, nq * es));
    CHECK(cudaMalloc(&gk, nq * es));
    CHECK(cudaMalloc(&gv, nv * es));
    CHECK(cudaMalloc(&glv, nv * 4));
    CHECK(cudaMalloc(&ga, np * 4));
    CHECK(cudaMalloc(&gp, np * 4));
    bw.dq = gq, bw.dk = gk, bw.dv = gv, bw.dlambda_v = glv, bw.da_bar = ga, bw.dp_bar = gp;
    const double tb = median_ms([&] { ttr::gpu::kla_kalman_chunk_backward(bw); }, reps);
    std::printf("%s  backward (chunked scans) %.3f  backward/chunk forward %.2fx\n", bf ? "bf16" : "fp32", tb, tb / tc);
    for (void* ptr : {gq, gk, gv, static_cast<void*>(glv), static_cast<void*>(ga), static_cast<void*>(gp)})
      CHECK(cudaFree(ptr));
  }
  return 0;
}
