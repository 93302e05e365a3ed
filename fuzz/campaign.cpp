#include "fuzz/campaign.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "gate/judge.hpp"
#include "oracles/error.hpp"

namespace ttr::fuzz {

const char* objective_name(Objective o) { return o == Objective::nan ? "nan" : "ratio"; }

Objective parse_objective(const std::string& s) {
  if (s == "nan") return Objective::nan;
  if (s == "ratio") return Objective::ratio;
  throw InputError(fmt::format("--objective: unknown objective '{}' (nan|ratio)", s));
}

const char* kind_name(FindingKind k) {
  switch (k) {
    case FindingKind::nonfinite: return "nonfinite";
    case FindingKind::oracle_nonfinite: return "oracle_nonfinite";
    case FindingKind::ratio: return "ratio";
    case FindingKind::range: return "range";
  }
  return "?";
}

std::string Budget::text() const {
  return cases > 0 ? fmt::format("{}cases", cases) : fmt::format("{}s", seconds);
}

Budget parse_budget(const std::string& s) {
  std::size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  const std::string unit = s.substr(digits);
  std::int64_t n = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + digits, n);
  if (digits == 0 || ec != std::errc() || n <= 0)
    throw InputError(fmt::format("--budget '{}': expected a positive count with a unit: 500cases, 90s, 10m or 2h", s));
  Budget b;
  if (unit.empty() || unit == "cases" || unit == "case") b.cases = n;
  else if (unit == "s") b.seconds = static_cast<double>(n);
  else if (unit == "m") b.seconds = 60.0 * static_cast<double>(n);
  else if (unit == "h") b.seconds = 3600.0 * static_cast<double>(n);
  else throw InputError(fmt::format("--budget '{}': unknown unit '{}' (cases, s, m, h)", s, unit));
  return b;
}

namespace {

// The oracle and model of `ttrcheck check` (cli/cmd_check.cpp): MPFR-256, 8 samples, seed 0.
constexpr unsigned kCheckOracleBits = 256;

bool compared(const LayerSpec& spec, const std::string& name) {
  const TensorSpec* t = spec.output(name);
  return t && t->certifiable;
}

bool any_nonfinite(const LayerSpec& spec, const TensorMap<double>& m) {
  for (const auto& [name, t] : m)
    if (compared(spec, name))
      for (double x : t.data)
        if (!std::isfinite(x)) return true;
  return false;
}

}  // namespace

TensorMap<double> mpfr_oracle(const LayerEntry& layer, const Case& c, Direction direction) {
  return Judge(layer, c.inputs, Config::make(layer.spec, c.config), {Tier::mpfr, kCheckOracleBits}, direction).oracle();
}

LayerSpec case_spec(const LayerEntry& layer, const Target& target) {
  return direction_spec(layer.spec, target.direction());
}

CheckResult full_check(const LayerEntry& layer, const Target& target, const Case& c, const TensorMap<double>& oracle,
                       const TensorMap<double>& candidate) {
  Judge judge(layer, c.inputs, Config::make(layer.spec, c.config), oracle, target.direction());
  return judge(candidate, target.model());
}

std::int64_t oracle_nonfinite_elements(const LayerSpec& spec, const TensorMap<double>& oracle,
                                       const TensorMap<double>& candidate) {
  std::int64_t n = 0;
  for (const auto& [name, o] : oracle) {
    const auto c = candidate.find(name);
    if (!compared(spec, name) || c == candidate.end() || c->second.data.size() != o.data.size()) continue;
    for (std::size_t i = 0; i < o.data.size(); ++i) n += !std::isfinite(o.data[i]) && std::isfinite(c->second.data[i]);
  }
  return n;
}

std::int64_t nonfinite_failures(const CheckResult& r) {
  std::int64_t n = 0;
  for (const TensorVerdict& v : r.tensors) n += v.nonfinite_failures;
  return n;
}

double max_ratio(const CheckResult& r) {
  double m = 0;
  for (const TensorVerdict& v : r.tensors) m = std::max(m, v.max_ratio);
  return m;
}

