// KLA-K entries of the proof-check catalogue (docs/proof-checks/kla-k.md):
// filter.cpp (one slot: eq. (8), Thm 1, eqs. (16)-(21), Thm 2, Cor. 2.2),
// scans.cpp (compositions: Cor. 1.1, Cor. 2.1) and layer.cpp (whole-layer forms:
// eqs. (22)-(23), Table 3, Thm 3, App. E.4).
#include "proofs-checks/catalogue.hpp"

namespace ttr::proofs {
namespace klak {
std::vector<Entry> filter_entries();
std::vector<Entry> scan_entries();
std::vector<Entry> layer_entries();
}  // namespace klak

std::vector<Entry> kla_k_entries() {
  std::vector<Entry> v = klak::filter_entries();
  for (auto& e : klak::scan_entries()) v.push_back(std::move(e));
  for (auto& e : klak::layer_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
