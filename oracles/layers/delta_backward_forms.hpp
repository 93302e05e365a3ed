// The two backward forms of a delta-family adapter, from the adapter's one
// `backward(in, cfg, core, out)`: the layer's chain rule (read + write key, the
// Kaczmarz coefficient, the preconditioner, the L2 norm of q and k) written once,
// run around either delta core (reference/family/delta_backward_core.hpp) —
// the sequential adjoint (the oracle's) or the chunkwise backward (the kernels').
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/core/mutant.hpp"
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
    const ChunkDeltaCore<P> core{opt.chunk_size};
    // mutant l2norm-backward-skipped: a kernel that normalises q and k in its
    // forward (use_qk_l2norm_in_kernel) but returns the gradients of the
    // normalised q̂, k̂ as dq, dk — the backward of x ↦ x/√(‖x‖² + eps)
    // (l2norm_backward.hpp) never applied. Computed as exactly that: the chain rule
    // run on the normalised inputs with the flag off.
    const char* l2 = "use_qk_l2norm_in_kernel";
    if (mutated(Mutant::l2norm_backward_skipped) && cfg.has(l2) && cfg.flag(l2)) {
      TensorMap<typename P::acc> in = policy_inputs<P>(raw);
      QK<typename P::acc> qk = qk_of_stored<P>(in, cfg);
      in["q"] = std::move(qk.q);
      in["k"] = std::move(qk.k);
      Layer::backward(in, cfg.without_flag(l2), core, out);
      return;
    }
    Layer::backward(policy_inputs<P>(raw), cfg, core, out);
  }
};

}  // namespace ttr::layers
