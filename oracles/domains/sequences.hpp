// What the families' domain measures share (oracles/domains/*.cpp): the
// (sequence, head) problems of a batch — batch rows, or the sequences of a
// varlen batch (cu_seqlens, oracles/varlen.hpp) — and row norms of [B,T,H,F]
// tensors. Every measure is a bound computed per problem, maximised over them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "oracles/domain.hpp"
#include "oracles/varlen.hpp"

namespace ttr::domains {

// One (sequence, head) problem: tokens [bos, eos) of batch row b, head h, and
// the index n of its initial state in h0 ([B or N, H, K, V]).
struct Problem {
  std::int64_t b = 0, bos = 0, eos = 0, h = 0, n = 0;
};

inline std::vector<Problem> problems(const TensorMap<double>& in) {
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2);
  std::vector<Problem> out;
  if (const auto cu = in.find(kCuSeqlens); cu != in.end()) {
    const auto& c = cu->second.data;
    for (std::size_t n = 0; n + 1 < c.size(); ++n)
      for (std::int64_t h = 0; h < H; ++h)
        out.push_back({0, static_cast<std::int64_t>(c[n]), static_cast<std::int64_t>(c[n + 1]), h,
                       static_cast<std::int64_t>(n)});
    return out;
  }
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) out.push_back({b, 0, T, h, b});
  return out;
}

// Row x[b, t, h, :] of a [B,T,H,F] tensor (F = 1 for [B,T,H]).
struct Row {
  const double* p;
  std::int64_t n;
  double max_abs() const {
    double m = 0.0;
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(p[i]));
    return m;
  }
  double l1() const {
    double s = 0.0;
    for (std::int64_t i = 0; i < n; ++i) s += std::abs(p[i]);
    return s;
  }
  double l2sq() const {
    double s = 0.0;
    for (std::int64_t i = 0; i < n; ++i) s += p[i] * p[i];
    return s;
  }
  double l2() const { return std::sqrt(l2sq()); }
};

inline Row row(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  const std::int64_t T = x.dim(1), H = x.dim(2), F = x.shape.size() > 3 ? x.dim(3) : 1;
  return {x.data.data() + ((b * T + t) * H + h) * F, F};
}

// The state block x[n, h, :, :] of a [N,H,K,V] tensor, as one row of K·V values.
inline Row block(const Tensor<double>& x, std::int64_t n, std::int64_t h) {
  const std::int64_t H = x.dim(1), KV = x.dim(2) * x.dim(3);
  return {x.data.data() + (n * H + h) * KV, KV};
}

inline const Tensor<double>* optional(const TensorMap<double>& in, const std::string& name) {
  const auto it = in.find(name);
  return it == in.end() ? nullptr : &it->second;
}

inline double max_abs(const Tensor<double>& x) {
  double m = 0.0;
  for (double v : x.data) m = std::max(m, std::abs(v));
  return m;
}

// `scale` if set, else K^-1/2 (oracles/layers/adapter.hpp: scale_of).
inline double scale_of(const DomainInputs& in) {
  if (in.cfg.has("scale")) return in.cfg.number("scale");
  return 1.0 / std::sqrt(static_cast<double>(in.tensors.at("q").dim(3)));
}

inline bool l2norm_on(const DomainInputs& in) {
  return in.cfg.has("use_qk_l2norm_in_kernel") && in.cfg.flag("use_qk_l2norm_in_kernel");
}

// The tokens of one chunk of the form: the chunk size for the chunk forms (at
// most the sequence's length), 0 where the form has no chunk.
inline std::int64_t chunk_tokens(const DomainContext& c, std::int64_t len) {
  return c.form == Form::chunk ? std::min<std::int64_t>(c.chunk_size, len) : 0;
}

}  // namespace ttr::domains
