// kalman_filter, backward of the sequential form: the adjoint of the weighted
// Sherman–Morrison recursion (family/sherman_morrison_backward.hpp; GKA eq. (KF)).
// deta [B,T,H] is the gradient of the optional weights η (left empty without them):
// η enters only through c_t = 1/η_t + k_tᵀΦ_{t-1}k_t, so dη_t = −dc_t/η_t².
#pragma once

#include "reference/family/sherman_morrison_backward.hpp"

namespace ttr {

template <class T>
void kalman_filter_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* eta,
                            const Tensor<T>* h0, const T& lambda, const T& scale, const Tensor<T>& do_,
                            const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& deta,
                            Tensor<T>& dh0) {
  sherman_morrison_backward<T>(q, k, v, eta, h0, lambda, scale, do_, dht, dq, dk, dv, deta, dh0);
}

}  // namespace ttr
