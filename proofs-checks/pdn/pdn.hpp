// PDN (Preconditioned DeltaNet, docs/papers.md) catalogue entries:
// exact preconditioning (Thm 3.1 / C.1), the approximate-preconditioning
// counterexample (Thm C.2), the write-key bound (App. C.3), the diagonal
// preconditioner (eqs. (6)-(9)), the eigenvalue lemmas (App. E), and the
// statistical comparison of DeltaNet and linear attention (Thm 3.2 / App. C.5).
// The paper's state is d_v×d_k (S k = v); the reference's is FLA's K×V (its
// transpose): the entries say which one they use.
#pragma once

#include <vector>

#include "proofs-checks/support.hpp"
#include "proofs-checks/support/dense.hpp"

namespace ttr::proofs {

std::vector<Entry> pdn_exact_entries();
std::vector<Entry> pdn_statistical_entries();

}  // namespace ttr::proofs
