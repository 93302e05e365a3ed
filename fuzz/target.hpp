// The kernel under test, as the fuzzer sees it: a function from a layer's inputs
// to its outputs, plus what the error model must assume about it (the dtype it
// stores in, the algorithm whose rounding it makes, its chunk size). The CPU
// backend runs the reference chunk/scan/sequential forms under an arithmetic
// policy (optionally with a catalogued mutant); the CUDA backend launches the
// kernels the registry declares (TTR_KERNEL lines of layers.def) and copies the
// outputs back as doubles. Any other kernel implements the same interface.
#pragma once

#include <memory>
#include <string>

#include "gate/error_model.hpp"
#include "oracles/arith.hpp"
#include "oracles/registry.hpp"
#include "reference/core/mutant.hpp"

namespace ttr::fuzz {

// "cpu:bf16", "cpu:fp32", "cuda:bf16", "cuda:fp32".
struct TargetSpec {
  Backend backend = Backend::cpu;
  Tier dtype = Tier::bf16;
  std::string text() const;
};
// InputError naming the text for anything else.
TargetSpec parse_target(const std::string& text);

class Target {
 public:
  virtual ~Target() = default;
  virtual TargetSpec spec() const = 0;
  virtual Form form() const = 0;      // the algorithm it runs
  // What it computes: outputs, or (backward) the gradients from inputs plus cotangents.
  virtual Direction direction() const { return Direction::forward; }
  virtual int chunk_size() const = 0;
  // The error model of its rounding (form(s), dtype, chunk size); the campaign
  // sets samples and seed.
  virtual ModelSpec model() const = 0;
  // Outputs as doubles (each exactly the value the kernel stored). Must be a
  // deterministic function of (layer, inputs, cfg).
  virtual TensorMap<double> run(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg) const = 0;
  // The command line that recomputes run() on a stored inputs file (for the
  // reproducer's note); empty when no ttrcheck command can (an external kernel).
  virtual std::string replay_command(const std::string& layer, const std::string& inputs_file,
                                     const std::string& outputs_file) const = 0;
};

// The target for `spec` running `form` with chunk size `chunk` in `direction`,
// under `mutant` (Mutant::none for a real kernel; on a device, one of the
// catalogue's `cuda` mutants). InputError when this build or machine has no such
// backend ("no CUDA device"), the layer lacks the form or kernel in that
// direction, the mutant does not reach it, or the kernel does not take the chunk size.
std::unique_ptr<Target> make_target(const TargetSpec& spec, const LayerEntry& layer, Form form, int chunk,
                                    Mutant mutant, Direction direction = Direction::forward);

}  // namespace ttr::fuzz
