#include "proofs-checks/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/oracle.hpp"

namespace ttr::proofs {
namespace {

bool matches(const std::string& id, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '.') return id.compare(0, pattern.size(), pattern) == 0;
  return id == pattern;
}

nlohmann::json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

std::string verdict(const Result& r) {
  if (r.entry->status == Status::not_checkable) return "n/a";
  return regressed(r) ? "REGRESSED" : "ok";
}

std::string evidence_text(const Result& r) {
  if (!r.error.empty()) return "error: " + r.error;
  if (r.entry->status == Status::not_checkable) return r.entry->how;
  const Evidence& e = r.evidence;
  std::string s = fmt::format("{:.2e} (tol {:.1e})", e.discrepancy, e.tolerance);
  if (e.printed_discrepancy) s += fmt::format(", as printed {:.2e}", *e.printed_discrepancy);
  return s;
}

}  // namespace

std::vector<const Entry*> select(const std::vector<std::string>& only, bool skip_slow) {
  std::vector<const Entry*> out;
  for (const std::string& pattern : only) {
    const bool any = std::any_of(catalogue().begin(), catalogue().end(),
                                 [&](const Entry& e) { return matches(e.id, pattern); });
    if (!any) throw InputError("--only '" + pattern + "' matches no catalogue entry (see `ttrcheck proofs --list`)");
  }
  for (const Entry& e : catalogue()) {
    if (skip_slow && e.slow) continue;
    if (only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& p) { return matches(e.id, p); }))
      out.push_back(&e);
  }
  return out;
}

nlohmann::json result_json(const Result& r) {
  const Entry& e = *r.entry;
  nlohmann::json j{{"id", e.id},          {"paper", to_string(e.paper)},   {"ref", e.ref},
                   {"statement", e.statement}, {"method", to_string(e.method)}, {"how", e.how},
                   {"status", to_string(e.status)}, {"slow", e.slow},     {"regressed", regressed(r)},
                   {"seconds", r.seconds}};
  if (!e.correction.empty()) j["correction"] = e.correction;
  if (!r.error.empty()) j["error"] = r.error;
  if (e.status != Status::not_checkable && r.error.empty()) {
    const Evidence& ev = r.evidence;
    nlohmann::json x{{"reproduced", ev.reproduced}, {"discrepancy", number(ev.discrepancy)},
                     {"tolerance", number(ev.tolerance)}, {"measure", ev.measure},
                     {"witness", ev.witness}};
    if (ev.printed_discrepancy) x["printed_discrepancy"] = number(*ev.printed_discrepancy);
    if (!ev.detail.empty()) x["detail"] = ev.detail;
    j["evidence"] = std::move(x);
  }
  return j;
}

nlohmann::json report_json(const std::vector<Result>& results, const ProofOptions& opt) {
  nlohmann::json entries = nlohmann::json::array();
  std::map<std::string, int> by_status;
  int n_regressed = 0;
  for (const Result& r : results) {
    entries.push_back(result_json(r));
    ++by_status[to_string(r.entry->status)];
    n_regressed += regressed(r) ? 1 : 0;
  }
  return {{"tool", "ttrcheck"},
          {"version", kToolVersion},
          {"kind", "proofs"},
          {"options", {{"seed", opt.seed}, {"bits", opt.bits}, {"full", opt.full}}},
          {"summary", {{"entries", results.size()}, {"regressed", n_regressed}, {"by_status", by_status}}},
          {"entries", std::move(entries)}};
}

std::string format_table(const std::vector<Result>& results) {
  std::size_t wid = 2, wref = 3, wst = 6;
  for (const Result& r : results) {
    wid = std::max(wid, r.entry->id.size());
    wref = std::max(wref, to_string(r.entry->paper).size() + 1 + r.entry->ref.size());
    wst = std::max(wst, to_string(r.entry->status).size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<9}  {}\n", "id", wid, "ref", wref, "status", wst,
                                "verdict", "evidence");
  for (const Result& r : results) {
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<9}  {}\n", r.entry->id, wid,
                       to_string(r.entry->paper) + " " + r.entry->ref, wref, to_string(r.entry->status), wst,
                       verdict(r), evidence_text(r));
    if (regressed(r) && r.error.empty() && !r.evidence.witness.empty())
      out += fmt::format("{:<{}}  witness: {}\n", "", wid, r.evidence.witness);
  }
  return out;
}

std::string format_list(const std::vector<const Entry*>& entries) {
  std::string out;
  for (const Entry* e : entries) {
    out += fmt::format("{}  [{} {}]  {}{}\n  {}\n", e->id, to_string(e->paper), e->ref, to_string(e->status),
                       e->slow ? " (slow)" : "", e->statement);
    if (!e->correction.empty()) out += fmt::format("  correction: {}\n", e->correction);
  }
  return out;
}

}  // namespace ttr::proofs
