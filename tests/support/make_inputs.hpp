// Deterministic small-input builders shared by the per-layer tests: splitmix64
// uniform doubles, multiples of 1/4 as exact rationals, flat indexing helpers, the
// standard gated / delta-family input sets, and per-token slicing.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "reference/core/tensor.hpp"
#include "tests/support/rational.hpp"

namespace ttr::test {

inline std::size_t i4(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return static_cast<std::size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d);
}
inline std::size_t i3(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c) {
  return static_cast<std::size_t>((a * s[1] + b) * s[2] + c);
}

struct Uniform {  // splitmix64: reproducible on every platform
  std::uint64_t s;
  double next(double lo, double hi) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};
inline Tensor<double> uniform(Shape shape, std::uint64_t seed, double lo, double hi) {
  Tensor<double> x(shape, 0.0);
  Uniform u{seed};
  for (auto& e : x.data) e = u.next(lo, hi);
  return x;
}
// The same doubles converted to a scalar type S (exactly, for S at least as wide).
template <class S>
Tensor<S> uniform_as(Shape shape, std::uint64_t seed, double lo, double hi) {
  const Tensor<double> d = uniform(std::move(shape), seed, lo, hi);
  Tensor<S> x;
  x.shape = d.shape;
  x.data.reserve(d.data.size());
  for (double e : d.data) x.data.push_back(from_double<S>(e));
  return x;
}

// Deterministic "simple rationals": multiples of 1/4 in [lo/4, hi/4] (LCG).
struct QuarterGen {
  std::uint64_t s;
  rational next(int lo = -4, int hi = 4) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return rational(lo + static_cast<int>((s >> 33) % static_cast<std::uint64_t>(hi - lo + 1)), 4);
  }
};
inline Tensor<rational> quarters(Shape shape, std::uint64_t seed, int lo = -4, int hi = 4) {
  Tensor<rational> x(shape, rational(0));
  QuarterGen g{seed};
  for (auto& e : x.data) e = g.next(lo, hi);
  return x;
}
inline Tensor<rational> from_values(Shape shape, std::vector<rational> values) {
  Tensor<rational> x(shape, rational(0));
  EXPECT_EQ(static_cast<std::size_t>(x.numel()), values.size());
  x.data = std::move(values);
  return x;
}

// The standard inputs of the gated layers, drawn in this order with consecutive
// seeds: q (seed, [−1, 1]), k (k_lo..k_hi), v ([−1, 1]), then beta (if any), g
// ([−1, 0], [B,T,H] or per key [B,T,H,K]), g_atk and beta_atk (if atk), h0 (if any).
// Landmarks: token 1 has γ = 1 exactly (every channel); token 3 has γ ≈ 1e-30
// (per key: on channel 0, and γ = 1 on channel 1).
struct GatedInputSpec {
  double k_lo = -1, k_hi = 1;
  bool beta = true;
  double beta_lo = 0.05, beta_hi = 0.75;
  bool per_key_gate = false;
  bool atk = false;
  bool with_h0 = false;
};
inline TensorMap<double> gated_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K,
                                      std::int64_t V, std::uint64_t seed, const GatedInputSpec& p) {
  TensorMap<double> in;
  std::uint64_t s = seed;
  in["q"] = uniform({B, T, H, K}, s++, -1, 1);
  in["k"] = uniform({B, T, H, K}, s++, p.k_lo, p.k_hi);
  in["v"] = uniform({B, T, H, V}, s++, -1, 1);
  if (p.beta) in["beta"] = uniform({B, T, H}, s++, p.beta_lo, p.beta_hi);
  in["g"] = p.per_key_gate ? uniform({B, T, H, K}, s++, -1, 0) : uniform({B, T, H}, s++, -1, 0);
  if (p.atk) {
    in["g_atk"] = uniform({B, T, H}, s++, -1, 0);
    in["beta_atk"] = uniform({B, T, H}, s++, 0, 1);
  }
  auto& g = in["g"];
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      if (p.per_key_gate) {
        if (T > 1)
          for (std::int64_t i = 0; i < K; ++i) g.data[i4(g.shape, b, 1, h, i)] = 0.0;
        if (T > 3) {
          g.data[i4(g.shape, b, 3, h, 0)] = std::log(1e-30);
          g.data[i4(g.shape, b, 3, h, 1)] = 0.0;
        }
      } else {
        if (T > 1) g.data[i3(g.shape, b, 1, h)] = 0.0;
        if (T > 3) g.data[i3(g.shape, b, 3, h)] = std::log(1e-30);
      }
    }
  if (p.with_h0) in["h0"] = uniform({B, H, K, V}, s++, -1, 1);
  return in;
}

// Token t of every named [B=1, T, ...] tensor, as a one-token input.
inline TensorMap<double> token_slice(const TensorMap<double>& in, std::initializer_list<const char*> names,
                                     std::int64_t t, std::int64_t T) {
  TensorMap<double> one;
  for (const char* name : names) {
    const auto& x = in.at(name);
    const std::int64_t per_token = x.numel() / T;
    Tensor<double> y = x;
    y.shape[1] = 1;
    y.data.assign(x.data.begin() + t * per_token, x.data.begin() + (t + 1) * per_token);
    one[name] = y;
  }
  return one;
}

}  // namespace ttr::test
