#include "proofs-checks/catalogue.hpp"

#include <chrono>
#include <exception>
#include <set>
#include <stdexcept>

namespace ttr::proofs {

Entry make_entry(Paper paper, std::string id, std::string ref, std::string statement, Method method,
                 std::string how, Status status, std::string correction,
                 std::function<Evidence(const ProofOptions&, const std::string&)> check) {
  Entry e;
  e.id = std::move(id);
  e.paper = paper;
  e.ref = std::move(ref);
  e.statement = std::move(statement);
  e.method = method;
  e.how = std::move(how);
  e.status = status;
  e.correction = std::move(correction);
  e.check = [check = std::move(check), id = e.id](const ProofOptions& opt) { return check(opt, id); };
  return e;
}

const std::vector<Entry>& catalogue() {
  static const std::vector<Entry> all = [] {
    std::vector<Entry> v;
    for (auto part : {gka_entries(), kla_k_entries(), kla_z_entries(), pdn_entries()})
      for (auto& e : part) v.push_back(std::move(e));
    std::set<std::string> ids;
    for (const Entry& e : v) {
      if (!ids.insert(e.id).second) throw std::logic_error("proof-check catalogue: duplicate id " + e.id);
      if (e.status != Status::not_checkable && !e.check)
        throw std::logic_error("proof-check catalogue: entry " + e.id + " has no check");
      const bool needs_correction = e.status == Status::fails_as_printed || e.status == Status::holds_with_correction;
      if (needs_correction && e.correction.empty())
        throw std::logic_error("proof-check catalogue: entry " + e.id + " has no corrected statement");
    }
    return v;
  }();
  return all;
}

std::string to_string(Paper p) {
  switch (p) {
    case Paper::GKA: return "GKA";
    case Paper::KLA_K: return "KLA-K";
    case Paper::KLA_Z: return "KLA-Z";
    case Paper::PDN: return "PDN";
  }
  return "?";
}

std::string to_string(Status s) {
  switch (s) {
    case Status::holds: return "holds";
    case Status::fails_as_printed: return "fails_as_printed";
    case Status::holds_with_correction: return "holds_with_correction";
    case Status::statistical_pass: return "statistical_pass";
    case Status::not_checkable: return "not_checkable";
  }
  return "?";
}

std::string to_string(Method m) {
  switch (m) {
    case Method::exact_identity: return "exact_identity";
    case Method::inequality_search: return "inequality_search";
    case Method::statistical: return "statistical";
    case Method::finite_differences: return "finite_differences";
    case Method::reverse_mode: return "reverse_mode";
    case Method::none: return "none";
  }
  return "?";
}

Result run_entry(const Entry& e, const ProofOptions& opt) {
  Result r{&e, {}, 0, {}};
  if (!e.check) {
    r.evidence.reproduced = true;
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.evidence = e.check(opt);
  } catch (const std::exception& ex) {
    r.error = ex.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ttr::proofs
