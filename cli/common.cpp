#include "cli/common.hpp"

#include <filesystem>
#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr::cli {

LoadedInputs load_inputs(const std::string& layer_name, const std::string& path, const std::vector<std::string>& sets,
                         Direction direction) {
  find_layer(layer_name);  // an unknown layer is named before the file is read
  return ttr::load_inputs(layer_name, io::read_safetensors(path), path, sets, direction);
}

void add_backward_flag(CLI::App& cmd, bool& backward) {
  cmd.add_flag("--backward", backward,
               "the backward direction: inputs hold the forward inputs plus the cotangents do (and optionally "
               "dht, d<output>); outputs are the gradients d<input> (`ttrcheck layers` lists them)");
}

void add_set_option(CLI::App& cmd, std::vector<std::string>& sets) {
  cmd.add_option("--set", sets, "config key=value (see `ttrcheck layers --layer L`); repeatable");
}

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{}: cannot write: directory '{}' does not exist", path, dir.string()));
  if (fs::is_directory(p, ec)) throw InputError(fmt::format("{}: cannot write: it is a directory", path));
}

void check_outputs(const std::vector<io::NamedPath>& inputs, const std::vector<io::NamedPath>& outputs,
                   const std::vector<io::NamedPath>& dirs) {
  io::check_paths(inputs, outputs, dirs);
  for (const io::NamedPath& o : outputs)
    if (!o.path.empty()) check_writable(o.path);
}

void add_shard_options(CLI::App& cmd, ShardArgs& args) {
  cmd.add_option("--shard", args.shard,
                 "run shard i of N (i/N, 0 <= i < N); default: from SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX or "
                 "PYTEST_XDIST_WORKER when set (docs/scale-out.md); `ttrcheck merge` joins the shards");
  cmd.add_option("--shard-count", args.count,
                 "the shard count N with Kubernetes' JOB_COMPLETION_INDEX (or TTR_SHARD_COUNT)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 31));
}

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const auto first = s.find_first_not_of(" \t");
        if (first != std::string::npos && s[first] == '-')
          return fmt::format("seed '{}' is negative: seeds are 0 … 18446744073709551615", s);
        return "";
      },
      "SEED");
}

}  // namespace ttr::cli
