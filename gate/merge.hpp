// `ttrcheck merge` (docs/scale-out.md): the outputs of the N shards of one run
// (gate/shard.hpp) joined into what the unsharded run writes. This file: what
// every merge shares — reading a shard's record and checking that the shards
// belong together, and an output directory written all or nothing — and the
// merges of gate reports (report.json + junit.xml), test vectors (manifest.json
// and its files) and baselines. Fuzz campaigns: fuzz/merge.hpp.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ttr::merge {

// One shard's output: where it is and its JSON document (report.json,
// manifest.json, campaign.json, a baseline), whose "shard" record
// (shard_json) says which shard it is.
struct ShardDoc {
  std::string path;  // for messages: the file the document came from
  nlohmann::json doc;
  std::uint64_t index = 0, count = 0;
};

// The JSON text of a file; InputError "<path>: ..." when unreadable or invalid.
nlohmann::json read_json(const std::filesystem::path& path);

// Reads each document's shard record and returns the shards in index order.
// InputError (exit 2), one line, when a document has no shard record, when
// tool versions, shard counts or configurations differ, when an index repeats
// or when shards are missing.
std::vector<ShardDoc> check_shard_set(std::vector<ShardDoc> docs);

// A directory receiving a merge: created if absent and refused when it holds
// anything (a merge writes a fresh directory, never a mix with an older one);
// every file goes to a temporary beside its target and is renamed; unless
// commit() is called, the files written and the directory (if created) are
// removed again.
class OutputDir {
 public:
  explicit OutputDir(const std::filesystem::path& dir);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  void write_text(const std::string& name, const std::string& text);
  void copy_file(const std::string& name, const std::filesystem::path& from);
  void commit() { done_ = true; }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> files_;
  bool created_ = false, done_ = false;
};

// Each returns the one-line summary `ttrcheck merge` prints.

// Gate shards (`ttrcheck gate --shard i/N`): report.json and junit.xml equal to
// the unsharded gate's, byte for byte. Each shard's report must be exactly what
// this ttrcheck writes for its checks, and its junit.xml (when present) exactly
// what that report gives, else InputError: the merge rewrites both from the
// checks, so a hand-edited report would otherwise be laundered.
std::string merge_gate(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out);

// `ttrcheck vectors --shard i/N`: the files, and manifest.json in the unsharded order.
std::string merge_vectors(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out);

// Baselines recorded from shard reports (`ttrcheck baseline record`): one
// baseline with every check. Factor, floor and tool version must agree and a
// check id may appear in one only; when the baselines carry shard records (one
// report each was recorded), the set is checked like any other.
std::string merge_baselines(const std::vector<std::filesystem::path>& files, const std::filesystem::path& out);

}  // namespace ttr::merge
