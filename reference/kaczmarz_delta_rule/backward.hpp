// kaczmarz_delta_rule, backward of the sequential form. The forward substitutes
// β̃_t = η_t / (‖k_t‖² + eps) (KLA-Z eq. (3), rebuilt in sequential.hpp) into the
// gated delta core; the backward runs the core's adjoint (family/delta_backward.hpp,
// scalar decay, w = k), which gives dβ̃_t, then the chain rule through β̃:
//   ∂β̃/∂η = 1/(‖k‖² + eps),   ∂β̃/∂k_i = −2 η k_i / (‖k‖² + eps)² = −2 β̃ k_i / (‖k‖² + eps)
//   dη_t = dβ̃_t / (‖k_t‖² + eps),   dk_t += −2 β̃_t dβ̃_t k_t / (‖k_t‖² + eps).
// `dbeta` is the gradient of the layer's `beta` input, η.
#pragma once

#include <utility>

#include "reference/family/delta_backward_core.hpp"
#include "reference/kaczmarz_delta_rule/sequential.hpp"

namespace ttr {

// Chain rule through kaczmarz_step: deta from dbeta_tilde, and the key term added to dk.
template <class T>
void kaczmarz_step_backward(const Tensor<T>& k, const Tensor<T>& eta, const T& eps, const Tensor<T>& dbeta_tilde,
                            Tensor<T>& deta, Tensor<T>& dk) {
  const int K = static_cast<int>(k.dim(3));
  const T two = from_double<T>(2.0);
  deta = eta;
  for (std::int64_t r = 0; r < eta.numel(); ++r) {
    const T* kr = k.data.data() + r * K;
    const T den = dot(kr, kr, K) + eps;
    const T bt = eta.data[r] / den;  // β̃, as kaczmarz_step computes it
    deta.data[r] = dbeta_tilde.data[r] / den;
    const T c = -(two * bt * dbeta_tilde.data[r]) / den;
    T* dkr = dk.data.data() + r * K;
    for (int i = 0; i < K; ++i) mul_add_to(dkr[i], c, kr[i]);
  }
}

template <class T, class Core = SequentialDeltaCore>
void kaczmarz_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                                  const Tensor<T>& eta, const T& eps, const Tensor<T>* h0, const T& scale,
                                  const Tensor<T>& do_, const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk,
                                  Tensor<T>& dv, Tensor<T>& dg, Tensor<T>& dbeta, Tensor<T>& dh0, const Core& core = {}) {
  const Tensor<T> beta = kaczmarz_step(k, eta, eps);
  DeltaGrads<T> gr;
  core(Decay::scalar, q, k, k, v, beta, &g, h0, scale, do_, dht, gr);
  add_into(gr.dk, gr.dw);
  kaczmarz_step_backward(k, eta, eps, gr.dbeta, dbeta, gr.dk);
  dq = std::move(gr.dq), dk = std::move(gr.dk), dv = std::move(gr.dv), dg = std::move(gr.dg);
  dh0 = std::move(gr.dh0);
}

}  // namespace ttr
