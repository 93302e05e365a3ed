// Injected errors of a known size, for measuring how small an error each
// criterion detects (docs/gate-teeth.md, "Smallest detected error"). Unlike a
// mutant (a realistic bug inside a kernel, gate/mutants.hpp), an injection
// perturbs a correct kernel's finished outputs (forward) or gradients (backward)
// by a relative amount ε in one of a few bug-like shapes, so one gate run can
// judge the same kernel outputs at a whole ladder of ε.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oracles/spec.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

enum class InjectShape {
  scale,            // every element x(1 + ε): a wrong constant factor (a scale or β bug)
  noise,            // every element x(1 ± ε), signs pseudo-random: lost precision
  chunk_first_row,  // the first token of every chunk x(1 + ε): a localized bug (per-token tensors only)
  one_head,         // head 0 of every batch entry x(1 + ε): a bug in one head's offsets
};

const std::vector<std::string>& inject_shape_names();  // in enum order
InjectShape parse_inject_shape(std::string_view name);  // InputError for unknown names
std::string_view inject_shape_name(InjectShape s);

// The default ladder: 0 (the clean kernel, for false alarms), then 1e-7 … 1 in
// quarter decades.
std::vector<double> default_inject_magnitudes();

// Perturbs every tensor of `outputs` present in `values` (a direction's outputs:
// o, ht, … or dq, dk, …). Per-token tensors have dims [B, T, H, …]; the others
// ([B, H, …] states) are left alone by chunk_first_row. `seed` draws noise's signs
// (a hash of seed, tensor and element index: the same whatever the thread).
void inject_error(TensorMap<double>& values, const std::vector<TensorSpec>& outputs, InjectShape shape, double eps,
                  std::int64_t chunk_size, std::uint64_t seed);

}  // namespace ttr
