// The gated linear core's backward as a value, so that each layer's backward
// (reference/<layer>/backward.hpp, the adapters' one `backward`) is written once
// and serves the three backward forms: the sequential adjoint
// (gated_linear_backward.hpp, the oracle's), the chunkwise backward
// (gated_linear_chunk_backward.hpp) and the reverse-mode scan
// (gated_linear_scan_backward.hpp), the kernels'.
#pragma once

#include <type_traits>

#include "reference/family/gated_linear_backward.hpp"
#include "reference/family/gated_linear_chunk_backward.hpp"
#include "reference/family/gated_linear_scan_backward.hpp"

namespace ttr {

struct SequentialGatedLinearCore {
  template <class T>
  void operator()(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                  const std::type_identity_t<Tensor<T>>* g, const Tensor<T>* h0, const T& scale, const Tensor<T>& do_,
                  const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg,
                  Tensor<T>& dh0) const {
    gated_linear_backward<T>(kind, q, k, v, g, h0, scale, do_, dht, dq, dk, dv, dg, dh0);
  }
};

// Under policy P (reference/core/policy.hpp), chunk size `chunk`.
template <class P>
struct ChunkGatedLinearCore {
  int chunk;
  using A = typename P::acc;
  void operator()(Decay kind, const Tensor<A>& q, const Tensor<A>& k, const Tensor<A>& v, const Tensor<A>* g,
                  const Tensor<A>* h0, const A& scale, const Tensor<A>& do_, const Tensor<A>* dht, Tensor<A>& dq,
                  Tensor<A>& dk, Tensor<A>& dv, Tensor<A>& dg, Tensor<A>& dh0) const {
    gated_linear_chunk_backward<P>(kind, q, k, v, g, h0, scale, chunk, do_, dht, dq, dk, dv, dg, dh0);
  }
};

// Under policy P, the scan organised by `plan` (the forward `scan` form's: one
// Blelloch tree over the sequence).
template <class P>
struct ScanGatedLinearCore {
  ScanPlan plan = ScanPlan::whole_sequence();
  using A = typename P::acc;
  void operator()(Decay kind, const Tensor<A>& q, const Tensor<A>& k, const Tensor<A>& v, const Tensor<A>* g,
                  const Tensor<A>* h0, const A& scale, const Tensor<A>& do_, const Tensor<A>* dht, Tensor<A>& dq,
                  Tensor<A>& dk, Tensor<A>& dv, Tensor<A>& dg, Tensor<A>& dh0) const {
    gated_linear_scan_backward<P>(kind, q, k, v, g, h0, scale, do_, dht, dq, dk, dv, dg, dh0, plan);
  }
};

}  // namespace ttr
