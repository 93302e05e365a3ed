// ttrcheck: numerics verification for test-time-regression linear attention.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <exception>
#include <fmt/format.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// The allocator settings of a long multi-threaded run. Each (sequence, head) slice
// of the oracle and the error model allocates and frees work tensors of a few MB
// per chunk and sample; glibc serves those by mmap and gives them back by munmap
// (its threshold adapts only up to the largest size freed so far, and the heap's
// top is trimmed past twice that), so every slice page-faults its buffers in
// again, and with 16 threads the faults and unmaps contend in the kernel. Keeping
// freed memory in the arenas instead (threshold at glibc's 32 MiB ceiling, trim
// only past 1 GiB, 256 MiB of padding per heap extension) costs a little resident
// memory (T = 1024 check, 2 threads: 490 MB against 426 MB); measured in
// docs/varlen.md, "Thread scaling". TTR_MALLOC=glibc keeps glibc's defaults (to
// measure one against the other); a user's own settings of these three (MALLOC_*_
// variables, glibc.malloc tunables) are left to rule. Transparent huge pages for
// the large blocks (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) can only be asked for
// before the process starts; they combine with these settings.
void tune_allocator() {
  const char* e = std::getenv("TTR_MALLOC");
  const std::string mode = e ? e : "";
  if (!mode.empty() && mode != "glibc" && mode != "tuned")
    throw ttr::InputError(fmt::format("environment TTR_MALLOC='{}' is not glibc or tuned", mode));
  if (mode == "glibc") return;
#if defined(__GLIBC__)
  for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(v)) return;
  if (const char* t = std::getenv("GLIBC_TUNABLES"))
    for (const char* k : {"glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold", "glibc.malloc.top_pad"})
      if (std::strstr(t, k)) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
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
    tune_allocator();
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
