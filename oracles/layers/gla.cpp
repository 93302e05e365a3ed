#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_gla() {
  return {
      "gla",
      "gated linear attention, a decay per key channel",
      "S_t = Diag(e^{g_t}) S_{t-1} + k_t v_tᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), g_per_key(), h0()},
      {o(), ht()},
      {scale()},
      {"PDN §3.4"},
      {"FLA names this gate gk (naive_recurrent_gla); it decays the K rows of the K×V state",
       "FLA's optional value-side gate gv is not modelled",
       "FLA's naive_recurrent_gla hard-codes scale = K^-1/2; ours is the `scale` key with that default",
       "PDN writes the V×K state, decayed along its K columns; we store FLA's K×V transpose"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_gla(const LayerSpec& s) {
  return domains::gated_linear(s);
}

}  // namespace ttr::layers
