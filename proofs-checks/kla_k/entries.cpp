// Placeholder until this paper's entries land (issue 6 work in progress).
#include "proofs-checks/catalogue.hpp"
namespace ttr::proofs {
std::vector<Entry> kla_k_entries() { return {}; }
}  // namespace ttr::proofs
