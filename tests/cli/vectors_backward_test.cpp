// `ttrcheck vectors --backward` for every layer (issue 16, "Vectors"): beside each
// forward case it writes <stem>.backward.inputs (the forward inputs, unchanged, plus
// the cotangents: `do` always) and <stem>.backward.oracle, which holds d<x> for
// exactly the differentiable inputs x the case gives (an optional input absent →
// no gradient), of x's shape, finite, marked direction=backward, and recomputed bit
// for bit by `oracle --backward` from the written inputs. The suite machinery is
// shared by every suite; the tiny suite keeps this fast (13 layers × 2 cases).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "oracles/spec.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

TEST(VectorsBackward, EveryLayerGetsCotangentsAndItsGradientOracle) {
  TempDir tmp;
  const CliResult v = run_cli({"vectors", "--layer", "all", "--suite", "tiny", "--backward", "--seed", "4", "--out",
                               (tmp.path() / "v").string()});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  int layers = 0;
  for (const auto& e : ttr::registry()) {
    if (!e.has_form(ttr::Form::sequential, ttr::Direction::backward)) continue;
    ++layers;
    const std::string layer = e.spec.name;
    const ttr::LayerSpec b = ttr::backward_spec(e.spec);
    for (const char* c : {"basic", "with_state"}) {
      SCOPED_TRACE(layer + " " + c);
      const fs::path stem = tmp.path() / "v" / (layer + ".tiny." + c);
      const fs::path fin = stem.string() + ".inputs.safetensors", bin = stem.string() + ".backward.inputs.safetensors",
                     bor = stem.string() + ".backward.oracle.safetensors";
      ASSERT_TRUE(fs::exists(fin) && fs::exists(bin) && fs::exists(bor));
      const auto fwd = ttr::io::read_safetensors(fin), in = ttr::io::read_safetensors(bin),
                 grads = ttr::io::read_safetensors(bor);
      // The forward inputs, unchanged, plus the required cotangent.
      for (const auto& [name, t] : fwd.tensors) {
        ASSERT_TRUE(in.tensors.count(name)) << name;
        EXPECT_EQ(ttr::io::to_f64(in.tensors.at(name), name), ttr::io::to_f64(t, name)) << name;
      }
      ASSERT_TRUE(in.tensors.count("do"));
      // d<x> for exactly the differentiable inputs given, of their shapes, finite.
      std::size_t expected = 0;
      for (const auto& x : e.spec.inputs) {
        const std::string d = "d" + x.name;
        const bool given = in.tensors.count(x.name) > 0;
        if (!x.differentiable || !given) {
          EXPECT_FALSE(grads.tensors.count(d)) << d << " without its input";
          continue;
        }
        ++expected;
        ASSERT_TRUE(grads.tensors.count(d)) << d;
        ASSERT_TRUE(b.output(d)) << d << " is not in the backward spec";
        EXPECT_EQ(grads.tensors.at(d).shape, in.tensors.at(x.name).shape) << d;
        for (double g : ttr::io::to_f64(grads.tensors.at(d), d)) ASSERT_TRUE(std::isfinite(g)) << d;
      }
      EXPECT_EQ(grads.tensors.size(), expected);
      EXPECT_EQ(grads.metadata.at("direction"), "backward");
      // Recomputed bit for bit from the written inputs.
      const fs::path again = tmp.path() / (layer + "." + c + ".g.safetensors");
      const CliResult o = run_cli({"oracle", "--backward", "--layer", layer, "--in", bin.string(), "--out",
                                   again.string()});
      ASSERT_EQ(o.exit_code, 0) << o.err;
      const auto re = ttr::io::read_safetensors(again);
      ASSERT_EQ(re.tensors.size(), grads.tensors.size());
      for (const auto& [name, t] : grads.tensors)
        EXPECT_EQ(ttr::io::to_f64(re.tensors.at(name), name), ttr::io::to_f64(t, name)) << name;
    }
  }
  EXPECT_EQ(layers, static_cast<int>(ttr::registry().size()));
}

}  // namespace
