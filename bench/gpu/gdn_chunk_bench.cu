// Times ttrcheck's gated_delta_rule chunk forward (and the fused-recurrent
// kernel) on inputs written by bench/gpu/fla_compare.py, so both sides of the
// comparison run on the same data in the same run:
//   gdn_chunk_bench DIR B T H K V ITERS
// reads DIR/{q,k,v,beta}.bf16 (raw bf16, [B,T,H,*]) and DIR/g.f32, writes
// DIR/o_ttr.bf16 and DIR/ht_ttr.f32, prints one JSON line with median times.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"

using namespace ttr::gpu;

static std::vector<char> read_file(const std::string& path, std::size_t bytes) {
  std::vector<char> b(bytes);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(b.data(), static_cast<std::streamsize>(bytes))) throw std::runtime_error("cannot read " + path);
  return b;
}

static DeviceBuffer load(const std::string& path, std::size_t bytes) {
  DeviceBuffer d(bytes);
  const auto h = read_file(path, bytes);
  d.upload(h.data(), bytes);
  return d;
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
    std::fprintf(stderr, "usage: gdn_chunk_bench DIR B T H K V ITERS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int B = std::stoi(argv[2]), T = std::stoi(argv[3]), H = std::stoi(argv[4]), K = std::stoi(argv[5]),
            V = std::stoi(argv[6]), iters = std::stoi(argv[7]);
  const std::size_t rows = static_cast<std::size_t>(B) * T * H;
  DeviceBuffer q = load(dir + "/q.bf16", rows * K * 2), k = load(dir + "/k.bf16", rows * K * 2);
  DeviceBuffer v = load(dir + "/v.bf16", rows * V * 2), beta = load(dir + "/beta.bf16", rows * 2);
  DeviceBuffer g = load(dir + "/g.f32", rows * 4);
  DeviceBuffer o(rows * V * 2), ht(static_cast<std::size_t>(B) * H * K * V * 4);
  DeltaArgs a;
  a.B = B, a.T = T, a.H = H, a.K = K, a.V = V, a.dtype = DType::bf16, a.decay = Decay::scalar;
  a.q = q.get(), a.k = k.get(), a.v = v.get(), a.beta = beta.get(), a.g = static_cast<const float*>(g.get());
  a.o = o.get(), a.ht = static_cast<float*>(ht.get());
  a.scale = 1.0f / std::sqrt(static_cast<float>(K));
  // Stream-ordered allocations of the workspace are served from the pool after
  // the first call (the release threshold keeps them).
  cudaMemPool_t pool;
  TTR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  std::uint64_t keep = ~0ull;
  TTR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const double chunk_ms = median_ms([&] { delta_chunk_forward(a); }, iters);
  const double chunk_ms2 = median_ms([&] { delta_chunk_forward(a); }, iters);
  std::vector<char> oh(rows * V * 2), hh(static_cast<std::size_t>(B) * H * K * V * 4);
  o.download(oh.data(), oh.size());
  ht.download(hh.data(), hh.size());
  std::ofstream(dir + "/o_ttr.bf16", std::ios::binary).write(oh.data(), static_cast<std::streamsize>(oh.size()));
  std::ofstream(dir + "/ht_ttr.f32", std::ios::binary).write(hh.data(), static_cast<std::streamsize>(hh.size()));
  const double rec_ms = median_ms([&] { delta_sequential_forward(a); }, std::max(3, iters / 10));
  std::printf("{\"device\": \"%s\", \"chunk_ms\": %.5f, \"chunk_ms_repeat\": %.5f, \"recurrent_ms\": %.4f}\n",
              device_name(0).c_str(), chunk_ms, chunk_ms2, rec_ms);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gdn_chunk_bench: %s\n", e.what());
  return 1;
}
