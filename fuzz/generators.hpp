// Structured generators of adversarial inputs for the fuzzer (`ttrcheck fuzz`):
// the families of the property tests and the stress vectors — gates exactly 0 and
// extremely negative, β at 0 and 1, key norms over many decades, zero and
// underflowing keys, near-duplicate and exactly collinear keys, lengths around
// chunk boundaries, values near the dtype's overflow and underflow, GKA's small
// `a`, KLA-K's p̄ = 0 with ā near 0 — and the neighbours local search moves to.
//
// Every value is on the bf16 grid (so a bf16 kernel, an fp32 kernel and the oracle
// see the same numbers, and an F32 file stores them exactly), inside its tensor's
// range, with delta-rule writes kept contractive. A case is a pure function of
// (spec, family, options, seed): fixed algorithms (splitmix64 streams), no
// std:: distributions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracles/spec.hpp"
#include "oracles/validate.hpp"

namespace ttr::fuzz {

struct Case {
  std::string family;
  Dims dims;                                                // B T H K V (N D)
  std::vector<std::pair<std::string, std::string>> config;  // --set pairs
  TensorMap<double> inputs;
};

struct GeneratorOptions {
  int chunk = 16;           // the target's chunk size: lengths are drawn around its multiples
  std::int64_t length = 0;  // > 0: every case has T = length (benchmarks)
};

// A fixed-algorithm random stream (splitmix64).
class Stream {
 public:
  explicit Stream(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next();
  double uniform();                                   // [0, 1)
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  std::int64_t below(std::int64_t n);                 // [0, n)
  double normal();                                    // Box–Muller

 private:
  std::uint64_t s_;
};
std::uint64_t mix(std::uint64_t a, std::uint64_t b);  // a seed for stream b of seed a

// The families that apply to a layer (those whose inputs or keys it has), in a fixed order.
std::vector<std::string> families_for(const LayerSpec& spec);
const std::vector<std::string>& all_families();

// The configuration every case of the layer runs with: the gate's (GKA's
// chunkwise Chebyshev solver) and every required key's example value.
std::vector<std::pair<std::string, std::string>> base_config(const LayerSpec& spec);

Case generate_case(const LayerSpec& spec, const std::string& family, const GeneratorOptions& opt, std::uint64_t seed);

// A neighbour of `c` for local search: one element, row or tensor moved (scaled,
// set to an edge value, pulled towards another key); same dims and config.
Case mutate_case(const LayerSpec& spec, const Case& c, std::uint64_t seed);

// bf16 grid, ranges, contractive writes: what every generated or shrunk case satisfies.
void finish_inputs(const LayerSpec& spec, TensorMap<double>& inputs);

}  // namespace ttr::fuzz
