#include "study/study.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "oracles/error.hpp"
#include "oracles/slices.hpp"

namespace ttr::study {

#define TTR_STUDY(fn) Study fn();
#include "study/studies.def"
#undef TTR_STUDY

const std::vector<Study>& studies() {
  static const std::vector<Study> all = {
#define TTR_STUDY(fn) fn(),
#include "study/studies.def"
#undef TTR_STUDY
  };
  return all;
}

const Study& find_study(const std::string& name) {
  std::string known;
  for (const Study& s : studies()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw InputError(fmt::format("unknown study '{}' (known: {})", name, known));
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::agrees: return "agrees";
    case Verdict::disagrees: return "disagrees";
    case Verdict::observed: return "observed";
  }
  return "?";
}

int Table::column(const std::string& name) const {
  for (std::size_t i = 0; i < spec.columns.size(); ++i)
    if (spec.columns[i] == name) return static_cast<int>(i);
  throw std::out_of_range(fmt::format("table {} has no column '{}'", spec.name, name));
}

double Table::num(const Row& r, const std::string& c) const {
  const Cell& x = r.at(column(c));
  if (const double* d = std::get_if<double>(&x)) return *d;
  if (const std::int64_t* i = std::get_if<std::int64_t>(&x)) return static_cast<double>(*i);
  throw std::logic_error(fmt::format("table {} column {} holds text", spec.name, c));
}

std::string Table::text(const Row& r, const std::string& c) const {
  const Cell& x = r.at(column(c));
  if (const std::string* s = std::get_if<std::string>(&x)) return *s;
  if (const std::int64_t* i = std::get_if<std::int64_t>(&x)) return std::to_string(*i);
  return format_number(std::get<double>(x));
}

std::uint64_t case_seed(std::uint64_t seed, const std::string& case_id) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : case_id) h = (h ^ c) * 0x100000001b3ull;
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (h | 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<Rows> run_cases(const Plan& plan, const Options& opt, const std::function<bool(std::size_t)>& owns) {
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < plan.cases.size(); ++i)
    if (!owns || owns(i)) mine.push_back(i);
  // Cases on threads, results kept per case and joined in plan order.
  std::vector<Rows> out(plan.cases.size());
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  std::mutex mu;
  std::exception_ptr failure;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = std::min<std::size_t>(opt.threads > 0 ? static_cast<unsigned>(opt.threads) : hw,
                                           std::max<std::size_t>(1, mine.size()));
  auto worker = [&] {
    // The cases already fill the cores: their oracles and models run on the
    // worker's thread alone (oracles/slices.hpp), not a nested team per case.
    const SliceThreadsScope inner(n > 1 ? 1 : 0);
    for (std::size_t j; (j = next++) < mine.size();) {
      const std::size_t i = mine[j];
      try {
        out[i] = plan.cases[i].run(case_seed(opt.seed, plan.cases[i].id));
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        next = mine.size();
        return;
      }
      const std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (opt.progress) opt.progress(done, mine.size(), plan.cases[i].id);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

Result assemble(const Study& s, const Options& opt, const Plan& plan, std::vector<Rows> case_rows) {
  Result r;
  r.study = &s;
  r.options = opt;
  r.config = plan.config;
  r.figures = plan.figures;
  r.cases = plan.cases.size();
  for (const TableSpec& t : plan.tables) r.tables[t.name].spec = t;
  for (std::size_t i = 0; i < case_rows.size(); ++i)
    for (auto& [name, rows] : case_rows[i]) {
      auto it = r.tables.find(name);
      if (it == r.tables.end())
        throw std::logic_error(fmt::format("study {}: case {} wrote undeclared table {}", s.name, plan.cases[i].id, name));
      for (Row& row : rows) {
        if (row.size() != it->second.spec.columns.size())
          throw std::logic_error(fmt::format("study {}: table {} row of {} cells, {} columns", s.name, name, row.size(),
                                             it->second.spec.columns.size()));
        it->second.rows.push_back(std::move(row));
      }
    }
  r.claims = plan.assess ? plan.assess(r.tables) : std::vector<Claim>{};
  for (const Claim& c : r.claims)
    if (c.theorem && c.verdict == Verdict::disagrees) r.pass = false;
  r.conclusion = plan.conclusion ? plan.conclusion(r.tables, r.claims) : std::string{};
  return r;
}

Result run_study(const Study& s, const Options& opt) {
  const Plan plan = s.plan(opt);
  return assemble(s, opt, plan, run_cases(plan, opt));
}

}  // namespace ttr::study