bool still_fails(const LayerEntry& layer, const Target& target, FindingKind kind, const Case& c) {
  const Config cfg = Config::make(layer.spec, c.config);
  const LayerSpec io = case_spec(layer, target);
  const TensorMap<double> cand = target.run(layer, c.inputs, cfg);
  if (kind == FindingKind::nonfinite && !any_nonfinite(io, cand)) return false;
  const TensorMap<double> oracle = mpfr_oracle(layer, c, target.direction());
  switch (kind) {
    case FindingKind::nonfinite:
    case FindingKind::range: {
      // The same classification too: a kernel failure must not shrink into a
      // range case (or back).
      const CheckResult r = Judge(layer, c.inputs, cfg, oracle, target.direction()).nonfinite(cand, target.model());
      return nonfinite_failures(r) > 0 && r.range.beyond == (kind == FindingKind::range);
    }
    case FindingKind::oracle_nonfinite: return oracle_nonfinite_elements(io, oracle, cand) > 0;
    case FindingKind::ratio: {
      // The same kind of failure: a finite ratio above the threshold, not a NaN
      // that shrinking produced (which would be a different bug's reproducer).
      const CheckResult r = full_check(layer, target, c, oracle, cand);
      return !r.pass && nonfinite_failures(r) == 0 && std::isfinite(max_ratio(r));
    }
  }
  return false;
}

CaseSize size_of(const Case& c) {
  CaseSize s;
  s.T = c.dims.at("T");
  s.sequences = c.dims.at("B") * c.dims.at("H");
  for (const auto& [name, t] : c.inputs) {
    ++s.tensors;
    for (double x : t.data) {
      s.nonzeros += x != 0;
      s.magnitude += std::fabs(x);
    }
  }
  return s;
}

namespace {

struct Screened {
  TensorMap<double> candidate;
  bool suspicious_nonfinite = false;  // candidate non-finite somewhere
  bool suspicious_oracle = false;     // fp64 non-finite where the candidate is finite
  double ratio = 0;                   // screened (ratio objective)
};

Screened screen(const LayerEntry& layer, const Target& target, const Case& c, Objective obj, int samples) {
  const Config cfg = Config::make(layer.spec, c.config);
  const LayerSpec io = case_spec(layer, target);
  Screened s;
  s.candidate = target.run(layer, c.inputs, cfg);
  // Screening judges against the fp64 sequential form: cheap, and far more
  // accurate than the kernels screened; suspects are confirmed in MPFR.
  Judge judge(layer, c.inputs, cfg, {Tier::fp64, 0}, target.direction());
  const TensorMap<double>& ref = judge.oracle();
  s.suspicious_nonfinite = any_nonfinite(io, s.candidate);
  s.suspicious_oracle = oracle_nonfinite_elements(io, ref, s.candidate) > 0;
  if (obj == Objective::ratio && !s.suspicious_nonfinite) {
    ModelSpec ms = target.model();
    ms.samples = samples;
    s.ratio = max_ratio(judge(s.candidate, ms));
    if (std::isnan(s.ratio)) s.ratio = 0;
  } else if (s.suspicious_nonfinite) {
    s.ratio = std::numeric_limits<double>::infinity();
  }
  return s;
}

struct PoolEntry {
  double ratio;
  Case c;
};
constexpr std::size_t kPoolSize = 4;

}  // namespace

