// `ttrcheck report DIR --html`: a gate, check or fuzz report directory as one
// self-contained HTML page (verdict table, per-check ratio histograms, the worst
// checks, and, given baselines recorded over commits, each check's ratio over
// them; for fuzz campaigns — DIR/campaign.json or DIR/*/campaign.json — the counts
// per target, the findings and their ratios). ttrcheck validates every file it is
// given (the same parsers as `baseline`; campaign.json and its finding notes as
// JSON), then the plotting script (scripts/ttrcheck-plot) draws the page;
// without python3 and matplotlib it says so in one line and exits 2, writing nothing.
#include <filesystem>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/plot_script.hpp"
#include "gate/report_read.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include <nlohmann/json.hpp>

namespace ttr::cli {
namespace {

// A fuzz campaign directory (fuzz/reproducer.cpp): campaign.json with its list of
// findings, and each finding's note <stem>.json beside it, each a JSON object.
void validate_campaign(const std::filesystem::path& dir) {
  const std::string path = (dir / "campaign.json").string();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(io::read_text_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  if (!doc.is_object() || !doc.contains("findings") || !doc["findings"].is_array())
    throw InputError(fmt::format("{}: not a fuzz campaign.json (no findings list)", path));
  for (const auto& stem : doc["findings"]) {
    if (!stem.is_string()) throw InputError(fmt::format("{}: a finding that is not a name", path));
    const std::string note = (dir / (stem.get<std::string>() + ".json")).string();
    nlohmann::json n;
    try {
      n = nlohmann::json::parse(io::read_text_file(note));
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(fmt::format("{}: not JSON: {}", note, e.what()));
    }
    if (!n.is_object()) throw InputError(fmt::format("{}: not a finding note", note));
  }
}

}  // namespace

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
    std::size_t reports = 0, checks = 0, campaigns = 0;
    for (const auto& e : fs::directory_iterator(o->dir)) {
      if (e.is_directory() && fs::is_regular_file(e.path() / "campaign.json")) {
        validate_campaign(e.path());
        ++campaigns;
      }
      if (!e.is_regular_file() || e.path().extension() != ".json") continue;
      if (e.path().filename() == "campaign.json") {
        validate_campaign(o->dir);
        ++campaigns;
        continue;
      }
      const std::string text = io::read_text_file(e.path().string());
      if (text.find("\"ttrcheck-report\"") != std::string::npos) {
        checks += parse_report_text(text, e.path().string()).size();
        ++reports;
      }
    }
    if (reports == 0 && campaigns == 0)
      throw InputError(fmt::format("{}: no ttrcheck report (schema ttrcheck-report) or fuzz campaign.json in it",
                                   o->dir));
    for (const std::string& b : o->baselines) parse_baseline_text(io::read_text_file(b), b);

    std::vector<std::string> args = {"report", o->dir, "--out", o->out};
    for (const std::string& b : o->baselines) args.insert(args.end(), {"--baseline", b});
    const PlotRun p = run_plot_script(args);
    if (!p.ran) throw InputError(fmt::format("report --html needs python3 with matplotlib: {}", p.reason));
    fmt::print("report: {} ({} report file(s), {} checks{}{}) -> {}\n", o->dir, reports, checks,
               campaigns ? fmt::format(", {} fuzz campaign(s)", campaigns) : "",
               o->baselines.empty() ? "" : fmt::format(", {} baseline(s)", o->baselines.size()), o->out);
    return 0;
  };
}

}  // namespace ttr::cli
