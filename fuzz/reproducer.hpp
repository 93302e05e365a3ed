// Writing a campaign's findings as reproducers (docs/fuzzing.md): for each one,
//   <stem>.inputs.safetensors     the minimised inputs (F32, every value on the bf16
//                                 grid; metadata: layer, config, seed) — what
//                                 `ttrcheck check --in` and `ttrcheck run --in` read
//   <stem>.candidate.safetensors  the target's outputs on them (F32, exact)
//   <stem>.json                   layer, target, form, objective and its value, seed,
//                                 case, config, sizes before and after minimising,
//                                 the check's verdict, and the commands that replay it
// and campaign.json (the campaign's options and counts). A finding whose
// minimised reproducer (kind, config and input tensors, byte for byte) equals an
// earlier one's is the same bug found twice: no files, an entry in campaign.json's
// `duplicates` naming the reproducer it repeats. Paths in the notes are
// relative to the output directory; nothing time-dependent is written, so a
// campaign with a case budget writes bit-identical files on every run. Each file is
// written to a temporary and renamed; a failure removes what this call wrote.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/campaign.hpp"
#include "oracles/io/safetensors.hpp"

namespace ttr::fuzz {

struct CampaignInfo {
  std::string layer;
  std::string target;  // "cpu:bf16"
  Form form = Form::chunk;
  int chunk_size = 16;
  Objective objective = Objective::nan;
  std::uint64_t seed = 0;
  Budget budget;
  std::string mutant = "none";
  bool strict_range = false;  // range findings are failures; replays pass --strict-range
  nlohmann::json shard = nullptr;  // a shard's record for `ttrcheck merge` (gate/shard.hpp); null: not sharded
  Direction direction = Direction::forward;  // backward: inputs hold cotangents, outputs are gradients
};

// Per finding, in finding order, the stem of its reproducer (a duplicate's: the
// one it repeats).
std::vector<std::string> write_reproducers(const std::filesystem::path& dir, const LayerEntry& layer,
                                           const Target& target, const CampaignInfo& info, const CampaignResult& r);

// What makes two reproducers the same: the kind, the config and every input
// tensor's name, dtype, shape and bytes (not the metadata naming the campaign
// case). Shared by the writer and `ttrcheck merge`, which deduplicates shards.
std::string reproducer_key(const std::string& kind, const io::TensorFile& inputs);

// `ttrcheck check` on a reproducer's stored candidate, run from the output directory.
std::string check_command(const CampaignInfo& info, const std::string& stem, const std::string& candidate_file);

}  // namespace ttr::fuzz
