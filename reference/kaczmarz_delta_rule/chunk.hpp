// kaczmarz_delta_rule, chunk form: KLA-Z App. B.4 — the Kaczmarz coefficient
// β̃_t = η_t/(‖k_t‖² + eps) (sequential.hpp) is substituted for β before the
// UT-transform chunk form of the gated delta rule runs (delta_chunk.hpp), so the
// chunkwise algorithm is GDN's unchanged. Under the 16-bit policies β̃ is computed
// in fp32 from the 16-bit key and then stored in 16 bits like any β tensor.
#pragma once

#include "reference/family/delta_chunk.hpp"
#include "reference/kaczmarz_delta_rule/sequential.hpp"

namespace ttr {

// mutant kaczmarz-eps-outside: the coefficient written as η_t/‖k_t‖² + eps (eps
// added after the division, where it guards nothing) instead of η_t/(‖k_t‖² + eps):
// off by ≈ eps(1 + η_t/‖k_t‖⁴) for normal keys, and inf/NaN where the key is 0,
// the case eps exists for.
template <class T>
Tensor<T> kaczmarz_step_eps_outside(const Tensor<T>& k, const Tensor<T>& eta, const T& eps) {
  Tensor<T> out = eta;
  const int K = static_cast<int>(k.dim(3));
  for (std::int64_t r = 0; r < eta.numel(); ++r) {
    const T* kr = k.data.data() + r * K;
    out.data[r] = eta.data[r] / dot(kr, kr, K) + eps;
  }
  return out;
}

// mutant kaczmarz-eps-dropped: the coefficient η_t/‖k_t‖² with no eps at all (the
// textbook Kaczmarz step, KLA-Z eq. (3) with eps = 0). Off by ≈ eps/‖k_t‖² relative
// (1e-6 on unit keys) for normal keys; +inf where ‖k_t‖² is 0 in the kernel's
// arithmetic (a zero key, or one whose squared norm underflows fp32), and then
// inf·0 = NaN in Diag(β̃)·K of the UT transform.
template <class T>
Tensor<T> kaczmarz_step_eps_dropped(const Tensor<T>& k, const Tensor<T>& eta) {
  Tensor<T> out = eta;
  const int K = static_cast<int>(k.dim(3));
  for (std::int64_t r = 0; r < eta.numel(); ++r) {
    const T* kr = k.data.data() + r * K;
    out.data[r] = eta.data[r] / dot(kr, kr, K);
  }
  return out;
}

template <class P>
void kaczmarz_delta_rule_chunk(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                               const Tensor<typename P::acc>& v, const Tensor<typename P::acc>& g,
                               const Tensor<typename P::acc>& eta, const typename P::acc& eps,
                               const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                               Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  const Tensor<typename P::acc> beta = mutated(Mutant::kaczmarz_eps_outside) ? kaczmarz_step_eps_outside(k, eta, eps)
                                       : mutated(Mutant::kaczmarz_eps_dropped) ? kaczmarz_step_eps_dropped(k, eta)
                                                                                : kaczmarz_step(k, eta, eps);
  delta_chunk_forward<P>(Decay::scalar, q, k, k, v, beta, &g, h0, scale, chunk, o, ht);
}

}  // namespace ttr
