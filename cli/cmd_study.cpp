// `ttrcheck study`: precision studies (study/, docs/studies.md). Writes the data
// (CSV, study.json) and summary.md, then draws the figures and summary.html with
// the plotting script when python3 and matplotlib are there (one line saying so
// when they are not: the numbers never depend on Python). Exit 0 when no theorem
// the study tests disagrees with the measurement, 1 when one does, 2 for bad usage.
// With --shard i/N (or a scheduler's array index, gate/shard.hpp) it runs cases
// k ≡ i (mod N) only and writes study-shard.json; `ttrcheck merge` joins the shards
// into the unsharded files (study/shard.cpp) and assesses the claims there.
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/plot_script.hpp"
#include "oracles/error.hpp"
#include "study/study.hpp"

namespace ttr::cli {

Command add_study(CLI::App& app) {
  struct Opts {
    std::string name, out;
    bool list = false, quick = false, no_plots = false;
    std::uint64_t seed = 0;
    int threads = 0;
    ShardArgs shard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("study", "precision studies: reproduce the papers' numerical claims and sweep "
                                          "every layer, as data (CSV, JSON), figures and a summary");
  cmd->add_option("name", o->name, "the study (`ttrcheck study --list`)");
  cmd->add_flag("--list", o->list, "list the studies with the claim each tests");
  cmd->add_option("--out", o->out, "output directory (created): <table>.csv, study.json, summary.md, figures, summary.html");
  cmd->add_flag("--quick", o->quick, "the quick variant (under a minute on 2 cores; what CI runs)");
  cmd->add_option("--seed", o->seed, "seed of the inputs (same seed: byte-identical data files)")->check(seed_validator());
  cmd->add_option("--threads", o->threads, "worker threads (default: hardware concurrency; results do not depend on it)")
      ->check(CLI::Range(0, 4096));
  cmd->add_flag("--no-plots", o->no_plots, "write the data and summary.md only; do not run the plotting script");
  add_shard_options(*cmd, o->shard);
  return [o]() {
    if (o->list) {
      if (!o->name.empty()) throw InputError("study --list takes no study name");
      for (const study::Study& s : study::studies())
        fmt::print("{:<20} {}\n{:<20} {}: {}\n", s.name, s.title, "", s.source, s.claim);
      return 0;
    }
    if (o->name.empty()) throw InputError("study: name a study (`ttrcheck study --list`) or pass --list");
    if (o->out.empty()) throw InputError("study: --out DIR is required");
    const study::Study& s = study::find_study(o->name);
    check_outputs({}, {}, {{"--out", o->out}});
    const Shard shard = o->shard.resolve();

    study::Options opt;
    opt.quick = o->quick;
    opt.seed = o->seed;
    opt.threads = o->threads;
    const bool tty = isatty(fileno(stderr));
    const auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    opt.progress = [&](std::size_t done, std::size_t total, const std::string& id) {
      if (tty)
        fmt::print(stderr, "\r\033[Kstudy {}: {}/{} cases, {:.1f} s ({})", s.name, done, total, seconds(), id);
      else if (seconds() > 5)  // logs of long runs: one line per case
        fmt::print(stderr, "study {}: {}/{} cases, {:.1f} s ({})\n", s.name, done, total, seconds(), id);
      std::fflush(stderr);
    };
    if (shard.sharded()) {
      const study::Plan plan = s.plan(opt);
      const std::vector<study::Rows> rows =
          study::run_cases(plan, opt, [&](std::size_t k) { return shard.owns(k); });
      if (tty) fmt::print(stderr, "\n");
      study::write_shard(s, opt, plan, shard.index, shard.count, shard.source, rows, o->out);
      std::size_t mine = 0;
      for (std::size_t k = 0; k < plan.cases.size(); ++k) mine += shard.owns(k);
      fmt::print("study {}{} seed {}, shard {}: {} of {} cases in {:.1f} s; wrote {}/{} (join the shards with "
                 "`ttrcheck merge DIR... --out DIR`)\n",
                 s.name, o->quick ? " (quick)" : "", o->seed, shard.text(), mine, plan.cases.size(), seconds(), o->out,
                 study::kShardFile);
      return 0;
    }
    const study::Result r = study::run_study(s, opt);
    if (tty) fmt::print(stderr, "\n");
    study::write_result(r, o->out);

    fmt::print("study {}{} seed {}: {} cases in {:.1f} s\n", s.name, o->quick ? " (quick)" : "", o->seed,
               r.cases, seconds());
    for (const study::Claim& c : r.claims)
      fmt::print("  {:<9} {}{} ({}): {}\n", study::verdict_name(c.verdict), c.id, c.theorem ? " [theorem]" : "",
                 c.source, c.evidence);
    if (!r.conclusion.empty()) fmt::print("  conclusion: {}\n", r.conclusion);
    if (o->no_plots) {
      fmt::print("  figures: not drawn (--no-plots); draw them later with `ttrcheck-plot study {}` (the script "
                 "beside the ttrcheck executable)\n", o->out);
    } else {
      const PlotRun p = run_plot_script({"study", o->out});
      if (p.ran) fmt::print("  figures: {} (PNG and SVG), summary.html in {}\n", r.figures.size(), o->out);
      else fmt::print("  figures: not drawn: {}; the data and summary.md are written\n", p.reason);
    }
    fmt::print("  wrote {}/study.json, summary.md and {} CSV file(s); verdict: {}\n", o->out, r.tables.size(),
               r.pass ? "PASS" : "FAIL (a theorem disagrees with the measurement)");
    return r.pass ? 0 : 1;
  };
}

}  // namespace ttr::cli
