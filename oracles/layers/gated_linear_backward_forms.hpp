// The three backward forms of a gated linear adapter (linear_attn, simple_gla,
// gla), from the adapter's one `backward(in, cfg, core, out)` run around either
// gated linear core (reference/family/gated_linear_backward_core.hpp): the
// sequential adjoint (the oracle's), the chunkwise backward and the reverse-mode
// scan (the kernels'). The chunk and scan forms read their inputs as a kernel
// under the arithmetic policy P does (policy_inputs; the scan's own narrowing is
// idempotent on them).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "reference/family/gated_linear_backward_core.hpp"

namespace ttr::layers {

template <class Layer>
struct gated_linear_backward_forms {
  template <class T>
  static void sequential_backward(const TensorMap<T>& in, const Config& cfg, const FormOptions&, TensorMap<T>& out) {
    Layer::backward(in, cfg, SequentialGatedLinearCore{}, out);
  }
  template <class P>
  static void chunk_backward(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions& opt,
                             TensorMap<typename P::acc>& out) {
    Layer::backward(policy_inputs<P>(raw), cfg, ChunkGatedLinearCore<P>{opt.chunk_size}, out);
  }
  // As the forward `scan` form: one Blelloch tree over the whole sequence.
  template <class P>
  static void scan_backward(const TensorMap<typename P::acc>& raw, const Config& cfg, const FormOptions&,
                            TensorMap<typename P::acc>& out) {
    Layer::backward(policy_inputs<P>(raw), cfg, ScanGatedLinearCore<P>{ScanPlan::whole_sequence()}, out);
  }
};

}  // namespace ttr::layers
