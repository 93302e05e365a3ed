// The type-erased entry points of the registry: a CPU reference form in one tier
// (double-valued tensors in, out) and a device kernel (the same, run on the
// device in a dtype). Light: no scalar tier headers, no layer list (the
// generated runner TUs include this and must not depend on layers.def).
#pragma once

#include "oracles/arith.hpp"
#include "oracles/config.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

// Options of a CPU reference form (one meaning: how to run the form).
struct FormOptions {
  unsigned bits = 256;   // MPFR/MPFI requested precision
  int chunk_size = 64;   // chunk forms
};

struct LayerResult {
  TensorMap<double> values;        // rounded to nearest (interval tiers: midpoint)
  TensorMap<double> lower, upper;  // interval tiers: outward-rounded enclosure
  // The oracle tiers (oracles/oracle_tier.hpp): per value, the estimated size of
  // its own error (0 where MPFR computed it); empty from a plain runner.
  TensorMap<double> own_error;
  unsigned working_bits = 0;       // significand bits actually used
};

using LayerRunner = LayerResult (*)(const TensorMap<double>&, const Config&, const FormOptions&);

// Options of a device kernel launch (one meaning: how to launch it).
struct KernelOptions {
  bool poison = true;  // fill outputs with NaN bytes before the launch (unwritten elements show)
  // The delta family's chunk backward only: run the chunk forward first, keeping its UT
  // inverses, and let the backward read them (as a training step does; gpu/api.hpp,
  // DeltaBackwardArgs::ut_inverse) instead of inverting again. Same gradients, same bits.
  bool keep_ut_inverse = false;
};

// A device kernel on a layer's inputs: converts them as a model would pass them
// (activations in `dtype`, gates and states fp32), runs, reads the outputs back
// as double. InputError for shapes or configs the kernel does not take.
using KernelRunner = TensorMap<double> (*)(const TensorMap<double>&, const Config&, Tier dtype, const KernelOptions&);

}  // namespace ttr
