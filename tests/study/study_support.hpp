// Reading a study's files back in tests: CSV tables by column name, and the
// command that runs a quick study into a temporary directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/cli.hpp"

namespace ttr::test {

struct Csv {
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  double num(std::size_t i, const std::string& c) const { return std::stod(rows.at(i).at(c)); }
  const std::string& text(std::size_t i, const std::string& c) const { return rows.at(i).at(c); }
};

// The studies' CSV files hold no quoted fields (numbers, names, dtypes).
inline Csv read_csv(const std::filesystem::path& p) {
  std::ifstream f(p);
  Csv csv;
  std::string line;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
    if (!s.empty() && s.back() == ',') out.push_back("");
    return out;
  };
  if (!std::getline(f, line)) return csv;
  csv.columns = split(line);
  while (std::getline(f, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < csv.columns.size() && i < cells.size(); ++i) row[csv.columns[i]] = cells[i];
    csv.rows.push_back(std::move(row));
  }
  return csv;
}

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `ttrcheck study NAME --quick --threads 1 --no-plots --out DIR`: one thread
// because CTest runs two tests at a time on CI's two cores.
inline CliResult run_quick_study(const std::string& name, const std::filesystem::path& dir,
                                 std::vector<std::string> extra = {"--no-plots"}) {
  std::vector<std::string> args = {"study", name, "--quick", "--threads", "1", "--out", dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

}  // namespace ttr::test
