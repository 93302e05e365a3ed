// What the delta core's adjoint returns, and how it spaces its checkpoints
// (checkpoint_spacing.hpp): shared by its two layouts (delta_backward.hpp, the
// definition's operations; and delta_backward_scaled.hpp, fewer operations for the
// high-precision tiers).
#pragma once

#include <cstdint>

#include "reference/core/tensor.hpp"
#include "reference/family/checkpoint_spacing.hpp"

namespace ttr {

// Gradients of one delta-core run. dg has g's shape ([B,T,H] or [B,T,H,K]) and is
// empty for Decay::none; dh0 [B,H,K,V] is ∂L/∂h0 (of the zero state when h0 is absent).
template <class T>
struct DeltaGrads {
  Tensor<T> dq, dk, dw, dv, dbeta, dg, dh0;
};

template <class T>
struct DeltaGradSequence {
  SeqView<T> dq, dk, dw, dv, dbeta, dg;  // dg: [T] or [T, K]; unused for Decay::none
};

}  // namespace ttr
