#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_simple_gla() {
  return {
      "simple_gla",
      "linear attention with a scalar decay per head (Mamba-2 form)",
      "S_t = e^{g_t} S_{t-1} + k_t v_tᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), g_scalar(), h0()},
      {o(), ht()},
      {scale()},
      {"PDN §3.4"},
      {"FLA naive_recurrent_simple_gla: decay first, then write, then read out",
       "FLA's optional constant per-head gate g_gamma [H] is not a separate input: pass it broadcast in g",
       "PDN writes the V×K state (S_t = α_t S_{t-1} + v_t k_tᵀ); we store FLA's K×V transpose"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_simple_gla(const LayerSpec& s) {
  return domains::gated_linear(s);
}

}  // namespace ttr::layers
