// `ttrcheck gate`: the built-in suite (gate/gate.hpp) on the built-in kernels
// — the CPU chunk and scan forms in bf16 and fp32 policy, forward and backward —
// with one verdict line per (layer, form, dtype, direction), a report directory
// (report.json, junit.xml), and exit 1 when any check fails. The README's main
// command.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <map>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "gate/gate.hpp"
#include "gate/mutants.hpp"
#include "gate/policies.hpp"
#include "gate/report.hpp"
#include "gate/shard.hpp"

namespace ttr::cli {
namespace {

std::string where(const Location& l) {
  return l.t < 0 ? fmt::format("b={} h={}", l.b, l.h) : fmt::format("b={} t={} h={}", l.b, l.t, l.h);
}

// One line per (layer, form, dtype) and direction ("…/backward"): its checks over
// cases and seeds, the worst tensor (a gradient, for the backward lines).
void print_verdicts(const GateResult& r, double threshold) {
  struct Row {
    int checks = 0, failed = 0;
    double worst = -1.0;
    std::string at;
  };
  std::map<std::string, Row> rows;
  for (const GateCheck& c : r.checks) {
    const auto slash = c.id.find('/', c.id.find('/', c.id.find('/') + 1) + 1);  // layer/form/dtype
    const bool backward = c.result.direction == Direction::backward;
    Row& row = rows[c.id.substr(0, slash) + (backward ? "/backward" : "")];
    ++row.checks;
    row.failed += c.result.pass ? 0 : 1;
    for (const TensorVerdict& v : c.result.tensors) {
      if (!v.present) continue;
      const double ratio = v.nonfinite_failures ? std::numeric_limits<double>::infinity() : v.max_ratio;
      if (ratio > row.worst) {
        row.worst = ratio;
        const std::string case_seed = c.id.substr(slash + 1, backward ? c.id.rfind('/') - slash - 1 : std::string::npos);
        row.at = fmt::format("{} {} {}", case_seed, v.name, where(v.nonfinite_failures ? v.first_nonfinite : v.worst));
      }
    }
  }
  fmt::print("{:<45} {:>6} {:>6} {:>10}  {:<6} {}\n", "layer/form/dtype[/backward]", "checks", "failed", "max ratio",
             "verdict", "worst (case/seed tensor location)");
  for (const auto& [key, row] : rows)
    fmt::print("{:<45} {:>6} {:>6} {:>10.3g}  {:<6} {}\n", key, row.checks, row.failed, row.worst,
               row.failed ? "FAIL" : "pass", row.at);
  fmt::print("\nthreshold on the error ratio: {}\n", threshold);
  // Which tier produced the oracles (docs/oracle-tiers.md).
  std::map<std::string, int> tiers;
  std::size_t escalated = 0, slices = 0;
  double own = 0.0;
  for (const GateCheck& c : r.checks) {
    const OracleNote& n = c.result.oracle;
    if (n.provenance.tier.empty()) continue;
    ++tiers[n.provenance.tier.substr(0, n.provenance.tier.find(':'))];
    escalated += n.provenance.escalated.size();
    slices += static_cast<std::size_t>(n.provenance.slices);
    if (!std::isnan(n.error_ratio)) own = std::max(own, n.error_ratio);
  }
  if (!tiers.empty()) {
    std::string t;
    for (const auto& [name, n] : tiers) t += fmt::format("{}{} {}", t.empty() ? "" : ", ", n, name);
    fmt::print("oracles (checks by tier): {}; {} of {} slices escalated to MPFR (summed over checks); largest estimated own error {:.2g} of "
               "the bound\n", t, escalated, slices, own);
  }
}

}  // namespace

Command add_gate(CLI::App& app) {
  struct Opts {
    GateOptions gate;
    std::string out = "ttrcheck-gate", criterion = "model", direction = "both", inject, oracle_tier = "auto";
    std::vector<double> inject_magnitudes;
    std::vector<std::string> forms, policies;
    bool cuda_only = false, no_cuda = false;
    ShardArgs shard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("gate", "run the built-in suite on the built-in CPU kernels and print verdicts");
  cmd->add_option("--suite", o->gate.suite,
                  "default|full|production (production: B=4 T=4096 H=8 K=V=128, T=16384, 16 packed sequences of 32k "
                  "tokens; for the CUDA kernels, one layer and direction at a time: ~1 min per forward check on 16 "
                  "cores)");
  cmd->add_option("--layer", o->gate.layers, "only these layers (repeatable)");
  cmd->add_option("--case", o->gate.cases, "only these cases of the suite (repeatable)");
  cmd->add_option("--seed", o->gate.seed, "first seed")->check(seed_validator());
  cmd->add_option("--seeds", o->gate.seeds, "seeds per case (default: the suite's)")->check(CLI::Range(1, 100000));
  cmd->add_option("--threads", o->gate.threads, "threads: units in parallel, and the rest of them over each unit's (sequence, head) slices (default: TTR_THREADS, else all cores)")->check(CLI::Range(1, 1024));
  cmd->add_option("--samples", o->gate.samples, "Monte Carlo arithmetic runs per model")->check(CLI::Range(2, 1000));
  cmd->add_option("--criterion", o->criterion, "model (error ratios) | fla (FLA's tests: relative RMS vs fp32 below 0.005 for outputs, 0.008/0.02 for gradients) | fla-ci (FLA's CI: misses below 1 % or 0.3 absolute are warnings)");
  cmd->add_option("--mutant", o->gate.mutant, "run the kernels with a catalogued bug (see `ttrcheck mutants`)");
  cmd->add_option("--inject", o->inject,
                  "testing the gate: judge each CPU kernel's outputs with an injected relative error of this shape "
                  "(scale|noise|chunk-first-row|one-head) at every --inject-magnitudes ε (docs/gate-teeth.md)");
  cmd->add_option("--inject-magnitudes", o->inject_magnitudes,
                  "the ε of --inject (default: 0, then 1e-7 … 1 in quarter decades)")
      ->delimiter(',');
  cmd->add_option("--direction", o->direction,
                  "forward | backward | both (default): the forms of these directions (backward: every gradient "
                  "of the backward forms the registry declares)");
  cmd->add_option("--form", o->forms,
                  "only these kernels' forms (chunk|scan|sequential, repeatable; default: every chunk and scan form "
                  "on the CPU, every declared kernel on the device)");
  cmd->add_option("--policy", o->policies,
                  "judge these arithmetics (repeatable; default bf16 and fp32): fp32|tf32|fp16|bf16-storage|bf16|fp64; "
                  "a foreign one runs the CPU forms in its concrete arithmetic (tf32: `run --arith tf32`; "
                  "bf16-storage: the bf16 forms, judged as fp32 kernels) and judges them under its model");
  cmd->add_option("--out", o->out, "report directory (report.json, junit.xml)");
  cmd->add_flag("--cuda-only", o->cuda_only, "run only the CUDA target (the kernels of gpu/ on the device)");
  cmd->add_flag("--no-cuda", o->no_cuda, "leave the CUDA target out");
  add_shard_options(*cmd, o->shard);
  cmd->add_flag("--strict-range", o->gate.strict_range,
                "count range findings (NaN/Inf from intermediates beyond the dtype's range) as failures");
  cmd->add_option("--oracle-tier", o->oracle_tier,
                  "auto (double-double where its estimated own error is negligible, MPFR slices elsewhere) | mpfr");
  return [o]() {
    o->gate.oracle_mode = parse_oracle_mode(o->oracle_tier);
    if (o->cuda_only && o->no_cuda) throw InputError("--cuda-only and --no-cuda exclude each other");
    if (o->criterion == "model") o->gate.criterion = Criterion::model;
    else if (o->criterion == "fla") o->gate.criterion = Criterion::fla;
    else if (o->criterion == "fla-ci") o->gate.criterion = Criterion::fla_ci;
    else throw InputError(fmt::format("unknown criterion '{}' (model|fla|fla-ci)", o->criterion));
    if (!o->inject_magnitudes.empty() && o->inject.empty()) throw InputError("--inject-magnitudes needs --inject");
    if (!o->inject.empty()) {
      o->gate.inject = parse_inject_shape(o->inject);
      o->gate.inject_magnitudes = o->inject_magnitudes.empty() ? default_inject_magnitudes() : o->inject_magnitudes;
    }
    for (const std::string& f : o->forms) o->gate.forms.push_back(parse_form(f));
    for (const std::string& p : o->policies) o->gate.policies.push_back(parse_policy(p));
    std::string cpu_only_policy;  // one the device's kernels do not run: the CUDA target is left out
    for (const PolicyChoice& p : o->gate.policies)
      if (!device_policy(p) && cpu_only_policy.empty()) cpu_only_policy = policy_name(p.dtype, p.policy);
    if (o->cuda_only && !cpu_only_policy.empty())
      throw InputError(fmt::format("--cuda-only with --policy {}: the device's kernels run bf16 and fp32 only",
                                   cpu_only_policy));
    if (o->direction == "both") o->gate.directions = {Direction::forward, Direction::backward};
    else if (o->direction == "forward") o->gate.directions = {Direction::forward};
    else if (o->direction == "backward") o->gate.directions = {Direction::backward};
    else throw InputError(fmt::format("--direction: unknown direction '{}' (forward|backward|both)", o->direction));
    // Usage errors and an unwritable report directory are found before the
    // suite runs rather than after it.
    validate_gate_options(o->gate);
    check_outputs({}, {}, {{"--out", o->out}});
    o->gate.shard = o->shard.resolve();
    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the report directory: {}", o->out, ec.message()));
    // Progress: on a terminal one line rewritten in place; elsewhere (a CI log, nohup)
    // a line a minute, so that a calibration-sized gate is seen to be alive — a run
    // under a minute prints nothing. (Called under the gate's report lock.)
    const bool tty = isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    o->gate.progress = [t0, tty, shown = 0.0](std::size_t done, std::size_t total, const std::string& id) mutable {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (tty) {
        fmt::print(stderr, "\r\033[K[{}/{}] {:.0f} s  {}", done, total, s, id);
        if (done == total) fmt::print(stderr, "\n");
      } else if (s - shown >= 60.0 && done < total) {
        shown = s;
        fmt::print(stderr, "[{}/{}] {:.0f} s  {}\n", done, total, s, id);
        std::fflush(stderr);
      }
    };
    GateResult r;
    if (!o->cuda_only) r = run_gate(o->gate);
    // The CUDA target: the kernels of gpu/ on the device, judged against the same
    // oracle and error model (gate/kernel_checks.hpp). Without a device it is
    // reported as skipped and leaves the exit code alone.
    GateResult rc;
    std::string cuda_line;
    if (o->no_cuda) cuda_line = "skipped: --no-cuda";
    else if (o->gate.criterion != Criterion::model) cuda_line = "skipped: runs under the model criterion only";
    else if (const Mutant m = o->gate.mutant.empty() ? Mutant::none : parse_mutant(o->gate.mutant);
             m != Mutant::none && !mutant_info(m).cuda)
      cuda_line = fmt::format("skipped: mutant {} is planted in the CPU forms only", o->gate.mutant);
    else if (!o->inject.empty()) cuda_line = "skipped: errors are injected into the CPU kernels' outputs";
    else if (!cpu_only_policy.empty())
      cuda_line = fmt::format("skipped: --policy {} is judged on the CPU forms (the device's kernels run bf16 and fp32)",
                              cpu_only_policy);
    else {
      GateOptions g = o->gate;
      g.backend = Backend::cuda;
      rc = run_gate(g);
      cuda_line = rc.skipped.empty() ? fmt::format("{} checks on {}", rc.checks.size(), rc.device) : rc.skipped;
    }
    const double threshold = o->gate.criterion == Criterion::model ? kRatioThreshold : 1.0;
    std::string policies;
    for (const std::string& p : o->policies) policies += (policies.empty() ? ", policy " : " ") + p;
    fmt::print("gate: suite {}, criterion {}, direction {}{}{}\n\n", o->gate.suite, o->criterion, o->direction,
               policies + (o->gate.mutant.empty() ? "" : ", mutant " + o->gate.mutant) +
                   (o->inject.empty() ? "" : ", injected " + o->inject),
               o->gate.shard.sharded() ? ", shard " + o->gate.shard.text() : "");
    if (!o->cuda_only) print_verdicts(r, threshold);
    fmt::print("\ncuda target (gpu/ kernels, chunk size 64): {}\n", cuda_line);
    if (!rc.checks.empty()) {
      fmt::print("\n");
      print_verdicts(rc, threshold);
    }
    // A shard's report records what `ttrcheck merge` needs: the options that
    // must agree between shards, and each check's unit in the unsharded plan
    // (per target: the CPU forms' checks come before the CUDA kernels').
    nlohmann::json shard;
    if (o->gate.shard.sharded()) {
      const nlohmann::json config{{"suite", o->gate.suite},   {"layers", o->gate.layers},
                                  {"cases", o->gate.cases},   {"seed", o->gate.seed},
                                  {"seeds", o->gate.seeds},   {"samples", o->gate.samples},
                                  {"criterion", o->criterion}, {"mutant", o->gate.mutant},
                                  {"direction", o->direction},
                                  {"inject", o->inject}, {"inject_magnitudes", o->gate.inject_magnitudes},
                                  {"strict_range", o->gate.strict_range},
                                  {"oracle_tier", o->oracle_tier},
                                  {"policies", o->policies},
                                  {"cpu", o->cuda_only ? "skipped: --cuda-only" : "ran"},
                                  {"cuda", rc.skipped.empty() && !cuda_line.starts_with("skipped") ? "ran" : cuda_line}};
      shard = shard_json(o->gate.shard, config);
      nlohmann::json at = nlohmann::json::array();
      for (const GateCheck& c : r.checks) at.push_back({"cpu", c.unit});
      for (const GateCheck& c : rc.checks) at.push_back({"cuda", c.unit});
      shard["units"] = {{"cpu", r.units}, {"cuda", rc.units}};
      shard["check_units"] = std::move(at);
    }
    for (GateCheck& c : rc.checks) r.checks.push_back(std::move(c));
    r.pass = r.pass && rc.pass;
    std::vector<std::pair<std::string, CheckResult>> checks;
    for (const GateCheck& c : r.checks) checks.emplace_back(c.id, c.result);
    nlohmann::json doc = report_json("gate", checks);
    if (!shard.is_null()) doc["shard"] = std::move(shard);
    write_report(o->out + "/report.json", doc);
    write_junit(o->out + "/junit.xml", junit_xml("ttrcheck-gate", checks));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::size_t failed = 0;
    for (const GateCheck& c : r.checks) failed += c.result.pass ? 0 : 1;
    fmt::print("{}: {} checks, {} failed, {:.1f} s; report in {}/\n", r.pass ? "PASS" : "FAIL", r.checks.size(), failed,
               s, o->out);
    return r.pass ? 0 : 1;
  };
}

}  // namespace ttr::cli
