#include "proofs-checks/pdn/pdn.hpp"

namespace ttr::proofs {

std::vector<Entry> pdn_entries() {
  std::vector<Entry> v = pdn_exact_entries();
  for (auto& e : pdn_pgdn_entries()) v.push_back(std::move(e));
  for (auto& e : pdn_statistical_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
