// The GPU kernels' benchmarking switches (TTR_GPU_STATE_BV, TTR_GPU_STATE_STAGES,
// TTR_GPU_WY, TTR_GPU_GKA_SOLVE, TTR_GPU_GKA_BACKWARD_GEMM), read at every launch. A
// value a switch does not know is the user's error (InputError: the CLI's one line
// and exit code 2), never taken for the default: a misspelt switch would time the
// kernel it meant to avoid under another name.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "oracles/error.hpp"

namespace ttr::gpu {

// The variable's value, "" when unset.
inline std::string env_switch(const char* name) {
  const char* e = std::getenv(name);
  return e ? e : "";
}

[[noreturn]] inline void refuse_switch(const char* name, const std::string& value, const std::string& expected) {
  throw InputError(std::string(name) + "='" + value + "': expected " + expected);
}

// The variable's value, "" when unset or empty, else one of `known`; any other value
// is refused, `expected` saying what the switch takes.
inline std::string env_switch(const char* name, std::initializer_list<const char*> known, const std::string& expected) {
  std::string v = env_switch(name);
  if (v.empty()) return v;
  for (const char* k : known)
    if (v == k) return v;
  refuse_switch(name, v, expected);
}

}  // namespace ttr::gpu
