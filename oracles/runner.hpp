// The type-erased entry points of every (layer, form, tier): double-valued
// tensors in, double-valued tensors out. Light: no scalar tier headers.
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

namespace runners {
// One per (layer, form) x tier of tiers.def (registry.cpp checks the count).
#define TTR_LAYER(layer)
#define TTR_LAYER_FORM(layer, form)                                                                  \
  LayerResult layer##__##form##__fp32(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__fp64(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__bf16(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__fp16(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__mpfr(const TensorMap<double>&, const Config&, const RunOptions&);  \
  LayerResult layer##__##form##__mpfi(const TensorMap<double>&, const Config&, const RunOptions&);
#include "oracles/layers/layers.def"
#undef TTR_LAYER_FORM
#undef TTR_LAYER
}  // namespace runners

}  // namespace ttr
