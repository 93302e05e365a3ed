// How the sequential adjoints space their state checkpoints (the delta core's,
// delta_backward.hpp and delta_backward_scaled.hpp; the gated linear core's,
// gated_linear_backward.hpp; the Sherman–Morrison recursion's,
// sherman_morrison_backward.hpp): a checkpoint every C tokens and one segment of C
// states at a time, (⌈T/C⌉ + C)·(state) values instead of T·(state), least at C = ⌈√T⌉.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ttr {

// The checkpoint spacing for a sequence of `len` tokens (every = 0: ⌈√len⌉).
inline std::int64_t checkpoint_spacing(std::int64_t len, std::int64_t every) {
  if (every > 0) return std::min(every, std::max<std::int64_t>(len, 1));
  std::int64_t c = 1;
  while (c * c < len) ++c;
  return c;
}

}  // namespace ttr
