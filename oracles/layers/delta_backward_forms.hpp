// The two backward forms of a delta-family adapter, from the adapter's one
// `backward(in, cfg, core, out)`: the layer's chain rule (read + write key, the
// Kaczmarz coefficient, the preconditioner, the L2 norm of q and k) written once,
// run around either delta core (reference/family/delta_backward_core.hpp) —
// the sequential adjoint (the oracle's) or the chunkwise backward (the kernels').
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/family/delta_backward_core.hpp"

namespace ttr::layers {

template <class Layer>
struct delta_backward_forms {
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    Layer::backward(in, cfg, SequentialDeltaCore{}, out);
  }
  template <class P>
  static void chunk_backward(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                             TensorMap<typename P::acc>& out) {
    Layer::backward(policy_inputs<P>(raw), cfg, ChunkDeltaCore<P>{opt.chunk_size}, out);
  }
};

}  // namespace ttr::layers
