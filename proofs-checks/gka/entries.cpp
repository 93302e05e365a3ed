#include "proofs-checks/gka/gka.hpp"
namespace ttr::proofs {
std::vector<Entry> gka_entries() {
  std::vector<Entry> v = gka_forward_entries();
  for (auto& e : gka_gradient_entries()) v.push_back(std::move(e));
  return v;
}
}  // namespace ttr::proofs
