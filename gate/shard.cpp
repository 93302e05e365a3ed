#include "gate/shard.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {
namespace {

// A time-budget shard's seed range: 2^40 cases, more than a campaign runs in a
// year at a million cases per second.
constexpr std::int64_t kTimeBudgetSpan = std::int64_t{1} << 40;

// A plain decimal (no sign, no space, no suffix); nullopt-like false otherwise.
bool decimal(const std::string& s, std::uint64_t& out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::uint64_t env_number(const EnvLookup& env, const char* name, const std::string& why) {
  const char* v = env(name);
  if (!v) throw InputError(fmt::format("{} is not set ({})", name, why));
  std::uint64_t n = 0;
  if (!decimal(v, n)) throw InputError(fmt::format("{}='{}': not a non-negative integer", name, v));
  return n;
}

Shard checked(std::uint64_t index, std::uint64_t count, const std::string& source, const std::string& what) {
  if (count == 0) throw InputError(fmt::format("{}: the shard count is 0 (it must be at least 1)", what));
  if (index >= count)
    throw InputError(fmt::format("{}: shard index {} is not below the shard count {} (shards are 0 … {})", what, index,
                                 count, count - 1));
  return {index, count, source};
}

Shard from_slurm(const EnvLookup& env, const char* id_text) {
  std::uint64_t id = 0;
  if (!decimal(id_text, id))
    throw InputError(fmt::format("SLURM_ARRAY_TASK_ID='{}': not a non-negative integer", id_text));
  const std::string why = "set by Slurm in a job array; needed with SLURM_ARRAY_TASK_ID";
  const std::uint64_t count = env_number(env, "SLURM_ARRAY_TASK_COUNT", why);
  const std::uint64_t min = env_number(env, "SLURM_ARRAY_TASK_MIN", why);
  std::uint64_t step = 1;
  if (env("SLURM_ARRAY_TASK_STEP")) step = env_number(env, "SLURM_ARRAY_TASK_STEP", why);
  if (step == 0) throw InputError("SLURM_ARRAY_TASK_STEP=0: not a valid array step");
  // Arrays need not start at 0 (--array=1-4) and may step (--array=0-14:2); a
  // list with holes (--array=1,3,8) has no dense numbering and is refused below.
  if (id < min || (id - min) % step != 0)
    throw InputError(fmt::format("SLURM_ARRAY_TASK_ID={} is not in the array {}…, step {} (use --array=A-B[:S])", id,
                                 min, step));
  return checked((id - min) / step, count, "SLURM_ARRAY_TASK_ID",
                 fmt::format("SLURM_ARRAY_TASK_ID={} (array from {} step {}, {} tasks; use a range --array=A-B[:S])",
                             id, min, step, count));
}

Shard from_kubernetes(const EnvLookup& env, const char* index_text, std::uint64_t shard_count) {
  std::uint64_t index = 0;
  if (!decimal(index_text, index))
    throw InputError(fmt::format("JOB_COMPLETION_INDEX='{}': not a non-negative integer", index_text));
  std::uint64_t count = shard_count;
  if (count == 0) {
    const char* c = env("TTR_SHARD_COUNT");
    if (!c)
      throw InputError(
          "JOB_COMPLETION_INDEX is set but the shard count is not: give --shard-count N or TTR_SHARD_COUNT=N "
          "(the Indexed Job's completions)");
    if (!decimal(c, count)) throw InputError(fmt::format("TTR_SHARD_COUNT='{}': not a non-negative integer", c));
  }
  return checked(index, count, "JOB_COMPLETION_INDEX", fmt::format("JOB_COMPLETION_INDEX={}", index));
}

Shard from_xdist(const EnvLookup& env, const char* worker) {
  const std::string w = worker;
  std::uint64_t index = 0;
  if (w.size() < 3 || w.compare(0, 2, "gw") != 0 || !decimal(w.substr(2), index))
    throw InputError(fmt::format("PYTEST_XDIST_WORKER='{}': expected gwN", w));
  const std::uint64_t count =
      env_number(env, "PYTEST_XDIST_WORKER_COUNT", "set by pytest-xdist; needed with PYTEST_XDIST_WORKER");
  return checked(index, count, "PYTEST_XDIST_WORKER", fmt::format("PYTEST_XDIST_WORKER={}", w));
}

}  // namespace

std::pair<std::int64_t, std::int64_t> Shard::case_range(std::int64_t total) const {
  const auto i = static_cast<std::int64_t>(index), n = static_cast<std::int64_t>(count);
  if (total <= 0) return {i * kTimeBudgetSpan, (i + 1) * kTimeBudgetSpan};
  // ⌊iB/N⌋ without overflow for B up to 2^62 and N up to 2^31 is not needed:
  // budgets are far below 2^32 and shard counts below 2^31.
  return {i * total / n, (i + 1) * total / n};
}

std::string Shard::text() const { return fmt::format("{}/{}", index, count); }

Shard parse_shard(const std::string& text, const std::string& what) {
  const auto slash = text.find('/');
  std::uint64_t i = 0, n = 0;
  if (slash == std::string::npos || !decimal(text.substr(0, slash), i) || !decimal(text.substr(slash + 1), n))
    throw InputError(fmt::format("{} '{}': expected i/N (shard i of N, 0 <= i < N), e.g. 0/4", what, text));
  if (n > (std::uint64_t{1} << 31))
    throw InputError(fmt::format("{} '{}': at most 2^31 shards", what, text));
  return checked(i, n, what, fmt::format("{} '{}'", what, text));
}

Shard resolve_shard(const std::string& flag, std::uint64_t shard_count, const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  Shard s;
  if (!flag.empty()) {
    if (shard_count != 0) throw InputError("--shard-count goes with JOB_COMPLETION_INDEX, not with --shard i/N");
    s = parse_shard(flag);
  } else if (const char* id = env("SLURM_ARRAY_TASK_ID")) {
    s = from_slurm(env, id);
  } else if (const char* k = env("JOB_COMPLETION_INDEX")) {
    s = from_kubernetes(env, k, shard_count);
  } else if (const char* w = env("PYTEST_XDIST_WORKER")) {
    s = from_xdist(env, w);
  } else if (shard_count != 0) {
    throw InputError("--shard-count is given but JOB_COMPLETION_INDEX is not set (use --shard i/N)");
  } else {
    return s;  // not sharded
  }
  std::fprintf(stderr, "shard %s from %s\n", s.text().c_str(), s.source.c_str());
  return s;
}

nlohmann::json shard_json(const Shard& s, const nlohmann::json& config) {
  return {{"index", s.index}, {"count", s.count}, {"source", s.source}, {"config", config}};
}

}  // namespace ttr
