// Running the catalogue and reporting it: the table `ttrcheck proofs` prints
// and its JSON (docs/schemas/proofs.schema.json).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proofs-checks/catalogue.hpp"

namespace ttr::proofs {

// Entries selected by `only` (each an exact id, or a prefix ending in '.' such
// as "gka." or "pdn.thmC2."); all when empty. Throws InputError naming an
// `only` that matches nothing. `skip_slow` drops entries marked slow.
std::vector<const Entry*> select(const std::vector<std::string>& only, bool skip_slow);

nlohmann::json result_json(const Result& r);
nlohmann::json report_json(const std::vector<Result>& results, const ProofOptions& opt);

// One row per entry: id, ref, recorded status, verdict, evidence.
std::string format_table(const std::vector<Result>& results);
std::string format_list(const std::vector<const Entry*>& entries);

}  // namespace ttr::proofs
