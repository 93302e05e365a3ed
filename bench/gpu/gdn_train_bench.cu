// Times ttrcheck's gated_delta_rule chunk forward and chunk backward (bf16) as a
// training step runs them, on inputs written by bench/gpu/fla_backward_compare.py
// so that FLA's chunk_gated_delta_rule forward + backward runs on the same data
// in the same run:
//   gdn_train_bench DIR B T H K V ITERS
// reads DIR/{q,k,v,beta,do}.bf16 (raw bf16, [B,T,H,*]) and DIR/g.f32; writes the
// gradients DIR/{dq,dk,dv,dbeta}_ttr.bf16 and DIR/dg_ttr.f32; prints one JSON
// line of medians (forward, backward, forward + backward back to back). With
// TTR_GPU_STAGE_TIMING=1 the kernels print their per-stage times on stderr. With
// TTR_BENCH_KEEP_UT_INVERSE=1 the forward keeps its UT inverses and the backward reads
// them (DeltaArgs::ut_inverse_out, DeltaBackwardArgs::ut_inverse: FLA's saved A)
// instead of inverting again; the gradients must be the same bits as without.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"

using namespace ttr::gpu;

static DeviceBuffer load(const std::string& path, std::size_t bytes) {
  std::vector<char> h(bytes);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(h.data(), static_cast<std::streamsize>(bytes))) throw std::runtime_error("cannot read " + path);
  DeviceBuffer d(bytes);
  d.upload(h.data(), bytes);
  return d;
}

static void save(const std::string& path, const DeviceBuffer& d, std::size_t bytes) {
  std::vector<char> h(bytes);
  d.download(h.data(), bytes);
  std::ofstream(path, std::ios::binary).write(h.data(), static_cast<std::streamsize>(bytes));
}

template <class F>
static double median_ms(F&& f, int iters) {
  cudaEvent_t a, b;
  TTR_CUDA_CHECK(cudaEventCreate(&a));
  TTR_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  TTR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    TTR_CUDA_CHECK(cudaEventRecord(a));
    f();
    TTR_CUDA_CHECK(cudaEventRecord(b));
    TTR_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    TTR_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char** argv) try {
  if (argc != 8) {
    std::fprintf(stderr, "usage: gdn_train_bench DIR B T H K V ITERS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int B = std::stoi(argv[2]), T = std::stoi(argv[3]), H = std::stoi(argv[4]), K = std::stoi(argv[5]),
            V = std::stoi(argv[6]), iters = std::stoi(argv[7]);
  const std::size_t rows = static_cast<std::size_t>(B) * T * H;
  DeviceBuffer q = load(dir + "/q.bf16", rows * K * 2), k = load(dir + "/k.bf16", rows * K * 2);
  DeviceBuffer v = load(dir + "/v.bf16", rows * V * 2), beta = load(dir + "/beta.bf16", rows * 2);
  DeviceBuffer dout = load(dir + "/do.bf16", rows * V * 2), g = load(dir + "/g.f32", rows * 4);
  DeviceBuffer o(rows * V * 2), dq(rows * K * 2), dk(rows * K * 2), dv(rows * V * 2), dbeta(rows * 2), dg(rows * 4);
  DeltaBackwardArgs x;
  DeltaArgs& a = x.fwd;
  a.B = B, a.T = T, a.H = H, a.K = K, a.V = V, a.dtype = DType::bf16, a.decay = Decay::scalar;
  a.q = q.get(), a.k = k.get(), a.v = v.get(), a.beta = beta.get(), a.g = static_cast<const float*>(g.get());
  a.o = o.get();
  a.scale = 1.0f / std::sqrt(static_cast<float>(K));
  x.do_ = dout.get();
  x.dq = dq.get(), x.dk = dk.get(), x.dv = dv.get(), x.dbeta = dbeta.get(), x.dg = static_cast<float*>(dg.get());
  const char* keep_t = std::getenv("TTR_BENCH_KEEP_UT_INVERSE");
  DeviceBuffer ut_inverse(keep_t && std::string(keep_t) == "1" ? delta_ut_inverse_bytes(a) : 0);
  if (ut_inverse.get()) a.ut_inverse_out = ut_inverse.get(), x.ut_inverse = ut_inverse.get();
  // Stream-ordered workspaces are served from the pool after the first call.
  cudaMemPool_t pool;
  TTR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  std::uint64_t keep = ~0ull;
  TTR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const double fwd = median_ms([&] { delta_chunk_forward(a); }, iters);
  const double bwd = median_ms([&] { delta_chunk_backward(x); }, iters);
  const double both = median_ms([&] { delta_chunk_forward(a), delta_chunk_backward(x); }, iters);
  const double both2 = median_ms([&] { delta_chunk_forward(a), delta_chunk_backward(x); }, iters);
  save(dir + "/dq_ttr.bf16", dq, rows * K * 2);
  save(dir + "/dk_ttr.bf16", dk, rows * K * 2);
  save(dir + "/dv_ttr.bf16", dv, rows * V * 2);
  save(dir + "/dbeta_ttr.bf16", dbeta, rows * 2);
  save(dir + "/dg_ttr.f32", dg, rows * 4);
  std::printf("{\"device\": \"%s\", \"fwd_ms\": %.5f, \"bwd_ms\": %.5f, \"fwd_bwd_ms\": %.5f, \"fwd_bwd_ms_repeat\": %.5f}\n",
              device_name(0).c_str(), fwd, bwd, both, both2);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gdn_train_bench: %s\n", e.what());
  return 1;
}
