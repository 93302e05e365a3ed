// `ttrcheck demo [DIR]`: oracles for a directory of input vectors (the bundled
// set in examples/demo by default) and how far each CPU arithmetic lands from
// them: a preview of the gate, until `ttrcheck gate` exists.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "oracles/oracle.hpp"

namespace ttr::cli {
namespace fs = std::filesystem;

namespace {

// max_i |x_i − r_i| / max_i |r_i| over every output tensor (normwise, ∞-norm);
// NaN when x is not finite where the oracle is.
double relative_error(const TensorMap<double>& x, const TensorMap<double>& ref) {
  double err = 0, scale = 0;
  for (const auto& [name, r] : ref) {
    const auto& c = x.at(name);
    for (std::size_t i = 0; i < r.data.size(); ++i) {
      // A non-finite value where the oracle is finite must show, not vanish in max().
      if (!std::isfinite(c.data[i]) && std::isfinite(r.data[i])) return std::numeric_limits<double>::quiet_NaN();
      err = std::max(err, std::fabs(c.data[i] - r.data[i]));
      scale = std::max(scale, std::fabs(r.data[i]));
    }
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace

Command add_demo(CLI::App& app) {
  auto dir = std::make_shared<std::string>("examples/demo");
  auto bits = std::make_shared<unsigned>(256);
  auto* cmd = app.add_subcommand("demo", "oracles for a directory of *.inputs.safetensors and the error of each CPU tier");
  cmd->add_option("dir", *dir, "directory of input vectors (default examples/demo)");
  cmd->add_option("--bits", *bits, "oracle MPFR precision")->check(CLI::Range(24u, 100000u));
  return [dir, bits]() {
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::directory_iterator it(*dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().string().ends_with(".inputs.safetensors")) files.push_back(it->path());
    if (ec) throw InputError(fmt::format("{}: cannot list directory: {}", *dir, ec.message()));
    if (files.empty()) throw InputError(fmt::format("{}: no *.inputs.safetensors files", *dir));
    std::sort(files.begin(), files.end());
    fmt::print("oracle: sequential form in MPFR ({} bits); error = max|x − oracle| / max|oracle| over all outputs\n\n",
               *bits);
    fmt::print("{:<26} {:<18} {:<28} {:>10} {:>10} {:>10} {:>10}\n", "layer", "case", "shape", "oracle ms", "fp64",
               "fp32", "bf16");
    const auto t_all = std::chrono::steady_clock::now();
    for (const auto& f : files) {
      const io::TensorFile head = io::read_safetensors(f);
      const auto lay = head.metadata.find("layer");
      if (lay == head.metadata.end())
        throw InputError(fmt::format("{}: no 'layer' in __metadata__ (write it with `ttrcheck vectors`)", f.string()));
      const LoadedInputs in = load_inputs(lay->second, f.string(), {});
      const auto t0 = std::chrono::steady_clock::now();
      const LayerResult ref = run_layer(*in.layer, Form::sequential, {Tier::mpfr, *bits}, in.inputs.tensors, in.config);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::vector<double> errs;
      for (Tier t : {Tier::fp64, Tier::fp32, Tier::bf16})
        errs.push_back(relative_error(run_layer(*in.layer, Form::sequential, {t, 0}, in.inputs.tensors, in.config).values,
                                      ref.values));
      std::string shape;
      for (const auto& [sym, n] : in.inputs.dims) shape += fmt::format("{}{}={}", shape.empty() ? "" : " ", sym, n);
      const auto cs = head.metadata.count("case") ? head.metadata.at("case") : f.stem().string();
      fmt::print("{:<26} {:<18} {:<28} {:>10.1f} {:>10.2e} {:>10.2e} {:>10.2e}\n", lay->second, cs, shape, ms,
                 errs[0], errs[1], errs[2]);
    }
    fmt::print("\n{} vector files in {:.1f} s\n", files.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count());
    return 0;
  };
}

}  // namespace ttr::cli
