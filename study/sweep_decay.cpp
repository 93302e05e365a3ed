// Sweep over the decay strength δ: every gate of the state set to exp(−δ) per
// token (g = −δ for the gated layers; KLA-K's transition ā = exp(−δ)); layers
// without a decay are left out. δ = 0 is no forgetting (states grow like T).
#include <cmath>

#include "reference/core/float16.hpp"
#include "study/sweep.hpp"

namespace ttr::study {

Study sweep_decay() {
  SweepDef d;
  d.name = "sweep-decay";
  d.title = "Error against the decay strength";
  d.axis = "delta";
  d.axis_label = "decay strength delta (gate exp(-delta) per token)";
  d.claim = "Weak decay lets the state grow (and GKA's H_t grow in norm), strong decay underflows in-chunk "
            "cumulative gates; a correct kernel's error follows, and the error model with it.";
  d.logx = false;
  d.points = [](bool quick) {
    std::vector<SweepPoint> p;
    for (const char* x : quick ? std::vector<const char*>{"0", "0.01", "1", "10"}
                               : std::vector<const char*>{"0", "0.001", "0.01", "0.1", "1", "3", "10"})
      p.push_back({x, quick ? 64 : 1024, quick ? 16 : 32, quick ? 16 : 64, {Tier::bf16, Tier::fp32}, true});
    return p;
  };
  d.applies = [](const LayerEntry& e) { return e.spec.input("g") || e.spec.input("a_bar"); };
  d.transform = [](const LayerEntry& e, const SweepPoint& pt, TensorMap<double>& in, std::uint64_t, double&) {
    const double delta = std::stod(pt.label);
    if (e.spec.input("g"))
      for (double& x : in.at("g").data) x = BF16Format::round(-delta);  // inputs on the bf16 grid, as every study's
    if (e.spec.input("a_bar"))
      for (double& x : in.at("a_bar").data) x = BF16Format::round(std::exp(-delta));
  };
  return make_sweep(d);
}

}  // namespace ttr::study
