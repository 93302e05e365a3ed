#include "proofs-checks/kla_z/kla_z.hpp"

namespace ttr::proofs {

std::vector<Entry> kla_z_entries() {
  std::vector<Entry> v = kla_z_tokenwise_entries();
  for (auto& e : kla_z_chunkwise_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
