// The delta core's backward as a value, so that a layer's own chain rule (the
// Kaczmarz coefficient, the preconditioner, the L2 norm of q and k) is written once
// and serves both backward forms: the sequential adjoint (delta_backward.hpp, the
// oracle's) and the chunkwise backward (delta_chunk_backward.hpp, the kernels').
#pragma once

#include <type_traits>

#include "reference/family/delta_backward.hpp"
#include "reference/family/delta_chunk_backward.hpp"

namespace ttr {

struct SequentialDeltaCore {
  template <class T>
  void operator()(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& w, const Tensor<T>& v,
                  const Tensor<T>& beta, const std::type_identity_t<Tensor<T>>* g, const Tensor<T>* h0,
                  const T& scale, const Tensor<T>& do_, const Tensor<T>* dht, DeltaGrads<T>& out) const {
    delta_backward<T>(kind, q, k, w, v, beta, g, h0, scale, do_, dht, out);
  }
};

// Under policy P (reference/core/policy.hpp), chunk size `chunk`; tf32_sub > 0: the
// form chunk_tf32_intra (FLA's intra-chunk backward on TF32 operands: KDA's sub-chunks for
// per-key decay, chunk_bwd_kernel_dqkwg's pairs for a scalar one; delta_chunk_backward.hpp).
template <class P>
struct ChunkDeltaCore {
  int chunk;
  int tf32_sub = 0;
  using A = typename P::acc;
  void operator()(Decay kind, const Tensor<A>& q, const Tensor<A>& k, const Tensor<A>& w, const Tensor<A>& v,
                  const Tensor<A>& beta, const Tensor<A>* g, const Tensor<A>* h0, const A& scale,
                  const Tensor<A>& do_, const Tensor<A>* dht, DeltaGrads<A>& out) const {
    delta_chunk_backward<P>(kind, q, k, w, v, beta, g, h0, scale, chunk, do_, dht, out, tf32_sub);
  }
};

// Which core a layer's chain rule runs around, and under which policy: a layer whose
// own forward has a chunk form (the preconditioner) mirrors it around the chunk core.
template <class Core>
struct is_chunk_delta_core : std::false_type {};
template <class P>
struct is_chunk_delta_core<ChunkDeltaCore<P>> : std::true_type {
  using policy = P;
};

}  // namespace ttr
