// Sweep over the kernel dtype: bf16, fp16 and fp32 policies (docs/arithmetic-policies.md).
#include "study/sweep.hpp"

namespace ttr::study {

Study sweep_dtype() {
  SweepDef d;
  d.name = "sweep-dtype";
  d.title = "Error against the dtype";
  d.axis = "dtype";
  d.axis_label = "kernel dtype";
  d.logx = false;
  d.claim = "A correct kernel's error scales with its dtype's unit roundoff (bf16 2^-8, fp16 2^-11, fp32 2^-24); "
            "the error ratio does not depend on the dtype.";
  d.points = [](bool quick) {
    std::vector<SweepPoint> p;
    for (Tier t : {Tier::bf16, Tier::fp16, Tier::fp32})
      p.push_back({tier_name(t), quick ? 64 : 1024, quick ? 16 : 32, quick ? 16 : 64, {t}, true});
    return p;
  };
  return make_sweep(d);
}

}  // namespace ttr::study
