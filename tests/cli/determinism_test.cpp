// `ttrcheck vectors`: the same seed gives bit-identical files (inputs, oracles and
// manifest.json); another seed gives other inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

std::vector<std::string> sorted_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_vectors(const fs::path& dir, const std::string& seed) {
  const CliResult r =
      run_cli({"vectors", "--layer", "all", "--suite", "tiny", "--seed", seed, "--out", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliDeterminism, SameSeedBitIdenticalFiles) {
  TempDir tmp;
  const fs::path a = tmp.path() / "a", b = tmp.path() / "b";
  write_vectors(a, "7");
  write_vectors(b, "7");
  const auto files = sorted_files(a);
  EXPECT_EQ(files, sorted_files(b));
  // Two tiny cases per layer, inputs and oracle each, plus the manifest.
  EXPECT_EQ(files.size(), ttr::registry().size() * 2 * 2 + 1);
  EXPECT_NE(std::find(files.begin(), files.end(), "manifest.json"), files.end());
  for (const auto& f : files) {
    const std::string x = slurp(a / f), y = slurp(b / f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between two runs with seed 7";
  }
}

TEST(CliDeterminism, OtherSeedOtherInputs) {
  TempDir tmp;
  const fs::path a = tmp.path() / "a", c = tmp.path() / "c";
  write_vectors(a, "7");
  write_vectors(c, "8");
  const auto files = sorted_files(a);
  ASSERT_EQ(files, sorted_files(c));
  int inputs_files = 0;
  for (const auto& f : files) {
    if (!f.ends_with(".inputs.safetensors")) continue;
    ++inputs_files;
    const auto x = ttr::io::read_safetensors(a / f), y = ttr::io::read_safetensors(c / f);
    ASSERT_EQ(x.tensors.size(), y.tensors.size()) << f;
    EXPECT_EQ(x.metadata.at("seed"), "7");
    EXPECT_EQ(y.metadata.at("seed"), "8");
    // Every random tensor is redrawn (each has its own stream keyed by the seed).
    for (const auto& [name, t] : x.tensors) {
      EXPECT_EQ(t.shape, y.tensors.at(name).shape) << f << " " << name;
      EXPECT_NE(t.data, y.tensors.at(name).data) << f << ": tensor '" << name << "' is the same for seeds 7 and 8";
    }
  }
  EXPECT_EQ(inputs_files, static_cast<int>(ttr::registry().size() * 2));
  EXPECT_NE(slurp(a / "manifest.json"), slurp(c / "manifest.json"));
}

}  // namespace
