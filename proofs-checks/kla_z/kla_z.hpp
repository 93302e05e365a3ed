// KLA-Z (Kaczmarz Linear Attention, docs/papers.md) catalogue
// entries: the tokenwise theory (eqs. (1)-(5), Thm 1, Props 1-2) and the
// chunkwise theory (Props 3-6, App. B). The paper's LaTeX was lost in
// extraction: every formula below is reconstructed from the derivation text,
// in FLA's K×V state orientation (S_t ∈ R^{d_k×d_v}, readout S_tᵀ k = v; the
// paper's tokenwise listing writes `err = v - Sbarᵀ @ k`, the same orientation).
//
//   eq. (1)  S_t = argmin ‖S − S̄_t‖_F  s.t.  Sᵀ k_t = v_t,      S̄_t = α_t S_{t−1}
//   eq. (2)  S_t = S̄_t + k_t e_tᵀ / ‖k_t‖²,                       e_t = v_t − S̄_tᵀ k_t
//   eq. (3)  S_t = S̄_t + β̃_t k_t e_tᵀ,   β̃_t = η_t / (‖k_t‖² + ε)
//   eq. (6)  S_t = α_t (I − β̃_t k_t k_tᵀ) S_{t−1} + β̃_t k_t v_tᵀ
#pragma once

#include <vector>

#include "proofs-checks/support.hpp"
#include "proofs-checks/support/dense.hpp"

namespace ttr::proofs {

std::vector<Entry> kla_z_tokenwise_entries();
std::vector<Entry> kla_z_chunkwise_entries();

}  // namespace ttr::proofs
