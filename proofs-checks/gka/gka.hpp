// GKA's entries come in two parts: the forward statements (objective, KF
// recursion, conditioning, eq. (5), Lemmas 3-4, Alg. 1, Sec. 6.4) and the
// gradient statements (Lemmas 1-2, Alg. 2, eqs. (23)-(34), (50)-(64), Table 1).
#pragma once
#include "proofs-checks/catalogue.hpp"
namespace ttr::proofs {
std::vector<Entry> gka_forward_entries();
std::vector<Entry> gka_gradient_entries();
}  // namespace ttr::proofs
