// Soundness of the guaranteed domains away from their worst cases: a suite's
// generated cases (optional inputs, decays, initial states, l2norm, several
// sequences), with v — or k — scaled by the largest power of two that keeps them
// inside the domain of each form, direction and 16-bit dtype; the exact range
// trace (gate/range.hpp) must then find no intermediate beyond its format. gka
// scales q instead of k: its solve grows as the keys shrink (1/λ_t) as well as
// when they grow, so the keys' scales inside its domain form a window, not a
// half-line the bisection can find.
//
// The `tiny` suite runs in CI, one test per layer (tests/domain/domain_edge_test.cpp);
// the `varlen` suite (sequences to T = 2000, ~80 % of the time) in the slow binary
// (tests/domain/domain_edge_slow_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <string>
#include <utility>
#include <vector>

#include "gate/range.hpp"
#include "oracles/domain.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/domain/domain_probe.hpp"

namespace ttr::test::domain_probe {

struct EdgeCount {
  int checked = 0;  // (case, form, direction, dtype, scaled input) traced at the domain's edge
  int outside = 0;  // ... already outside at any scale (other inputs leave the domain): nothing to trace
};

// `only`: the suite's cases of these names (empty: all of them).
inline EdgeCount edge_cases(const std::string& name, const std::string& suite,
                            const std::vector<std::string>& only = {}) {
  EdgeCount n;
  const LayerEntry& e = find_layer(name);
  const LayerDomain& dom = *layer_domain(name);
  // gka: every solver its domain derives (cg's backward is not: docs/domains.md,
  // "Not derived"), Chebyshev first (the gate's and the CUDA kernels').
  std::vector<std::vector<std::pair<std::string, std::string>>> settings = {{}};
  if (e.spec.key("solver")) settings = {{{"solver", "chebyshev"}}, {{"solver", "exact"}}, {{"solver", "cg"}}};
  for (const VectorCase& c : suite_cases(e.spec, suite))
    for (const auto& extra : settings) {
      if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
      for (Direction dir : {Direction::forward, Direction::backward}) {
        const TensorMap<double> base =
            dir == Direction::forward ? generate_inputs(e.spec, c, 3) : generate_backward_inputs(e.spec, c, 3);
        std::vector<std::pair<std::string, std::string>> kv = c.config;
        kv.insert(kv.end(), extra.begin(), extra.end());
        const Config cfg = Config::make(e.spec, kv);
        const LayerSpec spec = direction_spec(e.spec, dir);
        for (Form form : e.form_list(dir))
          for (Tier dtype : {Tier::bf16, Tier::fp16})
            for (const char* scaled : {"v", e.spec.key("solver") ? "q" : "k"}) {
              const auto at = [&](int exponent) {
                TensorMap<double> in = base;
                for (double& x : in.at(scaled).data) x = std::ldexp(x, exponent);
                return in;
              };
              const DomainContext ctx{form, dir, dtype, kChunk};
              EXPECT_TRUE(dom.covers(ctx)) << name;  // every form and direction of these layers is derived
              if (!dom.covers(ctx, cfg)) continue;   // ... but for a configuration (gka's cg backward)
              const int inside = last_true(-60, 140, [&](int x) {
                const TensorMap<double> in = at(x);
                return domain_violations(dom, {spec, in, cfg}, ctx).empty();
              });
              const std::string label =
                  fmt::format("{}/{}.{}/{}/{}/{}/{} scaled by 2^{} {}", name, suite, c.name, form_name(form),
                              tier_name(dtype), direction_name(dir), scaled, inside, extra.empty() ? "" : extra[0].second);
              if (inside == -60) {  // other inputs (q, do, long sequences) already leave it: nothing to check
                ++n.outside;
                continue;
              }
              ModelSpec ms;
              ms.form = form;
              ms.dtype = dtype;
              ms.direction = dir;
              ms.chunk_size = kChunk;
              const RangeNote note = trace_range(e, at(inside), cfg, ms);
              EXPECT_FALSE(note.beyond) << label << ": " << note.intermediate << " = " << note.value << " beyond "
                                        << note.format << " inside the domain";
              ++n.checked;
            }
      }
    }
  std::printf("domain: %-26s %-7s %4d generated cases at the domain's edge, %3d outside at any scale\n",
              name.c_str(), suite.c_str(), n.checked, n.outside);
  return n;
}

// Every layer the domains cover, in the catalogue's order.
inline std::vector<std::string> domain_layers() {
  return {"linear_attn", "simple_gla", "gla", "delta_rule", "gated_delta_rule", "kda", "kaczmarz_delta_rule",
          "precond_gated_delta_rule", "precond_kda", "pdn_exact", "kalman_filter", "kla_kalman", "gka"};
}

}  // namespace ttr::test::domain_probe
