#include "gate/inject.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {

const std::vector<std::string>& inject_shape_names() {
  static const std::vector<std::string> n = {"scale", "noise", "chunk-first-row", "one-head"};
  return n;
}

InjectShape parse_inject_shape(std::string_view name) {
  const auto& n = inject_shape_names();
  for (std::size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return static_cast<InjectShape>(i);
  throw InputError(fmt::format("unknown injection shape '{}' (scale|noise|chunk-first-row|one-head)", name));
}

std::string_view inject_shape_name(InjectShape s) { return inject_shape_names()[static_cast<std::size_t>(s)]; }

std::vector<double> default_inject_magnitudes() {
  std::vector<double> m = {0.0};
  for (int q = -28; q <= 0; ++q) m.push_back(std::pow(10.0, q / 4.0));
  return m;
}

namespace {

// splitmix64: a well-mixed 64-bit hash, so the sign of element e depends on
// (seed, tensor, e) only.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void inject_error(TensorMap<double>& values, const std::vector<TensorSpec>& outputs, InjectShape shape, double eps,
                  std::int64_t chunk_size, std::uint64_t seed) {
  if (eps == 0.0) return;
  for (const TensorSpec& spec : outputs) {
    auto it = values.find(spec.name);
    if (it == values.end()) continue;
    Tensor<double>& x = it->second;
    const bool per_token = spec.dims.size() >= 3 && spec.dims[0] == "B" && spec.dims[1] == "T" && spec.dims[2] == "H";
    const bool per_head = spec.dims.size() >= 2 && spec.dims[0] == "B" && (per_token || spec.dims[1] == "H");
    if (shape == InjectShape::chunk_first_row && !per_token) continue;
    if (shape == InjectShape::one_head && !per_head) continue;
    const std::uint64_t h = mix(seed ^ name_hash(spec.name));
    // Strides of the leading axes (row-major): B, then T, H (per token) or H (state).
    const std::int64_t T = per_token ? x.shape[1] : 1;
    const std::int64_t H = per_token ? x.shape[2] : per_head ? x.shape[1] : 1;
    const std::int64_t B = x.shape.empty() ? 1 : x.shape[0];
    const std::int64_t inner = static_cast<std::int64_t>(x.data.size()) / std::max<std::int64_t>(1, B * T * H);
    for (std::size_t e = 0; e < x.data.size(); ++e) {
      const std::int64_t i = static_cast<std::int64_t>(e) / inner;  // index over (b, t, h) or (b, h)
      const std::int64_t head = i % H, t = per_token ? (i / H) % T : 0;
      double f = eps;
      switch (shape) {
        case InjectShape::scale: break;
        case InjectShape::noise: f = (mix(h + e) & 1u) ? eps : -eps; break;
        case InjectShape::chunk_first_row: f = t % chunk_size == 0 ? eps : 0.0; break;
        case InjectShape::one_head: f = head == 0 ? eps : 0.0; break;
      }
      x.data[e] *= 1.0 + f;
    }
  }
}

}  // namespace ttr
