// KLA-K entries of the proof-check catalogue (docs/proof-checks/kla-k.md):
// filter.cpp (one slot: eq. (8), Thm 1, eqs. (16)-(21), Thm 2, Cor. 2.2) and
// scans.cpp (compositions and whole-layer forms: Cor. 1.1, Cor. 2.1,
// eqs. (22)-(23), Table 3, Thm 3, App. E.4).
#include "proofs-checks/catalogue.hpp"

namespace ttr::proofs {
namespace klak {
std::vector<Entry> filter_entries();
std::vector<Entry> scan_entries();
}  // namespace klak

std::vector<Entry> kla_k_entries() {
  std::vector<Entry> v = klak::filter_entries();
  for (auto& e : klak::scan_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