CampaignResult run_campaign(const LayerEntry& layer, const Target& target, const CampaignOptions& opt) {
  // The cases follow the target's direction: a backward target's carry cotangents
  // (do, dht: value tensors, drawn and moved like v) and its outputs are gradients.
  const LayerSpec spec = case_spec(layer, target);
  const Direction dir = target.direction();
  std::vector<std::string> families = families_for(spec);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  CampaignResult res;
  Progress& p = res.last;
  std::vector<PoolEntry> pool;  // the worst inputs so far (ratio objective), worst first
  int kept[kFindingKinds] = {};
  Case best_case;
  bool have_best = false;
  const auto [first, end] = opt.shard.case_range(opt.budget.cases);
  for (std::int64_t i = first;; ++i) {
    if (i >= end || (opt.budget.cases == 0 && elapsed() >= opt.budget.seconds)) break;
    const std::uint64_t case_seed = mix(opt.seed, static_cast<std::uint64_t>(i));
    Stream pick(mix(case_seed, 3));
    // Ratio objective: every other case is a local move from one of the worst so far.
    const bool local = opt.objective == Objective::ratio && !pool.empty() && i % 2 == 1;
    std::size_t parent = 0;
    Case c;
    if (local) {
      parent = static_cast<std::size_t>(pick.below(static_cast<std::int64_t>(pool.size())));
      c = mutate_case(spec, pool[parent].c, case_seed);
    } else {
      c = generate_case(spec, families[static_cast<std::size_t>(pick.below(static_cast<std::int64_t>(families.size())))],
                        opt.gen, case_seed);
    }
    Screened s;
    try {
      s = screen(layer, target, c, opt.objective, opt.screen_samples);
    } catch (const InputError& e) {
      throw InputError(fmt::format("fuzz case {} (family {}): {}", i, c.family, e.what()));
    }
    FindingKind kind{};
    bool found = false;
    double value = 0;
    if (s.suspicious_nonfinite || s.suspicious_oracle ||
        (opt.objective == Objective::ratio && s.ratio > kRatioThreshold / 2)) {
      const TensorMap<double> oracle = mpfr_oracle(layer, c, dir);
      const std::int64_t orc = oracle_nonfinite_elements(spec, oracle, s.candidate);
      res.oracle_nonfinite_cases += orc > 0;
      CheckResult check;
      const bool need_model = opt.objective == Objective::ratio && !s.suspicious_nonfinite;
      if (need_model) {
        check = full_check(layer, target, c, oracle, s.candidate);
      } else {
        check = Judge(layer, c.inputs, Config::make(layer.spec, c.config), oracle, dir)
                    .nonfinite(s.candidate, target.model());
      }
      if (const std::int64_t nf = nonfinite_failures(check); nf > 0) {
        ++(check.range.beyond ? p.range_cases : p.nonfinite_cases);
        found = true, kind = check.range.beyond ? FindingKind::range : FindingKind::nonfinite,
        value = static_cast<double>(nf);
      } else if (need_model && !check.pass) {
        found = true, kind = FindingKind::ratio, value = max_ratio(check);
      } else if (orc > 0) {
        found = true, kind = FindingKind::oracle_nonfinite, value = static_cast<double>(orc);
      }
    }
    if (std::isfinite(s.ratio) && s.ratio > p.best_ratio) {
      p.best_ratio = s.ratio;
      best_case = c;
      have_best = true;
    }
    if (opt.objective == Objective::ratio && std::isfinite(s.ratio)) {
      if (local && s.ratio > pool[parent].ratio) {
        pool[parent] = {s.ratio, c};  // keep the improvement
      } else if (!local && (pool.size() < kPoolSize || s.ratio > pool.back().ratio)) {
        if (pool.size() == kPoolSize) pool.pop_back();
        pool.push_back({s.ratio, c});
      }
      std::stable_sort(pool.begin(), pool.end(), [](const PoolEntry& a, const PoolEntry& b) { return a.ratio > b.ratio; });
    }
    if (found) {
      const bool failure = kind != FindingKind::oracle_nonfinite && (kind != FindingKind::range || opt.strict_range);
      if (res.first_finding_case < 0 && failure) {
        res.first_finding_case = i;
        res.first_finding_seconds = elapsed();
      }
      if (kept[static_cast<int>(kind)] < opt.max_findings) {
        ++kept[static_cast<int>(kind)];
        Finding f;
        f.kind = kind;
        f.case_index = i;
        f.seconds = elapsed();
        f.original = c;
        f.objective_value = value;
        res.findings.push_back(std::move(f));
        ++p.findings;
      }
    }
    p.cases = i + 1 - first;
    p.seconds = elapsed();
    if (opt.progress) opt.progress(p);
  }
  // After the budget: minimise and settle each finding with `ttrcheck check`'s verdict.
  for (Finding& f : res.findings) {
    f.minimised = opt.minimise ? minimise(layer, target, f.kind, f.original, opt.minimise_trials) : f.original;
    const Config cfg = Config::make(layer.spec, f.minimised.config);
    f.candidate = target.run(layer, f.minimised.inputs, cfg);
    const TensorMap<double> oracle = mpfr_oracle(layer, f.minimised, dir);
    f.check = full_check(layer, target, f.minimised, oracle, f.candidate);
    f.objective_value = f.kind == FindingKind::nonfinite || f.kind == FindingKind::range
                            ? static_cast<double>(nonfinite_failures(f.check))
                        : f.kind == FindingKind::ratio   ? max_ratio(f.check)
                                                         : static_cast<double>(oracle_nonfinite_elements(spec, oracle, f.candidate));
  }
  if (opt.objective == Objective::ratio && have_best) {
    const Config cfg = Config::make(layer.spec, best_case.config);
    const TensorMap<double> cand = target.run(layer, best_case.inputs, cfg);
    res.best_ratio_confirmed = max_ratio(full_check(layer, target, best_case, mpfr_oracle(layer, best_case, dir), cand));
  }
  p.seconds = elapsed();
  return res;
}

}  // namespace ttr::fuzz
