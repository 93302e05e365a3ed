// The preconditioned delta rule's inputs (PDN eqs. (6), (9); PGDN with a scalar
// decay, PKDA with KDA's per-key decay), gathered so that its forms take one
// argument instead of sixteen: the delta rule's (decay kind, q, k, v, g, β, h0,
// scale) and the diagonal preconditioner's (g_atk, β_atk, the per-head centre
// c_h = log_atk_scale, A_0, log x, eps; reference/family/atk.hpp). Held by
// reference: the caller's tensors outlive the call.
#pragma once

#include <vector>

#include "reference/core/tensor.hpp"
#include "reference/family/delta.hpp"

namespace ttr {

template <class T>
struct PrecondDelta {
  Decay decay;                 // Decay::scalar (PGDN, g [B,T,H]) or Decay::per_key (PKDA, g [B,T,H,K])
  const Tensor<T>& q;
  const Tensor<T>& k;          // read key (the residual S̄ᵀk_t); the write key is k̃ = B_t ⊙ k_t
  const Tensor<T>& v;
  const Tensor<T>& g;
  const Tensor<T>& beta;
  const Tensor<T>* h0;         // optional S_0
  T scale;
  const Tensor<T>& g_atk;      // preconditioner decay (log)
  const Tensor<T>& beta_atk;   // preconditioner write strength
  const std::vector<T>& center;  // c_h per head
  const Tensor<T>* A0;         // optional initial accumulator
  T log_x;                     // B_t ∈ [1/x, x]
  T eps;
};

// The three outputs: o, the final state S_T and the final accumulator A_T.
template <class T>
struct PrecondDeltaOutputs {
  Tensor<T>& o;
  Tensor<T>& ht;
  Tensor<T>& A_final;
};

}  // namespace ttr
