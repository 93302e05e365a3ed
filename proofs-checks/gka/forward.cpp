// Placeholder until these entries land (issue 6 work in progress).
#include "proofs-checks/gka/gka.hpp"
namespace ttr::proofs {
std::vector<Entry> gka_forward_entries() { return {}; }
}  // namespace ttr::proofs
