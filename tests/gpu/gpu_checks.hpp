// Shared by the GPU tests: skip without a device, the dims of a case, and
// reporting gate checks (one GPUCHECK line each, which scripts/gpu-check
// collects into its table) and asserting they pass with no NaN/Inf.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_gate/gate.hpp"
#include "oracles/error_model.hpp"

namespace ttr::test {

#define TTR_REQUIRE_DEVICE()                       \
  do {                                             \
    const cuda::Status st = cuda::status();        \
    if (!st.usable()) GTEST_SKIP() << st.reason(); \
  } while (0)

// Delta-family layers read K, V; kla_kalman reads N, D: both are bound.
inline Dims dims(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

inline double worst_ratio(const CheckResult& r) {
  double w = 0;
  for (const auto& t : r.tensors) w = std::max(w, t.max_ratio);
  return w;
}

inline void report(const std::vector<GateCheck>& checks) {
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  for (const GateCheck& c : checks) {
    std::string detail;
    for (const auto& t : c.result.tensors)
      if (t.present) detail += fmt::format(" {}={:.3g}", t.name, t.max_ratio);
    std::printf("GPUCHECK %-70s %-4s max_ratio=%.3g%s\n", c.id.c_str(), c.result.pass ? "pass" : "FAIL",
                worst_ratio(c.result), detail.c_str());
  }
  std::fflush(stdout);
}

inline void expect_pass(const std::vector<GateCheck>& checks) {
  for (const GateCheck& c : checks) {
    EXPECT_TRUE(c.result.pass) << c.id << ": max ratio " << worst_ratio(c.result);
    for (const auto& t : c.result.tensors) {
      EXPECT_EQ(t.nan_count, 0) << c.id << " " << t.name << ": NaN (unwritten output?)";
      EXPECT_EQ(t.inf_count, 0) << c.id << " " << t.name;
    }
  }
}

}  // namespace ttr::test
