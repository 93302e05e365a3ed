// Sweep over the chunk size C of the chunkwise (and chunked-scan) forms: the
// forward error only (the backward forms are sequential).
#include "study/sweep.hpp"

namespace ttr::study {

Study sweep_chunk() {
  SweepDef d;
  d.name = "sweep-chunk";
  d.title = "Error against the chunk size C";
  d.axis = "C";
  d.axis_label = "chunk size C";
  d.claim = "Larger chunks mean longer in-chunk products and larger decay ranges inside a chunk; a correct chunkwise "
            "kernel's error changes with C only as its arithmetic does, which the error model follows.";
  d.points = [](bool quick) {
    std::vector<SweepPoint> p;
    for (int C : quick ? std::vector<int>{16, 32, 128} : std::vector<int>{16, 32, 64, 128, 256})
      p.push_back({std::to_string(C), quick ? 128 : 1024, quick ? 16 : 32, C, {Tier::bf16, Tier::fp32}, false});
    return p;
  };
  d.applies = [](const LayerEntry& e) { return kernel_form(e) != Form::sequential; };
  return make_sweep(d);
}

}  // namespace ttr::study
