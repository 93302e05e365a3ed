// pdn_exact, backward of the sequential form: the adjoint of the Sherman–Morrison
// recursion (family/sherman_morrison_backward.hpp) with η = 1 (PDN eq. (5)).
// λ is a parameter (no gradient).
#pragma once

#include "reference/family/sherman_morrison_backward.hpp"

namespace ttr {

template <class T>
void pdn_exact_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* h0,
                        const T& lambda, const T& scale, const Tensor<T>& do_, const Tensor<T>* dht, Tensor<T>& dq,
                        Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dh0) {
  Tensor<T> deta;
  sherman_morrison_backward<T>(q, k, v, nullptr, h0, lambda, scale, do_, dht, dq, dk, dv, deta, dh0);
}

}  // namespace ttr
