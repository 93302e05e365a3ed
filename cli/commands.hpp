// The ttrcheck subcommands. Each registers its options on the CLI11 app and
// returns the exit code: 0 success, 1 a verdict failed (check/gate), 2 bad usage
// or bad input (an InputError, printed as one line by main.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ttr::cli {

using Command = std::function<int()>;

Command add_layers(CLI::App& app);
Command add_oracle(CLI::App& app);
Command add_run(CLI::App& app);
Command add_vectors(CLI::App& app);
Command add_demo(CLI::App& app);
Command add_mutants(CLI::App& app);
Command add_check(CLI::App& app);
Command add_baseline(CLI::App& app);
Command add_gate(CLI::App& app);
Command add_proofs(CLI::App& app);
Command add_fuzz(CLI::App& app);
Command add_merge(CLI::App& app);
Command add_study(CLI::App& app);
Command add_report(CLI::App& app);

}  // namespace ttr::cli
