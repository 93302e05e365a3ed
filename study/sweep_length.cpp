// Sweep over the sequence length T (to 16k in the full study): does each layer's
// error grow with T, and does the error model grow with it?
#include "study/sweep.hpp"

namespace ttr::study {

Study sweep_length() {
  SweepDef d;
  d.name = "sweep-length";
  d.title = "Error against the sequence length T";
  d.axis = "T";
  d.axis_label = "sequence length T";
  d.claim = "A correct kernel's error grows with T only as the layer's state does (bounded for contractive and "
            "decaying states); the error model tracks it, so the ratio stays flat.";
  d.points = [](bool quick) {
    std::vector<SweepPoint> p;
    for (std::int64_t T : quick ? std::vector<std::int64_t>{32, 128, 512}
                                : std::vector<std::int64_t>{64, 256, 1024, 4096, 16384})
      // The gradients to 128 tokens in the quick study and 4096 in the full one:
      // GKA's MPFR backward oracle (Chebyshev, 30 iterations, reversed) costs
      // ~1 min at T = 512, K = 16 on one core.
      p.push_back({std::to_string(T), T, quick ? 16 : 32, quick ? 16 : 64, {Tier::bf16, Tier::fp32},
                   T <= (quick ? 128 : 4096)});
    return p;
  };
  return make_sweep(d);
}

}  // namespace ttr::study
