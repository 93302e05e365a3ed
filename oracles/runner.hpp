// The type-erased entry point of a (layer, form, tier): double-valued tensors
// in, double-valued tensors out. Light: no scalar tier headers, no layer list
// (the generated runner TUs include this and must not depend on layers.def).
#pragma once

#include "oracles/arith.hpp"
#include "oracles/config.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

struct RunOptions {
  unsigned bits = 256;   // MPFR/MPFI requested precision
  int chunk_size = 64;   // chunk forms
};

struct LayerResult {
  TensorMap<double> values;        // rounded to nearest (interval tiers: midpoint)
  TensorMap<double> lower, upper;  // interval tiers: outward-rounded enclosure
  unsigned working_bits = 0;       // significand bits actually used
};

using LayerRunner = LayerResult (*)(const TensorMap<double>&, const Config&, const RunOptions&);


}  // namespace ttr
