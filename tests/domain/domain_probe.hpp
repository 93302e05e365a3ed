// Shared by the domain tests (tests/domain/*_test.cpp): the amplitude grid, the
// probe of one (layer, direction, form, dtype) at a worst case of its derivation,
// and the walk that checks soundness just inside the domain and measures f*
// (docs/domains/tightness.md). Each probe runs the form exactly
// (the range trace of gate/range.hpp) — an independent computation of every
// intermediate — and the form itself in the dtype.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gate/range.hpp"
#include "oracles/domain.hpp"
#include "oracles/registry.hpp"

namespace ttr::test::domain_probe {

constexpr std::int64_t kT = 16, kK = 4, kV = 4;
constexpr int kChunk = 8;

// Grid of amplitudes exact in bf16 and fp16: (1 + m/8)·2^e, increasing with n.
inline double amplitude(int n) {
  const int e = n >= 0 ? n / 8 : -((-n + 7) / 8);
  const int m = n - 8 * e;
  return std::ldexp(1.0 + m / 8.0, e);
}

inline Tensor<double> tensor(Shape s, double fill) { return Tensor<double>(std::move(s), fill); }

using Builder = std::function<TensorMap<double>(const LayerSpec&, Direction, double)>;

// The outputs holding NaN/Inf, with their counts: " dk:85/85 dg:17/17"; "" when all are finite.
inline std::string nonfinite(const LayerResult& r) {
  std::string s;
  for (const auto& [name, t] : r.values) {
    std::size_t c = 0;
    for (double x : t.data) c += !std::isfinite(x);
    if (c) s += " " + name + ":" + std::to_string(c) + "/" + std::to_string(t.data.size());
  }
  return s;
}

struct Probe {
  const LayerEntry& e;
  Direction dir;
  Form form;
  Tier dtype;
  Builder build;
  Config cfg = Config::make(e.spec, {{"scale", "1"}});
  int chunk = kChunk;
  const LayerDomain& dom = *layer_domain(e.spec.name);

  TensorMap<double> at(int n) const { return build(e.spec, dir, amplitude(n)); }
  DomainContext ctx() const { return {form, dir, dtype, chunk}; }
  std::vector<DomainViolation> violations(int n) const {
    const TensorMap<double> in = at(n);
    const LayerSpec spec = direction_spec(e.spec, dir);
    return domain_violations(dom, {spec, in, cfg}, ctx());
  }
  RangeNote trace(int n) const {
    ModelSpec ms;
    ms.form = form;
    ms.dtype = dtype;
    ms.direction = dir;
    ms.chunk_size = chunk;
    return trace_range(e, at(n), cfg, ms);
  }
  bool beyond(int n) const { return trace(n).beyond; }
  bool finite(int n) const { return nonfinite(run_layer(e, form, {dtype, 0}, at(n), cfg, chunk, dir)).empty(); }
  std::string label() const {
    return e.spec.name + "/" + form_name(form) + "/" + tier_name(dtype) + "/" + direction_name(dir);
  }
};

// The largest n in [lo, hi] with pred(n) (pred monotone: true then false).
inline int last_true(int lo, int hi, const std::function<bool(int)>& pred) {
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (pred(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The first amplitude (grid index) at which the exact trace finds a value beyond
// its format (the trace is monotone in the amplitude at these worst cases).
inline int first_beyond(const Probe& p, int from = -40) {
  return last_true(from, 8 * 140, [&](int n) { return !p.beyond(n); }) + 1;
}

// Walks one (layer, direction, form, dtype) over the amplitude grid: soundness
// just inside the domain, then f* — the largest ratio bound/limit over the
// conditions at the first amplitude where the exact trace finds a value beyond
// its format (f* ≥ 1 is soundness again; f* is the domain's slack there). With
// `tight`, the derivation's bound is attained at this worst case: f* ≤ 2, and
// doubling the amplitude past that point makes the form's outputs non-finite.
inline double walk(const Probe& p, bool tight) {
  const int lo = -40, hi = 8 * 140;  // a from 2^-5 to 2^140
  const int inside = last_true(lo, hi, [&](int n) { return p.violations(n).empty(); });
  EXPECT_GT(inside, lo) << p.label() << ": the worst case is outside the domain at every amplitude";
  EXPECT_LT(inside, hi) << p.label();
  const RangeNote in_note = p.trace(inside);
  EXPECT_FALSE(in_note.beyond) << p.label() << ": an exact intermediate leaves the format inside the domain (a = "
                               << amplitude(inside) << "): " << in_note.intermediate << " (" << in_note.operation
                               << ") = " << in_note.value;
  EXPECT_TRUE(p.finite(inside)) << p.label() << ": a non-finite output just inside the domain (a = "
                                << amplitude(inside) << ")";
  const int first_beyond = last_true(inside, hi, [&](int n) { return !p.beyond(n); }) + 1;
  EXPECT_LE(first_beyond, hi) << p.label() << ": no intermediate leaves the format at a = 2^140";
  double f = 0.0;
  std::string binding;
  for (const DomainViolation& v : p.violations(first_beyond))
    if (v.value / v.limit > f) {
      f = v.value / v.limit;
      binding = v.condition;
    }
  EXPECT_GE(f, 1.0) << p.label() << ": the trace leaves the format while every condition holds";
  std::printf("domain %-44s inside a = %-9.4g first beyond a = %-9.4g f* = %-7.4g (%s)\n", p.label().c_str(),
              amplitude(inside), amplitude(first_beyond), f, binding.c_str());
  if (tight) {
    EXPECT_LE(f, 2.0) << p.label() << ": the bound `" << binding << "` is not attained at its worst case";
    EXPECT_FALSE(p.finite(first_beyond + 8)) << p.label() << ": finite outputs at twice the first amplitude beyond";
  }
  return f;
}


}  // namespace ttr::test::domain_probe
