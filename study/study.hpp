// Precision studies (docs/studies.md): each reproduces a paper's numerical claim
// or sweeps every layer, and produces data a reviewer can check — tables (CSV),
// the full configuration, tool version and seed (study.json), the claims with
// the measurement's verdict, and figure specifications that the plotting script
// (scripts/ttrcheck-plot) renders from the data files alone.
//
// A study is a plan: its configuration (quick or full), its tables, a list of
// independent cases (each appends rows to the tables and depends only on its own
// id and the seed, so cases may run on any thread, in any order, or on another
// machine: the seam for sharding), its figures, and an assessment that turns the
// finished tables into claims. Rows are concatenated in plan order, so the same
// seed gives byte-identical files whatever the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace ttr::study {

// A table cell: a number (non-finite allowed: written "inf", "nan"), an integer, or text.
using Cell = std::variant<double, std::int64_t, std::string>;
using Row = std::vector<Cell>;

struct TableSpec {
  std::string name;                  // written as <name>.csv
  std::vector<std::string> columns;
  std::string doc;                   // one line: what a row is
};

// The rows of every table, by table name.
using Rows = std::map<std::string, std::vector<Row>>;

// A finished table with column lookup, what assessments and tests read.
struct Table {
  TableSpec spec;
  std::vector<Row> rows;
  int column(const std::string& name) const;         // std::out_of_range for an unknown column
  double num(const Row& r, const std::string& c) const;  // a numeric cell as double
  std::string text(const Row& r, const std::string& c) const;
};
using Tables = std::map<std::string, Table>;

// What the plotting script draws: one panel per distinct value of `facet` (or
// one panel), one line per distinct value of `series` and per y column.
struct Figure {
  std::string name;    // files <name>.png and <name>.svg
  std::string title;
  std::string table;
  std::string x;
  std::vector<std::string> y;
  // Reference curves (bounds, the paper's values): drawn once per panel, dashed,
  // from the rows of the panel's first series.
  std::vector<std::string> ref = {};
  std::string series = {};                  // column whose values are the lines
  std::string facet = {};                   // column whose values are the panels
  std::map<std::string, std::string> where = {};  // keep rows whose column has this value
  bool logx = false, logy = false;
  std::string xlabel = {}, ylabel = {};
  std::vector<std::pair<double, std::string>> hlines = {};  // reference levels (a threshold)
  std::string caption = {};                 // one sentence under the figure
  // The y axis's lower end (NaN: matplotlib's choice), e.g. to keep a few exact
  // zeros of rounding size from flattening a log axis.
  double ymin = std::numeric_limits<double>::quiet_NaN();
};

enum class Verdict { agrees, disagrees, observed };
const char* verdict_name(Verdict);

// A claim of a paper and what the measurement says about it.
struct Claim {
  std::string id;
  std::string source;     // "GKA eq. (CH)"
  std::string statement;  // the claim, in the paper's terms
  bool theorem = false;   // a proven statement: a disagreement fails the study (exit 1)
  Verdict verdict = Verdict::observed;
  std::string evidence;   // the numbers behind the verdict
};

struct Options {
  bool quick = false;
  std::uint64_t seed = 0;
  int threads = 0;  // 0: hardware concurrency
  // Called after each finished case (done, total, case id), serialised.
  std::function<void(std::size_t, std::size_t, const std::string&)> progress = {};
};

// One independent unit of work. `run` receives a seed derived from the study
// seed and the case id only, and returns its rows.
struct Case {
  std::string id;
  std::function<Rows(std::uint64_t seed)> run;
};

struct Plan {
  nlohmann::json config;            // every parameter of the run
  std::vector<TableSpec> tables;
  std::vector<Case> cases;
  std::vector<Figure> figures;
  std::function<std::vector<Claim>(const Tables&)> assess;
  // Two sentences: what the figure shows and whether the paper's claim holds.
  std::function<std::string(const Tables&, const std::vector<Claim>&)> conclusion;
};

struct Study {
  std::string name;     // `ttrcheck study NAME`
  std::string title;
  std::string source;   // the paper and its numbering ("GKA Remark 1, Lemma 4, eq. (CH)")
  std::string claim;    // the paper's claim, one or two sentences
  std::function<Plan(const Options&)> plan;
};

struct Result {
  const Study* study = nullptr;
  Options options;
  nlohmann::json config;
  Tables tables;
  std::vector<Figure> figures;
  std::vector<Claim> claims;
  std::string conclusion;
  std::size_t cases = 0;
  bool pass = true;  // no theorem disagrees
};

// Every built-in study, in study/studies.def order.
const std::vector<Study>& studies();
// InputError naming the study and listing the known ones.
const Study& find_study(const std::string& name);

// The seed of a case: splitmix64 of the study seed and an FNV-1a hash of the id.
std::uint64_t case_seed(std::uint64_t seed, const std::string& case_id);

// Runs the plan's cases (on threads; rows in plan order) and assesses them.
Result run_study(const Study& s, const Options& opt);

// The two halves of run_study, for sharding (study/shard.cpp). run_cases runs the
// cases k with owns(k) (all when owns is empty) on threads and returns every
// case's rows by plan index (cases not owned: empty). assemble joins the rows of
// all cases in plan order and assesses them: run_study = assemble ∘ run_cases.
std::vector<Rows> run_cases(const Plan& plan, const Options& opt,
                            const std::function<bool(std::size_t)>& owns = {});
Result assemble(const Study& s, const Options& opt, const Plan& plan, std::vector<Rows> case_rows);

// Sharding (docs/studies.md, "Sharding"): shard i of N runs the cases k with
// k mod N = i and writes them to `dir`/study-shard.json (atomically): the
// study, seed, variant, tool version, the plan's configuration and case ids, and
// each case's rows with every cell spelled exactly (shortest round-trip decimals).
// merge_shards reads the shard files of one run (InputError, nothing written,
// when they do not belong together, a shard is given twice or one is missing),
// joins the rows in plan order and writes what the unsharded run writes
// (write_result): byte-identical files whatever N and the split.
void write_shard(const Study& s, const Options& opt, const Plan& plan, std::uint64_t index, std::uint64_t count,
                 const std::string& source, const std::vector<Rows>& case_rows, const std::string& dir);
struct Merged {
  Result result;
  std::size_t shards = 0;
};
Merged merge_shards(const std::vector<std::string>& dirs, const std::string& out);
inline constexpr const char* kShardFile = "study-shard.json";

// The files of a result in `dir` (created): <table>.csv, study.json, summary.md.
// Each written atomically. Returns the paths written.
std::vector<std::string> write_result(const Result& r, const std::string& dir);

// A number as the CSV and JSON files hold it: shortest round-trip decimal, "inf", "-inf", "nan".
std::string format_number(double x);

}  // namespace ttr::study
