// Sharded studies (docs/studies.md, "Sharding"): `ttrcheck study NAME --shard i/N`
// runs the cases k with k mod N = i (gate/shard.hpp's strided partition: a sweep's
// expensive long-T cases sit next to each other in its plan) and writes their rows
// to study-shard.json; `ttrcheck merge` joins the shards of one run into the files
// the unsharded run writes, byte for byte. A study's cases depend only on the seed
// and their own id (study.hpp), and the assessment runs once, on the joined tables,
// so nothing in the merged result depends on how the cases were split.
//
// A cell is written as text that reads back to the same value: "d:" and the
// shortest round-trip decimal (format_number; "inf", "-inf", "nan"), "i:" and the
// integer, "s:" and the string. JSON numbers would lose non-finite values and the
// double/integer distinction the CSV files keep.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "gate/report.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/oracle.hpp"
#include "study/study.hpp"

namespace ttr::study {
namespace {

namespace fs = std::filesystem;

std::string cell_text(const Cell& c) {
  if (const double* d = std::get_if<double>(&c)) return "d:" + format_number(*d);
  if (const std::int64_t* i = std::get_if<std::int64_t>(&c)) return "i:" + std::to_string(*i);
  return "s:" + std::get<std::string>(c);
}

Cell parse_cell(const std::string& t, const std::string& where) {
  const auto bad = [&] { return InputError(fmt::format("{}: malformed cell '{}'", where, t)); };
  if (t.size() < 2 || t[1] != ':') throw bad();
  const std::string body = t.substr(2);
  switch (t[0]) {
    case 's': return body;
    case 'i': {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(body.c_str(), &end, 10);
      if (body.empty() || *end || errno) throw bad();
      return static_cast<std::int64_t>(v);
    }
    case 'd': {
      if (body == "nan") return std::nan("");
      if (body == "inf") return INFINITY;
      if (body == "-inf") return -INFINITY;
      char* end = nullptr;
      const double v = std::strtod(body.c_str(), &end);  // a shortest round-trip decimal reads back exactly
      if (body.empty() || *end) throw bad();
      return v;
    }
    default: throw bad();
  }
}

// What must agree between the shards of one run: everything that changes what
// the cases compute or how their rows are joined.
nlohmann::json run_identity(const Study& s, const Options& opt, const Plan& plan) {
  nlohmann::json ids = nlohmann::json::array();
  for (const Case& c : plan.cases) ids.push_back(c.id);
  return {{"study", s.name}, {"seed", opt.seed}, {"quick", opt.quick}, {"tool_version", kToolVersion},
          {"config", plan.config}, {"cases", ids}};
}

}  // namespace

void write_shard(const Study& s, const Options& opt, const Plan& plan, std::uint64_t index, std::uint64_t count,
                 const std::string& source, const std::vector<Rows>& case_rows, const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec) && !fs::create_directories(dir, ec))
    throw InputError(fmt::format("--out {}: cannot create the directory ({})", dir_name, ec.message()));
  nlohmann::json doc{{"schema", "ttrcheck-study-shard"}, {"schema_version", 1},
                     {"shard", {{"index", index}, {"count", count}, {"source", source}}},
                     {"run", run_identity(s, opt, plan)}};
  doc["cases"] = nlohmann::json::array();
  for (std::size_t k = 0; k < plan.cases.size(); ++k) {
    if (k % count != index) continue;
    nlohmann::json tables = nlohmann::json::object();
    for (const auto& [name, rows] : case_rows[k]) {
      nlohmann::json rs = nlohmann::json::array();
      for (const Row& r : rows) {
        nlohmann::json cells = nlohmann::json::array();
        for (const Cell& c : r) cells.push_back(cell_text(c));
        rs.push_back(std::move(cells));
      }
      tables[name] = std::move(rs);
    }
    doc["cases"].push_back({{"index", k}, {"id", plan.cases[k].id}, {"tables", std::move(tables)}});
  }
  io::write_text_atomic(dir / kShardFile, dump_json(doc));
}

