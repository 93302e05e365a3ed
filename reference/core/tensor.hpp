// A dense row-major tensor of scalars in FLA layout, and views of one
// (batch, head) sequence of it. Recurrences read a sequence token by token:
// row(t) is the contiguous feature vector of token t.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace ttr {

using Shape = std::vector<std::int64_t>;

inline std::int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

template <class T>
struct Tensor {
  Shape shape;
  std::vector<T> data;

  Tensor() = default;
  Tensor(Shape s, const T& fill) : shape(std::move(s)), data(static_cast<std::size_t>(ttr::numel(shape)), fill) {}
  std::int64_t numel() const { return ttr::numel(shape); }
  std::int64_t dim(std::size_t i) const { return shape.at(i); }
};

// Tensors by their docs/layers.md names.
template <class T>
using TensorMap = std::map<std::string, Tensor<T>>;

// One (b, h) sequence of a [B, T, H, F] tensor: token t's F features are contiguous.
template <class T>
struct SeqView {
  T* base;              // element [b, 0, h, 0]
  std::int64_t stride;  // H * F: distance between tokens
  int features;         // F
  T* row(std::int64_t t) const { return base + t * stride; }
  T& at(std::int64_t t) const { return base[t * stride]; }  // for [B, T, H] (F = 1)
};

template <class T>
SeqView<T> seq(Tensor<T>& x, std::int64_t b, std::int64_t h) {
  const std::int64_t T_ = x.shape.at(1), H = x.shape.at(2);
  const std::int64_t F = x.shape.size() > 3 ? x.shape[3] : 1;
  return {x.data.data() + (b * T_ * H + h) * F, H * F, static_cast<int>(F)};
}
template <class T>
SeqView<const T> seq(const Tensor<T>& x, std::int64_t b, std::int64_t h) {
  const std::int64_t T_ = x.shape.at(1), H = x.shape.at(2);
  const std::int64_t F = x.shape.size() > 3 ? x.shape[3] : 1;
  return {x.data.data() + (b * T_ * H + h) * F, H * F, static_cast<int>(F)};
}

// Element [b, h, :, :] of a [B, H, K, V] state tensor (or [B, H, K] vector state).
template <class T>
T* state_block(Tensor<T>& x, std::int64_t b, std::int64_t h) {
  const std::int64_t H = x.shape.at(1);
  std::int64_t inner = 1;
  for (std::size_t i = 2; i < x.shape.size(); ++i) inner *= x.shape[i];
  return x.data.data() + (b * H + h) * inner;
}
template <class T>
const T* state_block(const Tensor<T>& x, std::int64_t b, std::int64_t h) {
  return state_block(const_cast<Tensor<T>&>(x), b, h);
}

}  // namespace ttr
