// `ttrcheck fuzz`: a campaign against a kernel (fuzz/campaign.hpp,
// docs/fuzzing.md). Exit 0 when no kernel failure was found, 1 when one was
// (a non-finite output where the oracle is finite, or an error ratio above the
// gate's threshold), 2 for bad usage. Every option is validated and the output
// directory created before the first case runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "fuzz/reproducer.hpp"
#include "gate/mutants.hpp"

namespace ttr::cli {

Command add_fuzz(CLI::App& app) {
  struct Opts {
    std::string layer, target, form, budget, out = "fuzz-out", objective = "nan", mutant = "none";
    std::uint64_t seed = 0;
    int chunk_size = 16, max_findings = 3;
    std::int64_t length = 0;
    bool no_minimise = false, strict_range = false, backward = false;
    ShardArgs shard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("fuzz", "search for inputs that break a kernel: NaN/Inf hunts and worst-error "
                                         "searches, with minimised reproducers");
  cmd->add_option("--layer", o->layer, "layer name (see `ttrcheck layers`)")->required();
  cmd->add_option("--target", o->target, "kernel under test: cpu:bf16|cpu:fp32|cuda:bf16|cuda:fp32")->required();
  cmd->add_option("--form", o->form, "chunk|scan|sequential (default: chunk if the layer has it, else scan)");
  cmd->add_option("--budget", o->budget, "when to stop: 500cases (deterministic) or 90s, 10m, 2h")->required();
  cmd->add_option("--seed", o->seed, "campaign seed (same seed and case budget: identical findings and files)")
      ->check(seed_validator());
  cmd->add_option("--out", o->out, "directory for reproducers and campaign.json (created; default fuzz-out)");
  cmd->add_option("--objective", o->objective, "nan: non-finite outputs; ratio: the largest error ratio");
  cmd->add_option("--mutant", o->mutant, "run the CPU kernel with a catalogued bug (`ttrcheck mutants`)");
  auto* chunk_opt = cmd->add_option("--chunk-size", o->chunk_size, "the kernel's chunk size C (default 16; 64 for cuda:*)")
                        ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--length", o->length, "fix T for every case (default: lengths around multiples of C)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--max-findings", o->max_findings, "reproducers written per kind of finding")
      ->check(CLI::Range(0, 1000));
  cmd->add_flag("--no-minimise", o->no_minimise, "write findings as found, unshrunk");
  add_shard_options(*cmd, o->shard);
  cmd->add_flag("--backward", o->backward,
                "fuzz the backward form (cpu:bf16|cpu:fp32): cases carry cotangents do, dht; every gradient is "
                "judged (NaN objective: non-finite gradients; ratio objective: the largest gradient error ratio)");
  cmd->add_flag("--strict-range", o->strict_range,
                "count range findings (NaN/Inf from intermediates beyond the dtype's range) as failures");
  return [o, chunk_opt]() {
    namespace fs = std::filesystem;
    const LayerEntry& layer = find_layer(o->layer);
    const fuzz::TargetSpec ts = fuzz::parse_target(o->target);
    // The CUDA chunk kernels have one chunk size: default to it.
    if (ts.backend == Backend::cuda && chunk_opt->count() == 0) o->chunk_size = 64;
    const Direction direction = o->backward ? Direction::backward : Direction::forward;
    Form form;
    if (!o->form.empty()) form = parse_form(o->form);
    else
      form = layer.has_form(Form::chunk, direction)  ? Form::chunk
             : layer.has_form(Form::scan, direction) ? Form::scan
                                                     : Form::sequential;
    fuzz::CampaignOptions opt;
    opt.budget = fuzz::parse_budget(o->budget);
    opt.objective = fuzz::parse_objective(o->objective);
    opt.seed = o->seed;
    opt.gen.chunk = o->chunk_size;
    opt.gen.length = o->length;
    opt.max_findings = o->max_findings;
    opt.minimise = !o->no_minimise;
    opt.strict_range = o->strict_range;
    const Mutant mutant = parse_mutant(o->mutant);
    const auto target = fuzz::make_target(ts, layer, form, o->chunk_size, mutant, direction);
    // Shard i of N runs its contiguous range of the budget's case indices.
    opt.shard = o->shard.resolve();
    const fs::path dir(o->out);
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw InputError(fmt::format("--out {}: exists and is not a directory", o->out));
    if (!fs::exists(dir, ec) && !fs::create_directories(dir, ec))
      throw InputError(fmt::format("--out {}: cannot create the directory ({})", o->out, ec.message()));

    const bool tty = isatty(fileno(stderr));
    double shown = -1;
    opt.progress = [&](const fuzz::Progress& p) {
      if (!tty || (p.seconds - shown < 0.25 && opt.budget.cases != p.cases + opt.shard.case_range(opt.budget.cases).first))
        return;
      shown = p.seconds;
      fmt::print(stderr, "\r{} {} {}{}: {} cases, {:.1f} cases/s, best ratio {:.3g}, NaN/Inf cases {}, findings {}   ",
                 layer.spec.name, ts.text(), form_name(form), o->backward ? " backward" : "", p.cases,
                 p.cases / std::max(p.seconds, 1e-9),
                 p.best_ratio, p.nonfinite_cases, p.findings);
      std::fflush(stderr);
    };
    const fuzz::CampaignResult r = fuzz::run_campaign(layer, *target, opt);
    if (tty) fmt::print(stderr, "\n");

    fuzz::CampaignInfo info{layer.spec.name, ts.text(), form, o->chunk_size, opt.objective, o->seed, opt.budget,
                            o->mutant, o->strict_range};
    info.direction = direction;
    if (opt.shard.sharded()) {
      // What must agree between the shards of one campaign, and the cases this one ran.
      const nlohmann::json config{{"layer", layer.spec.name}, {"target", ts.text()},   {"form", form_name(form)},
                                  {"chunk_size", o->chunk_size}, {"mutant", o->mutant}, {"objective", o->objective},
                                  {"seed", o->seed},           {"budget", opt.budget.text()}, {"length", o->length},
                                  {"max_findings", o->max_findings}, {"minimise", !o->no_minimise},
                                  {"strict_range", o->strict_range}, {"direction", direction_name(direction)}};
      info.shard = shard_json(opt.shard, config);
      const std::int64_t first = opt.shard.case_range(opt.budget.cases).first;
      info.shard["cases"] = {first, first + r.last.cases};
    }
    const auto stems = fuzz::write_reproducers(dir, layer, *target, info, r);
    fmt::print("fuzz {} {} {}{} objective {} seed {} budget {}{}: {} cases in {:.1f} s ({:.2f} cases/s)\n",
               layer.spec.name, ts.text(), form_name(form), o->backward ? " backward" : "",
               objective_name(opt.objective), o->seed,
               opt.budget.text(), opt.shard.sharded() ? ", shard " + opt.shard.text() : "", r.last.cases,
               r.last.seconds, r.last.cases / std::max(r.last.seconds, 1e-9));
    fmt::print("  NaN/Inf cases (oracle finite): {} kernel failures, {} range findings{}; oracle non-finite cases: {}\n",
               r.last.nonfinite_cases, r.last.range_cases, opt.strict_range ? " (--strict-range: failures)" : "",
               r.oracle_nonfinite_cases);
    if (opt.objective == fuzz::Objective::ratio)
      fmt::print("  best ratio {:.3g} (screened), {:.3g} under the full check (threshold {})\n", r.last.best_ratio,
                 r.best_ratio_confirmed, kRatioThreshold);
    if (r.first_finding_case >= 0)
      fmt::print("  first finding at case {} after {:.2f} s\n", r.first_finding_case, r.first_finding_seconds);
    bool failed = false;
    for (std::size_t i = 0; i < r.findings.size(); ++i) {
      const fuzz::Finding& f = r.findings[i];
      const fuzz::CaseSize a = fuzz::size_of(f.original), b = fuzz::size_of(f.minimised);
      failed |= f.kind != fuzz::FindingKind::oracle_nonfinite && (f.kind != fuzz::FindingKind::range || o->strict_range);
      const bool repeat = std::find(stems.begin(), stems.begin() + static_cast<std::ptrdiff_t>(i), stems[i]) !=
                          stems.begin() + static_cast<std::ptrdiff_t>(i);
      fmt::print("  {}{}: {} {} (case {}, family {}; T {} -> {}, B*H {} -> {}, nonzeros {} -> {})\n",
                 repeat ? "duplicate of " : "", stems[i], fuzz::kind_name(f.kind), f.objective_value, f.case_index,
                 f.original.family, a.T, b.T, a.sequences, b.sequences, a.nonzeros, b.nonzeros);
    }
    if (!stems.empty())
      fmt::print("  replay: cd {} && {}\n", o->out, fuzz::check_command(info, stems.front(), stems.front() + ".candidate.safetensors"));
    return failed ? 1 : 0;
  };
}

}  // namespace ttr::cli
