// The bf16 state pass's column tilings (stage 2 of delta_chunk.cu, which includes this
// inside its namespace after delta_chunk_bf16.cuh and set_smem): TTR_GPU_STATE_BV, read
// at every launch, chooses one, and launch_bf16_state_pass launches it, through a
// thread-block cluster where its blocks share the W tiles (gpu/core/cluster.cuh).
// TTR_GPU_STATE_STAGES (2 or 3) sets how many chunks' inputs the unclustered tilings
// hold: with 3 each chunk's loads have two chunks' compute to land in. The default is 3
// for the 32-column tilings (one block a multiprocessor at the benchmark's shape; H100,
// 2026-12-06: the pass 0.52 -> 0.47 ms, docs/gpu-delta-backward-speed-2026-12-06.md) and 2 for the
// others (16 columns fit two blocks a multiprocessor with 2, one with 3: not measured).
#pragma once

struct StateTiling {
  int bv = 16, split = 1;
  bool cluster = false;
  int stages = 2;
  bool hopper = false;  // the warpgroup-MMA pass (delta_state_wgmma_sm90a.cu), 3 stages of its own
};
inline int state_stages(const StateTiling& tiling) {
  // A value it does not know is refused whatever the tiling.
  const std::string t = env_switch("TTR_GPU_STATE_STAGES", {"2", "3"}, "2 or 3 (the cluster tilings take 2)");
  // The Hopper pass keeps 3 buffers of its own: "3" says so, "2" would time it under
  // another name (it is the default on compute capability 9.0; "32" names the
  // mma.sync pass that takes 2).
  if (tiling.hopper && t == "2")
    throw InputError(
        "TTR_GPU_STATE_STAGES='2': the Hopper state pass (TTR_GPU_STATE_BV unset or 32w on compute capability 9.0) "
        "keeps 3 buffers; TTR_GPU_STATE_BV=32 runs the mma.sync pass, which takes 2");
  if (tiling.hopper) return 3;
  if (t.empty()) return tiling.bv == 32 && !tiling.cluster ? 3 : 2;
  if (t == "2") return 2;
  if (t == "3" && !tiling.cluster) return 3;
  refuse_switch("TTR_GPU_STATE_STAGES", t, "2 or 3 (the cluster tilings take 2)");
}
// The default, the same as "32w": the Hopper pass (32 columns, one warpgroup a block,
// wgmma) where the device is compute capability 9.0 and K = 128, V a multiple of 32
// (forward + backward 7.6 % faster than "32" on the H100, 2026-12-07:
// docs/gpu-delta-backward-speed.md, "The Hopper passes run"); elsewhere the 32-column
// mma.sync tiling where V allows (the fastest of the five mma.sync tilings on the H200,
// 2026-12-06: docs/gpu-delta-backward-speed-2026-12-06.md, "The state pass's column
// tilings measured"), else 16, as "32" falls back. "32" names that mma.sync tiling on
// every device.
inline StateTiling column_tiling(int K, int V) {
  const std::string t = env_switch("TTR_GPU_STATE_BV");
  const bool wide = V % 32 == 0;  // else the 32-column tilings fall back to 16 columns
  if (t.empty() || t == "32w") {
    if (chunk::hopper_state_passes_chosen(K, V)) return {32, 1, false, 3, true};
    return wide ? StateTiling{32, 1, false} : StateTiling{};
  }
  if (t == "16") return {};
  if (t == "16c") return {16, 1, true};
  if (t == "32") return wide ? StateTiling{32, 1, false} : StateTiling{};
  if (t == "32x2") return wide ? StateTiling{32, 2, false} : StateTiling{};
  if (t == "32x2c") return wide ? StateTiling{32, 2, true} : StateTiling{};
  // A misspelt value would time the default under another name.
  refuse_switch("TTR_GPU_STATE_BV", t, "16, 32, 32x2, 16c, 32x2c or 32w");
}
inline StateTiling state_tiling(int K, int V) {
  StateTiling t = column_tiling(K, V);
  t.stages = state_stages(t);
  return t;
}
// Blocks a cluster: the largest of 8, 4, 2 dividing the head's column blocks (1: none).
inline unsigned cluster_blocks(int tiles) {
  for (unsigned c : {8u, 4u, 2u})
    if (tiles % static_cast<int>(c) == 0) return c;
  return 1;
}

// CX blocks a cluster (CLUSTER; a divisor of V/BV, at least 2).
template <Decay D, int BV, int KV, int SPLIT, bool CLUSTER = false>
void launch_bf16_state_pass(const DeltaArgs& a, const Shape& s, const Work& work, unsigned BH, cudaStream_t stream,
                            int stages, unsigned cx = 1) {
  const dim3 grid(a.V / BV, BH), block(SPLIT * 2 * a.K);
  // Three stages where shared memory holds them (K = 128, 32 columns: 135 KB), else two.
  if (stages == 3 && bf16k::state_smem<D>(s, BV, CLUSTER, 3) > static_cast<std::size_t>(max_smem_optin())) stages = 2;
  const std::size_t sm2 = bf16k::state_smem<D>(s, BV, CLUSTER, stages);
  auto* kernel = bf16k::state_pass<D, BV, KV, SPLIT, CLUSTER>;
  set_smem(kernel, sm2);
  if constexpr (!CLUSTER) {
    kernel<<<grid, block, sm2, stream>>>(s, a.h0, a.ht, work, stages);
  } else {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = sm2, cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cx, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    TTR_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, s, a.h0, a.ht, work, 2));
  }
}
