#include "cli/plot_script.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ttr::cli {
namespace {

std::filesystem::path script_path() {
  if (const char* env = std::getenv("TTRCHECK_PLOT"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("ttrcheck-plot") : exe.parent_path() / "ttrcheck-plot";
}

// One interpreter: exit status of the script, 127 when it could not be started.
int run_with(const std::string& python, const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {python, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 126;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 126;
}

}  // namespace

PlotRun run_plot_script(const std::vector<std::string>& args) {
  const std::filesystem::path script = script_path();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(script, ec))
    return {false, fmt::format("the plotting script {} is missing", script.string())};
  // $TTRCHECK_PYTHON, else python3 on PATH, then the system's /usr/bin/python3
  // (a virtualenv or pyenv python3 first on PATH often lacks matplotlib while
  // Debian's python3-matplotlib is installed for the system interpreter).
  std::vector<std::string> pythons;
  if (const char* env = std::getenv("TTRCHECK_PYTHON"); env && *env) pythons = {env};
  else pythons = {"python3", "/usr/bin/python3"};
  int rc = 127;
  for (const std::string& py : pythons) {
    rc = run_with(py, script.string(), args);
    if (rc != 3 && rc != 127) break;
  }
  switch (rc) {
    case 0: return {true, ""};
    case 127: return {false, "python3 was not found"};
    case 3: return {false, "python3 cannot import matplotlib (Debian: apt-get install python3-matplotlib)"};
    default: return {false, fmt::format("{} failed (exit {}; its message is above)", script.filename().string(), rc)};
  }
}

}  // namespace ttr::cli