namespace {

Merged merge_checked(const std::vector<std::string>& dirs, const std::string& out) {
  struct Loaded {
    std::string dir;
    nlohmann::json doc;
  };
  std::vector<Loaded> shards;
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / kShardFile;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(io::read_text_file(p));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: not JSON ({})", p.string(), e.what()));
    }
    if (doc.value("schema", "") != "ttrcheck-study-shard" || doc.value("schema_version", 0) != 1)
      throw InputError(fmt::format("{}: not a ttrcheck-study-shard v1 file", p.string()));
    shards.push_back({d, std::move(doc)});
  }
  if (shards.empty()) throw InputError("merge: no study shards given");
  const nlohmann::json& first = shards.front().doc;
  const std::uint64_t count = first["shard"]["count"].get<std::uint64_t>();
  std::set<std::uint64_t> seen;
  if (count == 0) throw InputError(fmt::format("{}: shard count 0", shards.front().dir));
  for (const Loaded& l : shards) {
    if (l.doc["run"] != first["run"])
      throw InputError(fmt::format("{}: a shard of another run than {} (study, seed, variant, tool version, "
                                   "configuration or case list differ)",
                                   l.dir, shards.front().dir));
    const std::uint64_t c = l.doc["shard"]["count"].get<std::uint64_t>(), i = l.doc["shard"]["index"].get<std::uint64_t>();
    if (c != count)
      throw InputError(fmt::format("{}: shard {}/{}, but {} is one of {}", l.dir, i, c, shards.front().dir, count));
    if (i >= c) throw InputError(fmt::format("{}: shard index {} of {}", l.dir, i, c));
    if (!seen.insert(i).second) throw InputError(fmt::format("{}: shard {}/{} given twice", l.dir, i, c));
  }
  for (std::uint64_t i = 0; i < count; ++i)
    if (!seen.count(i)) throw InputError(fmt::format("merge: shard {}/{} is missing", i, count));

  const nlohmann::json& run = first["run"];
  const std::string study_name = run["study"].get<std::string>();  // named: GCC 13 -Wdangling-reference
  const Study& s = find_study(study_name);
  Options opt;
  opt.seed = run["seed"].get<std::uint64_t>();
  opt.quick = run["quick"].get<bool>();
  const Plan plan = s.plan(opt);
  if (run_identity(s, opt, plan) != run)
    throw InputError(fmt::format("{}: written by another ttrcheck or another definition of study {} (its "
                                 "configuration or cases differ from this build's)",
                                 shards.front().dir, s.name));
  std::vector<Rows> case_rows(plan.cases.size());
  std::vector<bool> have(plan.cases.size(), false);
  for (const Loaded& l : shards)
    for (const nlohmann::json& c : l.doc["cases"]) {
      const std::size_t k = c["index"].get<std::size_t>();
      const std::string where = fmt::format("{}: case {}", l.dir, k);
      if (k >= plan.cases.size() || c["id"] != plan.cases[k].id || k % count != l.doc["shard"]["index"])
        throw InputError(fmt::format("{}: not a case of this shard", where));
      if (have[k]) throw InputError(fmt::format("{}: given twice", where));
      have[k] = true;
      for (const auto& [name, rows] : c["tables"].items())
        for (const nlohmann::json& r : rows) {
          Row row;
          for (const nlohmann::json& cell : r) row.push_back(parse_cell(cell.get<std::string>(), where));
          case_rows[k][name].push_back(std::move(row));
        }
    }
  for (std::size_t k = 0; k < have.size(); ++k)
    if (!have[k]) throw InputError(fmt::format("merge: case {} ({}) is in no shard", k, plan.cases[k].id));
  Merged m;
  m.result = assemble(s, opt, plan, std::move(case_rows));
  m.shards = shards.size();
  write_result(m.result, out);
  return m;
}

}  // namespace

Merged merge_shards(const std::vector<std::string>& dirs, const std::string& out) {
  try {
    return merge_checked(dirs, out);
  } catch (const nlohmann::json::exception& e) {  // a field missing or of another type
    throw InputError(fmt::format("merge: a study-shard.json is malformed ({})", e.what()));
  }
}

}  // namespace ttr::study
