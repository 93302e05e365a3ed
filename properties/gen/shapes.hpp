// Sequence lengths and chunk sizes. Chunked kernels are written for T a
// multiple of C; the bugs live where it is not (the last partial chunk) and
// where T < C (a single partial chunk). length_and_chunk draws T first (it
// shrinks to 1 on its own), then whether C divides T (no, 4 times in 5), then C
// among the sizes that do (do not) divide T.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "properties/gen/scalars.hpp"

namespace ttr::prop::gen {

struct TC {
  int T = 1, C = 1;
};
inline void showValue(const TC& x, std::ostream& os) { os << "T=" << x.T << " C=" << x.C; }

// T ∈ [1, max_T]; C ∈ {2, 3, 4, 5, 7, 8, 16, 64, 1}.
inline rc::Gen<TC> length_and_chunk(int max_T = 40) {
  return rc::gen::exec([max_T] {
    TC x;
    x.T = *uniform_int(1, max_T);
    const bool divides = *choose<bool>({{4, false}, {1, true}});
    std::vector<int> sizes;
    for (int c : {2, 3, 4, 5, 7, 8, 16, 64, 1})
      if ((x.T % c == 0) == divides) sizes.push_back(c);
    x.C = *choose_uniform(sizes);  // never empty: 1 divides, 64 > max_T does not
    return x;
  });
}

}  // namespace ttr::prop::gen
