// Running a generated case through the registry, and the norms the properties
// compare. Light (no MPFR headers): the MPFR tier is reached through
// ttr::run_layer, whose outputs are the MPFR results rounded to nearest double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "properties/gen/layer_inputs.hpp"

namespace ttr {
inline void showValue(const Arith& a, std::ostream& os) { os << arith_name(a); }
}  // namespace ttr

namespace ttr::prop {

inline constexpr double kU = 0x1p-53;  // unit roundoff of double
inline const Arith kFp64{Tier::fp64, 0};
inline const Arith kMpfr128{Tier::mpfr, 128};  // "exact" for inequalities: outputs rounded once to double

inline LayerResult run(const gen::LayerCase& c, Form form, const Arith& a) {
  const LayerEntry& e = find_layer(c.layer);
  return run_layer(e, form, a, c.in, Config::make(e.spec, c.sets), c.C);
}
inline LayerResult run(const gen::LayerCase& c, const Arith& a) { return run(c, Form::sequential, a); }

// Bit-for-bit equality (NaN payloads and signed zeros included).
inline bool bits_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

inline bool all_finite(const std::vector<double>& x) {
  for (double e : x)
    if (!std::isfinite(e)) return false;
  return true;
}

// ‖·‖_F of block (b, h) of a [B, H, R, C] tensor.
inline double block_fro(const Tensor<double>& t, std::int64_t b, std::int64_t h) {
  const std::int64_t n = t.dim(2) * t.dim(3);
  const double* p = t.data.data() + (b * t.dim(1) + h) * n;
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += p[i] * p[i];
  return std::sqrt(s);
}
// ‖block(x) − block(y)‖_F.
inline double block_fro_diff(const Tensor<double>& x, const Tensor<double>& y, std::int64_t b, std::int64_t h) {
  const std::int64_t n = x.dim(2) * x.dim(3);
  const std::int64_t off = (b * x.dim(1) + h) * n;
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = x.data[off + i] - y.data[off + i];
    s += d * d;
  }
  return std::sqrt(s);
}
// Pointer to row (b, t, h, :) of a [B, T, H, F] tensor.
inline const double* row(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  return x.data.data() + ((b * x.dim(1) + t) * x.dim(2) + h) * x.dim(3);
}
inline double row_norm(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  return gen::norm2(row(x, b, t, h), static_cast<int>(x.dim(3)));
}
// Element (b, t, h) of a [B, T, H] tensor.
inline double at3(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  return x.data[static_cast<std::size_t>((b * x.dim(1) + t) * x.dim(2) + h)];
}

// The first `len` tokens of every tensor with a T axis (axis 1 of the layer's
// [B, T, ...] inputs; found from the spec's symbolic dims).
inline gen::LayerCase prefix(const gen::LayerCase& c, std::int64_t len) {
  gen::LayerCase p = c;
  p.dims["T"] = len;
  const LayerSpec& spec = find_layer(c.layer).spec;
  for (auto& [name, t] : p.in) {
    const TensorSpec* ts = spec.input(name);
    if (!ts || ts->dims.size() < 2 || ts->dims[1] != "T") continue;
    const std::int64_t T = t.dim(1), inner = t.numel() / (t.dim(0) * T);
    std::vector<double> d;
    for (std::int64_t b = 0; b < t.dim(0); ++b)
      d.insert(d.end(), t.data.begin() + b * T * inner, t.data.begin() + (b * T + len) * inner);
    t.data = std::move(d);
    t.shape[1] = len;
  }
  return p;
}

// Scales every key row (b, t, h, :) to unit norm (the zero row stays zero).
inline void normalise_keys(Tensor<double>& k) {
  const std::int64_t K = k.shape.back();
  for (std::int64_t r = 0; r < k.numel() / K; ++r) {
    const double n = gen::norm2(&k.data[r * K], static_cast<int>(K));
    if (n > 0)
      for (std::int64_t i = 0; i < K; ++i) k.data[r * K + i] /= n;
  }
}

}  // namespace ttr::prop
