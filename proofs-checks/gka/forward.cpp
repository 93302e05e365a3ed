// GKA forward entries of the proof-check catalogue, in catalogue order: the
// regression problem (forward_ridge.cpp), its state (forward_state.cpp), the
// Chebyshev iteration (forward_chebyshev.cpp, its weight schedule in
// forward_chebyshev_weights.cpp) and the Kalman-filter view of §6.4
// (forward_kalman.cpp).
// Findings: docs/proof-checks/gka-forward.md.
#include "proofs-checks/gka/gka.hpp"

namespace ttr::proofs {

// Defined in forward_*.cpp (declared there too, in forward_support.hpp).
std::vector<Entry> gka_forward_ridge_entries();
std::vector<Entry> gka_forward_state_entries();
std::vector<Entry> gka_forward_chebyshev_entries();
std::vector<Entry> gka_forward_chebyshev_weight_entries();
std::vector<Entry> gka_forward_kalman_entries();

std::vector<Entry> gka_forward_entries() {
  std::vector<Entry> v = gka_forward_ridge_entries();
  for (auto* part : {&gka_forward_state_entries, &gka_forward_chebyshev_entries, &gka_forward_chebyshev_weight_entries,
                     &gka_forward_kalman_entries})
    for (auto& e : part()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
