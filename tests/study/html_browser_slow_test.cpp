// The HTML pages (`ttrcheck study` summary.html, `ttrcheck report --html` of a gate
// run and of a fuzz campaign) in a
// real browser: Debian's chromium, headless, loads each page from a file:// URL
// with the network disabled, logs no error, and its screenshot shows the figures
// (not a blank page: the pixel standard deviation of the screenshot, read back by
// matplotlib, is well above that of an empty white page). Slow (browser start-up),
// and skipped when chromium or python3-matplotlib is missing (chromium is not one
// of scripts/install-deps' packages: `apt-get install chromium`).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/study/study_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ttr::test;

bool have(const std::string& cmd) { return std::system(("command -v " + cmd + " >/dev/null 2>&1").c_str()) == 0; }

// Loads `page` headless, writes `shot`; returns chromium's log (stderr).
std::string screenshot(const fs::path& page, const fs::path& shot, int& rc) {
  const fs::path log = shot.string() + ".log";
  const std::string cmd = "chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars "
                          "--proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' "
                          "--enable-logging=stderr --v=0 --window-size=1200,1600 --screenshot=" +
                          shot.string() + " file://" + page.string() + " >" + log.string() + " 2>&1";
  rc = std::system(cmd.c_str());
  return slurp_file(log);
}

// Standard deviation of the screenshot's pixel values (0..1), by matplotlib.
double pixel_std(const fs::path& png) {
  const fs::path out = png.string() + ".std";
  const std::string cmd = "/usr/bin/python3 -c \"import sys, matplotlib.image as m; print(m.imread(sys.argv[1])[..., :3].std())\" " +
                          png.string() + " > " + out.string();
  if (std::system(cmd.c_str()) != 0) return -1;
  return std::stod(slurp_file(out));
}

void expect_page_renders(const fs::path& page, const fs::path& shot) {
  int rc = -1;
  const std::string log = screenshot(page, shot, rc);
  EXPECT_EQ(rc, 0) << log;
  ASSERT_TRUE(fs::exists(shot)) << log;
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_EQ(log.find(":CONSOLE("), std::string::npos) << "console messages: " << log;
  EXPECT_EQ(log.find("ERR_"), std::string::npos) << "a failed load (a resource outside the page?): " << log;
  const double s = pixel_std(shot);
  // A blank white page has 0; a page of text and a table alone 0.045 (measured with
  // this chromium at 1200x1600); the study page measured 0.149, the report page 0.126.
  EXPECT_GT(s, 0.08) << shot << " looks blank";
}

TEST(HtmlInBrowser, StudySummaryAndReportPageRenderWithFigures) {
  if (!have("chromium")) GTEST_SKIP() << "chromium not installed (apt-get install chromium)";
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-matplotlib not installed";
  TempDir tmp;
  const fs::path study = tmp.path() / "study";
  CliResult r = run_cli({"study", "gka-remark1", "--quick", "--out", study.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(fs::exists(study / "summary.html")) << r.out;
  expect_page_renders(study / "summary.html", tmp.path() / "study.png");

  // A report page from a small real gate run (one layer, one case).
  const fs::path gate = tmp.path() / "gate";
  r = run_cli({"gate", "--layer", "gated_delta_rule", "--case", "small", "--out", gate.string()});
  ASSERT_LE(r.exit_code, 1) << r.err;
  r = run_cli({"baseline", "record", "--report", (gate / "report.json").string(), "--out", tmp / "b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"report", gate.string(), "--html", "--baseline", tmp / "b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_page_renders(gate / "report.html", tmp.path() / "report.png");

  // A fuzz campaign's page (tables and the findings' ratio histogram): the KLA-K
  // p̄ = 0 range findings of the unscaled chunk form, 40 cases (< 1 s).
  const fs::path fuzz = tmp.path() / "fuzz";
  r = run_cli({"fuzz", "--layer", "kla_kalman", "--target", "cpu:fp32", "--form", "chunk_unscaled", "--budget",
               "40cases", "--seed", "1", "--out", fuzz.string()});
  ASSERT_LE(r.exit_code, 1) << r.err;
  r = run_cli({"report", fuzz.string(), "--html"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_page_renders(fuzz / "report.html", tmp.path() / "fuzz.png");
  // Keep the screenshots for a person to look at when asked.
  if (const char* keep = std::getenv("TTR_KEEP_SCREENSHOTS"))
    for (const char* f : {"study.png", "report.png", "fuzz.png"})
      fs::copy_file(tmp.path() / f, fs::path(keep) / f, fs::copy_options::overwrite_existing);
}

}  // namespace
