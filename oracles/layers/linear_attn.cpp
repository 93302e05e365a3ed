#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_linear_attn() {
  return {
      "linear_attn",
      "linear attention, the additive outer-product memory",
      "S_t = S_{t-1} + k_t v_tᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), h0()},
      {o(), ht()},
      {scale()},
      {"PDN §2.1"},
      {"FLA naive_recurrent_linear_attn with normalize=False (its default); FLA's chunk_linear_attn "
       "defaults to normalize=True, which this layer does not model",
       "PDN writes the V×K state S_t = S_{t-1} + v_t k_tᵀ and o_t = S_t q_t; we store FLA's K×V transpose"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_linear_attn(const LayerSpec& s) {
  return domains::gated_linear(s);
}

}  // namespace ttr::layers
