// One layer of a twin pair, the type parameter of the shared suites in
// tests/family/*_twin_tests.hpp. The twins (gated_delta_rule/kda,
// precond_gated_delta_rule/precond_kda, simple_gla/gla) differ only in the
// gate's shape: one decay per head, or one per key channel. A layer's test file
// instantiates its suite with, e.g.,
//   TwinLayer<ttr::layers::kda, "kda", Gate::per_key>
#pragma once

#include <algorithm>
#include <cstddef>

#include "tests/support/mp_compare.hpp"

namespace ttr::test {

enum class Gate { per_head, per_key };  // g is [B,T,H], or [B,T,H,K]

// A string literal as a template argument (the registry name).
template <std::size_t N>
struct LayerName {
  constexpr LayerName(const char (&s)[N]) { std::copy_n(s, N, name); }
  char name[N];
};

template <class AdapterT, LayerName Name, Gate G>
struct TwinLayer {
  using Adapter = AdapterT;                        // the oracle adapter, ttr::layers::<layer>
  static constexpr const char* kName = Name.name;  // the registry name
  static constexpr bool kPerKeyGate = G == Gate::per_key;
};

// The oracle: the layer's adapter (tensor names, config) on the reference at 256 bits.
template <class Layer>
TensorMap<mp> twin_oracle(const TensorMap<double>& in, const Sets& sets) {
  return oracle256<typename Layer::Adapter>(Layer::kName, in, sets);
}

}  // namespace ttr::test
