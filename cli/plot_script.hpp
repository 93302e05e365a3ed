// Running the plotting script (scripts/ttrcheck-plot, copied next to the
// ttrcheck executable at build time) for `ttrcheck study` and `ttrcheck report
// --html`. The numbers never depend on it: it reads the data files ttrcheck wrote.
#pragma once

#include <string>
#include <vector>

namespace ttr::cli {

struct PlotRun {
  bool ran = false;     // the script ran to completion (exit 0)
  std::string reason;   // why not, one line, when !ran
};

// Runs `python3 <script> args...` (no shell). The script is $TTRCHECK_PLOT when
// set, else ttrcheck-plot beside this executable; the interpreter
// $TTRCHECK_PYTHON, else python3 on PATH, then /usr/bin/python3. Exit 3 from the
// script means matplotlib cannot be imported.
PlotRun run_plot_script(const std::vector<std::string>& args);

}  // namespace ttr::cli
