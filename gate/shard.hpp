// Sharding a run over processes, machines or GPUs (docs/scale-out.md): shard i of
// N runs a deterministic part of the work and `ttrcheck merge` puts the parts
// back together into what the unsharded run writes.
//
// Two partitions, both functions of (i, N) and a case's index alone:
//   * owns(k): case k of a plan (a gate unit, a test vector) belongs to shard
//     k mod N — strided, so the expensive layers, which sit next to each other
//     in a plan, spread over the shards;
//   * case_range(total): a contiguous range of case indices, for fuzz campaigns
//     (cases [⌊iB/N⌋, ⌊(i+1)B/N⌋) of a budget of B cases; a time budget has no
//     B, so shard i gets [i·2^40, (i+1)·2^40)): the local search of the ratio
//     objective then stays within its shard's seed range.
// Every case belongs to exactly one shard; N = 1 is the unsharded run.
//
// Where the shard comes from (resolve_shard): `--shard i/N`, else the scheduler's
// environment — a Slurm job array (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN,
// divided by SLURM_ARRAY_TASK_STEP, of SLURM_ARRAY_TASK_COUNT), a Kubernetes
// Indexed Job (JOB_COMPLETION_INDEX of `--shard-count` or TTR_SHARD_COUNT: the
// pod does not know its Job's completions), pytest-xdist (PYTEST_XDIST_WORKER
// gwN of PYTEST_XDIST_WORKER_COUNT) — else none. A command that shards adds
// the CLI's `add_shard_options` (cli/common.hpp) and calls `resolve_shard` once;
// everything else it needs is `owns` or `case_range`, and `shard_json` in what
// it writes (a new command, e.g. `study`, plugs in with those three calls and
// a branch in cli/cmd_merge.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace ttr {

struct Shard {
  std::uint64_t index = 0, count = 1;
  std::string source;  // "--shard", "SLURM_ARRAY_TASK_ID", ...; empty: not sharded

  bool sharded() const { return !source.empty(); }
  bool owns(std::uint64_t k) const { return k % count == index; }
  // [begin, end) of case indices; total = 0: a time budget (unbounded).
  std::pair<std::int64_t, std::int64_t> case_range(std::int64_t total) const;
  std::string text() const;  // "i/N"
};

// "i/N" with 0 <= i < N, both decimal; InputError naming `what` otherwise.
Shard parse_shard(const std::string& text, const std::string& what = "--shard");

// The shard of this process: `flag` ("i/N", or empty), else the environment (see
// above; `shard_count` is --shard-count, 0 when not given). InputError (exit 2)
// for a malformed value or an index outside its count. When one is found, says
// where it came from in one line on stderr.
using EnvLookup = std::function<const char*(const char*)>;
Shard resolve_shard(const std::string& flag, std::uint64_t shard_count, const EnvLookup& env = nullptr);

// What a sharded output records so `ttrcheck merge` can check its shards belong
// together: {"index", "count", "source", "config"} (config: every option that
// changes what the run computes; shards of one run have equal configs).
nlohmann::json shard_json(const Shard& s, const nlohmann::json& config);

}  // namespace ttr
