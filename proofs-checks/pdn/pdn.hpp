// PDN (Preconditioned DeltaNet, docs/papers.md) catalogue entries:
// exact preconditioning (Thm 3.1 / C.1), the approximate-preconditioning
// counterexample (Thm C.2), the write-key bound (App. C.3), the diagonal
// preconditioner (eqs. (6)-(9)), the eigenvalue lemmas (App. E), and the
// statistical comparison of DeltaNet and linear attention (Thm 3.2 / App. C.5).
// The paper's state is d_v×d_k (S k = v); the reference's is FLA's K×V (its
// transpose): the entries say which one they use.
#pragma once

#include <string>
#include <vector>

#include "proofs-checks/support.hpp"
#include "proofs-checks/support/dense.hpp"

namespace ttr::proofs {

std::vector<Entry> pdn_exact_entries();        // Thm 3.1 / C.1, Thm C.2, App. C.3 (exact.cpp)
std::vector<Entry> pdn_pgdn_entries();         // eqs. (6), (8), (9), Lemmas E.1-E.3 (pgdn.cpp)
std::vector<Entry> pdn_statistical_entries();  // Thm 3.2 / App. C.5 (statistical.cpp)

// What exact.cpp and pgdn.cpp share.
namespace pdn {

inline std::string seed_str(const ProofOptions& opt) { return "seed " + std::to_string(opt.seed); }

// The largest value seen (NaN counts as larger than anything) and its witness.
struct Worst {
  double value = -1;
  std::string witness;
  void see(double x, const std::string& w) {
    if (!(x <= value)) value = x, witness = w;
  }
};

inline Entry make(std::string id, std::string ref, std::string statement, Method m, std::string how, Status st,
                  std::string correction, Evidence (*fn)(const ProofOptions&, const std::string&)) {
  return make_entry(Paper::PDN, std::move(id), std::move(ref), std::move(statement), m, std::move(how), st,
                    std::move(correction), fn);
}

}  // namespace pdn

}  // namespace ttr::proofs
