// The layer sweeps (docs/studies.md, "Sweeps"): every layer's forward error — its
// kernel form (chunk, else scan, else sequential) under each dtype's arithmetic
// policy — and, where the layer has a backward form, its gradients' error (the
// sequential backward in the dtype), against the MPFR oracle, along one axis: T,
// chunk size, dtype, key conditioning or decay strength. Each point records the
// relative error of the worst tensor and the gate's error ratio (error / the
// error model's prediction for a correct kernel, threshold 8), so one figure shows
// how the error grows and a second whether the error model follows it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "oracles/registry.hpp"
#include "study/common.hpp"

namespace ttr::study {

struct SweepPoint {
  std::string label;  // the x value as written (a number, or a dtype name)
  std::int64_t T = 128, K = 16;
  int chunk = 16;
  std::vector<Tier> dtypes = {Tier::bf16, Tier::fp32};
  bool backward = true;  // also the gradients (layers with a backward form)
};

struct SweepDef {
  std::string name, title, axis, axis_label, claim;
  bool logx = true;
  std::function<std::vector<SweepPoint>(bool quick)> points;
  // Which layers the axis applies to (default: all).
  std::function<bool(const LayerEntry&)> applies = [](const LayerEntry&) { return true; };
  // Changes the drawn inputs for a point (keys, gates); may add columns' worth of
  // facts through `measured` (e.g. the keys' measured condition number).
  std::function<void(const LayerEntry&, const SweepPoint&, TensorMap<double>&, std::uint64_t, double& measured)>
      transform = {};
  std::string measured_name = {};  // the column `measured` fills ("" : none)
};

Study make_sweep(const SweepDef& def);

}  // namespace ttr::study
