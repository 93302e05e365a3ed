// The GPU kernels' switches (gpu/core/env_switch.hpp) on the CPU: an unset variable
// reads as "", a set one as its bytes, and a refusal is InputError (the CLI's one
// line and exit code 2), its line naming the variable, the value and what it takes;
// a switch with known values takes those and refuses every other.
// The switches' own accepted values are judged on the GPU
// (CudaDeltaBackward.UnknownWyStageIsRefused and the GKA tests).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu/core/env_switch.hpp"
#include "oracles/error.hpp"

namespace ttr {
namespace {

constexpr const char* kName = "TTR_TEST_ENV_SWITCH";

TEST(EnvSwitch, ReadsUnsetAsEmptyAndSetAsItsValue) {
  ASSERT_EQ(0, ::unsetenv(kName));
  EXPECT_EQ(gpu::env_switch(kName), "");
  ASSERT_EQ(0, ::setenv(kName, "", 1));
  EXPECT_EQ(gpu::env_switch(kName), "");
  ASSERT_EQ(0, ::setenv(kName, " wgmma", 1));
  EXPECT_EQ(gpu::env_switch(kName), " wgmma");  // no trimming: " wgmma" is not "wgmma"
  ASSERT_EQ(0, ::unsetenv(kName));
}

TEST(EnvSwitch, KnownValuesPassAndAnyOtherIsRefused) {
  ASSERT_EQ(0, ::unsetenv(kName));
  EXPECT_EQ(gpu::env_switch(kName, {"wgmma", "mma"}, "wgmma or mma"), "");
  ASSERT_EQ(0, ::setenv(kName, "mma", 1));
  EXPECT_EQ(gpu::env_switch(kName, {"wgmma", "mma"}, "wgmma or mma"), "mma");
  for (const char* bad : {"wmma", "MMA", "mma ", "wgmma,mma"}) {
    ASSERT_EQ(0, ::setenv(kName, bad, 1));
    try {
      gpu::env_switch(kName, {"wgmma", "mma"}, "wgmma or mma");
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(kName) + "='" + bad + "': expected wgmma or mma");
    }
  }
  ASSERT_EQ(0, ::unsetenv(kName));
}

TEST(EnvSwitch, RefusalIsAnInputErrorNamingVariableValueAndChoices) {
  try {
    gpu::refuse_switch("TTR_GPU_WY", "wmma", "wgmma (the default) or mma");
    FAIL() << "refuse_switch returned";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "TTR_GPU_WY='wmma': expected wgmma (the default) or mma");
  }
}

}  // namespace
}  // namespace ttr
