// ttrcheck: numerics verification for test-time-regression linear attention.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <exception>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "oracles/error.hpp"
#include "oracles/oracle.hpp"
#include "reference/core/mca_products.hpp"

namespace {

// An error is one line on stderr even when it quotes user text (a tensor name, a
// --set key) holding control characters: those are printed as \xNN.
std::string one_line(const char* what) {
  std::string s;
  for (const char* p = what; *p; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c < 0x20u || c == 0x7Fu) s += fmt::format("\\x{:02x}", c);
    else s += *p;
  }
  return s;
}

// TTR_MCA_PRODUCTS=in_order|scalar|vector: the kernel of the error model's matrix
// products (reference/core/mca_products.hpp). The same results whichever runs; for
// timing one against another in the same build (bench/production-check).
void apply_mca_products_environment() {
  const char* e = std::getenv("TTR_MCA_PRODUCTS");
  if (!e || !*e) return;
  const auto p = ttr::parse_mca_products(e);
  if (!p) throw ttr::InputError(fmt::format("environment TTR_MCA_PRODUCTS='{}' is not in_order, scalar or vector", e));
  ttr::set_default_mca_products(*p);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ttrcheck: high-precision oracles and error-model checks for linear-attention kernels"};
  app.set_version_flag("--version", std::string("ttrcheck ") + ttr::kToolVersion);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, ttr::cli::Command>> commands;
  auto reg = [&](ttr::cli::Command (*add)(CLI::App&)) {
    const std::size_t before = app.get_subcommands({}).size();
    ttr::cli::Command c = add(app);
    commands.emplace_back(app.get_subcommands({}).at(before), std::move(c));
  };
  reg(ttr::cli::add_layers);
  reg(ttr::cli::add_oracle);
  reg(ttr::cli::add_run);
  reg(ttr::cli::add_vectors);
  reg(ttr::cli::add_demo);
  reg(ttr::cli::add_mutants);
  reg(ttr::cli::add_check);
  reg(ttr::cli::add_baseline);
  reg(ttr::cli::add_gate);
  reg(ttr::cli::add_proofs);
  reg(ttr::cli::add_fuzz);
  reg(ttr::cli::add_merge);
  reg(ttr::cli::add_study);
  reg(ttr::cli::add_report);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ttrcheck: error: %s\n", one_line(e.what()).c_str());
    return 2;
  }
  try {
    apply_mca_products_environment();
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const ttr::InputError& e) {
    std::fprintf(stderr, "ttrcheck: error: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ttrcheck: internal error: %s\n", one_line(e.what()).c_str());
    return 3;
  }
  return 2;
}
