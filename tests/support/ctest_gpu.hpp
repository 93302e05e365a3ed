// CTest resource groups (tests/CMakeLists.txt gives the gpu tests RESOURCE_GROUPS
// gpus:1; scripts/ctest-gpu-resources writes the spec): with
// `ctest --resource-spec-file`, CTest names a test's GPU in
// CTEST_RESOURCE_GROUP_0_GPUS ("id:3,slots:1"). CUDA picks its devices from
// CUDA_VISIBLE_DEVICES, so the GPU test binary sets that from CTest's id before
// CUDA starts (tests/gpu/ctest_resources.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace ttr::test {

// The GPU id CTest allotted ("3"), or nullopt when the test was not given one
// (no resource spec: every GPU stays visible).
inline std::optional<std::string> ctest_gpu_id(const std::function<const char*(const char*)>& env) {
  const char* groups = env("CTEST_RESOURCE_GROUP_COUNT");
  const char* gpus = env("CTEST_RESOURCE_GROUP_0_GPUS");
  if (!groups || !gpus) return std::nullopt;
  const std::string s = gpus;  // "id:<id>,slots:<n>"
  if (s.rfind("id:", 0) != 0) return std::nullopt;
  const auto comma = s.find(',');
  std::string id = s.substr(3, comma == std::string::npos ? std::string::npos : comma - 3);
  if (id.empty()) return std::nullopt;
  return id;
}

}  // namespace ttr::test
