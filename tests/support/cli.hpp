// Running the ttrcheck executable from tests: exit code, stdout and stderr.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ttr::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs TTRCHECK_EXE with `args` (no shell: arguments are passed verbatim).
CliResult run_cli(const std::vector<std::string>& args);

// The repository root (where examples/ and docs/ live), fixed at configure time.
std::filesystem::path source_dir();

// File names directly in `dir` (empty when it does not exist): what a failed
// command must not have left behind.
std::vector<std::string> entries_of(const std::filesystem::path& dir);

// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ttr::test
