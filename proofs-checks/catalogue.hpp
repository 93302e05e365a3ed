// The proof-check catalogue: one executable entry per theorem, lemma,
// algorithm and key printed formula of the four papers (GKA, KLA-K, KLA-Z,
// PDN; docs/papers.md). Each entry records what the paper prints, how we
// check it and what we found; running it re-derives the finding, so the
// catalogue is a regression test of the mathematics (docs/proof-checks.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ttr::proofs {

enum class Paper { GKA, KLA_K, KLA_Z, PDN };

// What the catalogue claims about the printed statement.
//   holds                  the printed statement checks out.
//   fails_as_printed       the printed formula is wrong (far above working
//                          precision) and `correction` states one that holds.
//   holds_with_correction  true once a stated condition or reading is added
//                          (a missing hypothesis, an ambiguous index), and the
//                          printed text alone does not say so.
//   statistical_pass       a distributional claim, passed at a stated confidence.
//   not_checkable          nothing executable to check (a definition, an
//                          empirical claim about training); `method` says why.
enum class Status { holds, fails_as_printed, holds_with_correction, statistical_pass, not_checkable };

// How an entry is checked (free text in `method`, one of these in JSON).
// reverse_mode: against the adjoint of the exact computation, taped in MPFR
// (an independent differentiator, not the formula under test).
enum class Method { exact_identity, inequality_search, statistical, finite_differences, reverse_mode, none };

struct ProofOptions {
  std::uint64_t seed = 20261122;  // mixed with the entry id: entries are independent
  unsigned bits = 256;            // MPFR working precision of exact identities
  bool full = false;              // full effort: more random points / trials (slow label)
};

// What running an entry found. `discrepancy` is the largest violation over all
// points tried, in the unit `measure` names (a relative error, an absolute
// residual, a p-value, the amount an inequality is exceeded by, ...).
// `tolerance` is what the check accepts, derived from `bits` or the stated
// confidence. For fails_as_printed / holds_with_correction entries
// `printed_discrepancy` is the printed form's violation and `discrepancy`
// the corrected form's.
struct Evidence {
  bool reproduced = false;  // the recorded status was observed again
  double discrepancy = 0;
  double tolerance = 0;
  std::optional<double> printed_discrepancy;
  std::string measure;  // e.g. "max |rel. err.| vs finite differences"
  std::string witness;  // the input that shows it: seed, sizes, values
  std::string detail;   // anything else worth a line (counts, p-values, bounds)
};

struct Entry {
  std::string id;         // stable, e.g. "gka.lemma2.chebyshev_implicit_grad"
  Paper paper;
  std::string ref;        // exactly as printed: "Lemma 2", "eq. (5)", "Alg. 1", "Thm 3.1"
  std::string statement;  // one line
  Method method;
  std::string how;        // one line: points, precision, search, confidence
  Status status;          // the recorded finding
  std::string correction; // the corrected statement (fails_as_printed / holds_with_correction)
  bool slow = false;      // left out of the fast run (CI) when true
  std::function<Evidence(const ProofOptions&)> check;  // empty only for not_checkable
};

// An entry whose check is handed its own id (to seed entry_rng and name the
// witness): the one way entry files build entries.
Entry make_entry(Paper paper, std::string id, std::string ref, std::string statement, Method method,
                 std::string how, Status status, std::string correction,
                 std::function<Evidence(const ProofOptions&, const std::string&)> check);

// Each paper's entries (one translation unit, or a few, per paper).
std::vector<Entry> gka_entries();
std::vector<Entry> kla_k_entries();
std::vector<Entry> kla_z_entries();
std::vector<Entry> pdn_entries();

// All entries in catalogue order; ids are unique (checked).
const std::vector<Entry>& catalogue();

std::string to_string(Paper);
std::string to_string(Status);
std::string to_string(Method);

struct Result {
  const Entry* entry;
  Evidence evidence;
  double seconds = 0;
  std::string error;  // an exception thrown by the check (counts as not reproduced)
};

// Runs one entry; catches exceptions into Result::error.
Result run_entry(const Entry& e, const ProofOptions& opt);

// A regression: the recorded status was not observed again.
inline bool regressed(const Result& r) {
  return r.entry->status != Status::not_checkable && (!r.error.empty() || !r.evidence.reproduced);
}

}  // namespace ttr::proofs
