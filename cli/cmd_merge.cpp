// `ttrcheck merge`: the outputs of the shards of one run (`--shard i/N` on gate,
// fuzz, vectors and study; gate/shard.hpp) joined into what the unsharded run writes,
// or baselines recorded from shard reports joined into one (docs/scale-out.md).
// What is merged follows from the inputs: directories holding report.json (gate),
// campaign.json (fuzz) or manifest.json (vectors), or baseline files. Exit 0, or 2
// with one line when the shards do not belong together (another configuration
// or tool version, a shard given twice, one missing) or a file is malformed;
// nothing is written then.
#include <filesystem>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "fuzz/merge.hpp"
#include "gate/merge.hpp"
#include "oracles/error.hpp"
#include "study/study.hpp"

namespace ttr::cli {
namespace {

namespace fs = std::filesystem;

// What a shard directory holds: "fuzz", "gate", "vectors" or "study".
std::string kind_of(const fs::path& dir) {
  std::error_code ec;
  for (const auto& [file, kind] : {std::pair{"campaign.json", "fuzz"}, std::pair{"report.json", "gate"},
                                   std::pair{"manifest.json", "vectors"}, std::pair{study::kShardFile, "study"}})
    if (fs::is_regular_file(dir / file, ec)) return kind;
  throw InputError(fmt::format("{}: holds no report.json, campaign.json, manifest.json or {} (not a shard's output)",
                               dir.string(), study::kShardFile));
}

}  // namespace

Command add_merge(CLI::App& app) {
  struct Opts {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "merge", "join the outputs of the shards of one run (gate reports, fuzz findings, vectors) or baselines");
  cmd->add_option("inputs", o->inputs,
                  "shard output directories (gate --out, fuzz --out, vectors --out, study --out), or baseline files")
      ->required();
  cmd->add_option("--out", o->out, "merged output: a new (or empty) directory, or a baseline file")->required();
  return [o]() {
    std::error_code ec;
    std::size_t dirs = 0;
    for (const std::string& p : o->inputs) {
      if (!fs::exists(p, ec)) throw InputError(fmt::format("{}: no such file or directory", p));
      dirs += fs::is_directory(p, ec);
    }
    if (dirs != 0 && dirs != o->inputs.size())
      throw InputError("merge: give shard directories or baseline files, not both");
    std::vector<fs::path> in(o->inputs.begin(), o->inputs.end());
    std::string line;
    if (dirs == 0) {
      std::vector<io::NamedPath> named;
      for (const std::string& p : o->inputs) named.push_back({"input", p});
      check_outputs(named, {{"--out", o->out}});
      line = merge::merge_baselines(in, o->out);
    } else {
      check_outputs({}, {}, {{"--out", o->out}});
      for (const fs::path& p : in)
        if (fs::exists(o->out, ec) && fs::equivalent(p, o->out, ec))
          throw InputError(fmt::format("--out {}: is the input {}", o->out, p.string()));
      const std::string kind = kind_of(in.front());
      for (const fs::path& p : in)
        if (kind_of(p) != kind)
          throw InputError(fmt::format("{}: a {} output, but {} is a {} output", p.string(), kind_of(p),
                                       in.front().string(), kind));
      if (kind == "gate") line = merge::merge_gate(in, o->out);
      else if (kind == "fuzz") line = fuzz::merge_campaigns(in, o->out);
      else if (kind == "study") {
        const study::Merged m = study::merge_shards(o->inputs, o->out);
        line = fmt::format("merged {} shards of study {} ({} cases) into {}: study.json, summary.md and {} CSV "
                           "file(s); verdict: {}; draw the figures with `ttrcheck-plot study {}`",
                           m.shards, m.result.study->name, m.result.cases, o->out, m.result.tables.size(),
                           m.result.pass ? "PASS" : "FAIL (a theorem disagrees with the measurement)", o->out);
      }
      else line = merge::merge_vectors(in, o->out);
    }
    fmt::print("{}\n", line);
    return 0;
  };
}

}  // namespace ttr::cli
