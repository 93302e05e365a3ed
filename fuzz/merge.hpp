// Merging the shards of a fuzz campaign (`ttrcheck merge`, docs/scale-out.md):
// the shards' findings in campaign case order, at most --max-findings per kind
// as the unsharded campaign keeps them, deduplicated by minimised reproducer
// (fuzz/reproducer.hpp: reproducer_key) and renumbered; campaign.json's counts
// summed. For a case budget and the nan objective the result is, file for file
// and byte for byte, what the unsharded campaign with the same total budget
// writes. With the ratio objective each shard's local search starts afresh
// (its seed range), so the worst inputs found — and the ratio findings — are
// those of N shorter searches, not of one long one.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ttr::fuzz {

// Returns the summary line; InputError (exit 2) for shards that do not belong
// together or files that do not match their campaign.json.
std::string merge_campaigns(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out);

}  // namespace ttr::fuzz
