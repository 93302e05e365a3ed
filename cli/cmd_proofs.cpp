// `ttrcheck proofs [--list] [--only ID]... [--json FILE] [--full] [--skip-slow]`:
// runs the proof-check catalogue (proofs-checks/) and prints one row per entry.
// Exit 1 when an entry's recorded finding is not reproduced (a "holds" that
// stopped holding, a printed-formula failure whose correction no longer holds):
// the catalogue is a regression test of the mathematics. Exit 2 on bad usage.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/io/text_file.hpp"
#include "proofs-checks/report.hpp"

namespace ttr::cli {

Command add_proofs(CLI::App& app) {
  auto* cmd = app.add_subcommand("proofs", "run the proof-check catalogue: every theorem, lemma, algorithm and key "
                                           "printed formula of the papers, checked (docs/proof-checks.md)");
  struct Options {
    bool list = false, full = false, skip_slow = false;
    std::vector<std::string> only;
    std::string json;
    proofs::ProofOptions run;
  };
  auto o = std::make_shared<Options>();
  cmd->add_flag("--list", o->list, "list the entries (id, paper, ref, recorded status, statement) and exit");
  cmd->add_option("--only", o->only, "run only this entry id, or ids under a prefix ending in '.' (e.g. gka.)")
      ->type_name("ID");
  cmd->add_option("--json", o->json, "also write the results as JSON (docs/schemas/proofs.schema.json)")
      ->type_name("FILE");
  cmd->add_flag("--full", o->full, "full effort: more random points and trials (minutes)");
  cmd->add_flag("--skip-slow", o->skip_slow, "leave out the entries marked slow (the CI subset)");
  cmd->add_option("--seed", o->run.seed, "base seed (each entry mixes in its id)")
      ->capture_default_str()
      ->check(seed_validator());
  cmd->add_option("--bits", o->run.bits, "MPFR working precision of exact identities, at least 128")
      ->capture_default_str()
      ->check(CLI::Range(128u, 4096u));
  return [o]() {
    const auto entries = proofs::select(o->only, o->skip_slow);
    if (o->list) {
      fmt::print("{}", proofs::format_list(entries));
      return 0;
    }
    check_outputs({}, {{"--json", o->json}});
    o->run.full = o->full;
    std::vector<proofs::Result> results;
    for (const proofs::Entry* e : entries) results.push_back(proofs::run_entry(*e, o->run));
    fmt::print("{}", proofs::format_table(results));
    int regressed = 0;
    for (const auto& r : results) regressed += proofs::regressed(r) ? 1 : 0;
    fmt::print("{} entries, {} regressed\n", results.size(), regressed);
    if (!o->json.empty()) io::write_text_atomic(o->json, proofs::report_json(results, o->run).dump(2) + "\n");
    return regressed == 0 ? 0 : 1;
  };
}

}  // namespace ttr::cli
