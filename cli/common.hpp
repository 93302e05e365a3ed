// Helpers shared by the subcommands: reading a layer's input file with its
// config, and the --set option.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gate/shard.hpp"
#include "oracles/io/paths.hpp"
#include "oracles/loaded_inputs.hpp"

namespace ttr::cli {

// Reads `path` and validates it for `layer_name` in `direction`
// (oracles/loaded_inputs.hpp, which the Python API shares).
LoadedInputs load_inputs(const std::string& layer_name, const std::string& path, const std::vector<std::string>& sets,
                         Direction direction = Direction::forward);

// `--backward`: the flag every command with a backward direction shares.
void add_backward_flag(CLI::App& cmd, bool& backward);

void add_set_option(CLI::App& cmd, std::vector<std::string>& sets);

// Fails early, before any computation, when `path` cannot be created.
void check_writable(const std::string& path);

// The output-path rule (oracles/io/paths.hpp) plus check_writable on every file
// output: before any work, so a refused command has written nothing.
void check_outputs(const std::vector<io::NamedPath>& inputs, const std::vector<io::NamedPath>& outputs,
                   const std::vector<io::NamedPath>& dirs = {});

// `--shard i/N` and `--shard-count N` (gate/shard.hpp): the options of every
// command that runs a part of its work; resolve() reads the environment when
// --shard is absent and says on stderr which source it used.
struct ShardArgs {
  std::string shard;
  std::uint64_t count = 0;
  Shard resolve() const { return resolve_shard(shard, count); }
};
void add_shard_options(CLI::App& cmd, ShardArgs& args);

// A validator for --seed: seeds are 0 … 2^64 − 1; "-1" is refused rather than
// wrapped to 18446744073709551615.
CLI::Validator seed_validator();

}  // namespace ttr::cli
