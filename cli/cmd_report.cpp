// `ttrcheck report DIR --html`: a gate, check or fuzz report directory as one
// self-contained HTML page (verdict table, per-check ratio histograms, the worst
// checks, and, given baselines recorded over commits, each check's ratio over
// them). ttrcheck validates every file it is given (the same parsers as
// `baseline`), then the plotting script (scripts/ttrcheck-plot) draws the page;
// without python3 and matplotlib it says so in one line and exits 2, writing nothing.
#include <filesystem>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/plot_script.hpp"
#include "gate/report_read.hpp"
#include "oracles/error.hpp"

namespace ttr::cli {

Command add_report(CLI::App& app) {
  struct Opts {
    std::string dir, out;
    std::vector<std::string> baselines;
    bool html = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("report", "render a gate/check/fuzz report directory as a self-contained HTML page");
  cmd->add_option("dir", o->dir, "directory holding report JSON files (gate's report.json, check --report files) "
                                 "and/or a fuzz campaign.json")->required();
  cmd->add_flag("--html", o->html, "write the HTML page (the only format for now; required)");
  cmd->add_option("--out", o->out, "the page (default DIR/report.html)");
  cmd->add_option("--baseline", o->baselines, "a baseline file (`ttrcheck baseline record`), repeatable, oldest "
                                              "first: the trend of each check's ratio over them");
  return [o]() {
    namespace fs = std::filesystem;
    if (!o->html) throw InputError("report: pass --html (the only output format)");
    std::error_code ec;
    if (!fs::is_directory(o->dir, ec)) throw InputError(fmt::format("{}: not a directory", o->dir));
    if (o->out.empty()) o->out = (fs::path(o->dir) / "report.html").string();
    std::vector<io::NamedPath> inputs;
    for (const std::string& b : o->baselines) inputs.push_back({"--baseline", b});
    check_outputs(inputs, {{"--out", o->out}});
    // Validate what the page will show before anything runs.
    std::size_t reports = 0, checks = 0;
    bool campaign = false;
    for (const auto& e : fs::directory_iterator(o->dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".json") continue;
      const std::string text = read_text(e.path().string());
      if (e.path().filename() == "campaign.json") {
        campaign = true;
      } else if (text.find("\"ttrcheck-report\"") != std::string::npos) {
        checks += parse_report_text(text, e.path().string()).size();
        ++reports;
      }
    }
    if (reports == 0 && !campaign)
      throw InputError(fmt::format("{}: no ttrcheck report (schema ttrcheck-report) or fuzz campaign.json in it",
                                   o->dir));
    for (const std::string& b : o->baselines) parse_baseline_text(read_text(b), b);

    std::vector<std::string> args = {"report", o->dir, "--out", o->out};
    for (const std::string& b : o->baselines) args.insert(args.end(), {"--baseline", b});
    const PlotRun p = run_plot_script(args);
    if (!p.ran) throw InputError(fmt::format("report --html needs python3 with matplotlib: {}", p.reason));
    fmt::print("report: {} ({} report file(s), {} checks{}{}) -> {}\n", o->dir, reports, checks,
               campaign ? ", a fuzz campaign" : "",
               o->baselines.empty() ? "" : fmt::format(", {} baseline(s)", o->baselines.size()), o->out);
    return 0;
  };
}

}  // namespace ttr::cli
