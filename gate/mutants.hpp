// The mutant catalogue: realistic bugs of the CPU chunk and scan forms (the
// built-in kernels under test), forward and backward, each switchable at run time
// with a MutantScope (reference/core/mutant.hpp) or `ttrcheck run --mutant NAME`.
// The gate runs every mutant on the (layer, form, direction) triples listed here,
// under the conditions it needs to bite, and must fail each one: that is the
// proof that it has teeth.
//
// Names are stable (scripts and reports refer to them): kebab case, one per
// Mutant value. The sequential forms are never mutated.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "oracles/arith.hpp"
#include "oracles/spec.hpp"
#include "reference/core/mutant.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

struct MutantTarget {
  std::string layer;
  Form form;
  Direction direction = Direction::forward;  // backward: the form's gradients are wrong
};

// What a mutant needs, besides its (layer, form), to change the output: outside
// these conditions it may compute the correct function (a mutant of h0 handling
// changes nothing when no h0 is given), so a gate that runs it there proves
// nothing. Defaults: any config, inputs, arithmetic and shape.
// Special inputs a mutant needs to do any harm that shows: NaN/Inf bugs live on
// inputs random draws never contain (a zero key, gates summing past exp's range).
// The default gate's random inputs are not relied upon to contain them; the fuzzer
// (`ttrcheck fuzz`, fuzz/campaign.cpp) generates them and tests/fuzz proves it finds
// each such mutant; plant_special_input makes them deterministically for tests.
enum class SpecialInput {
  none,
  strong_decay,       // a chunk whose log-gates sum below −88.7 (fp32) / −709.8 (fp64): g ≈ log(1e-30) per token
  zero_key,           // a key row with ‖k‖² = 0 in the kernel's arithmetic (zero, or underflowing fp32)
  zero_write_prefix,  // GKA: H_t = 0 at some token — β = 0 from the sequence start, no hkk0
};
const char* special_input_text(SpecialInput s);  // one line ("" for none)

struct MutantConditions {
  std::vector<std::pair<std::string, std::string>> config;  // --set pairs (e.g. solver=chebyshev)
  std::vector<std::string> inputs;  // optional input tensors that must be present (e.g. h0)
  std::vector<Tier> tiers;          // the arithmetics it bites in (empty: any)
  int min_chunks = 1;               // chunk forms: T ≥ min_chunks·C (ignored by whole-sequence scans)
  int min_chunk_size = 1;           // chunk forms: C ≥ min_chunk_size (a bug across 16×16 sub-blocks)
  bool partial_last_chunk = false;  // T not a multiple of the chunk size C
  bool several_sequences = false;   // B·H ≥ 2
  SpecialInput special = SpecialInput::none;  // inputs it needs to produce NaN/Inf (none: any inputs)
};

struct MutantInfo {
  Mutant id;
  std::string name;         // stable, kebab case
  std::string description;  // one line: the bug, as a kernel would have it
  std::vector<MutantTarget> targets;
  MutantConditions needs;
  std::string note;  // where it is weak or invisible (empty: bites clearly everywhere it applies)
  // Also planted in the CUDA chunk backward kernels of its targets that have one
  // (gpu/core/mutant.cuh; builds with TTR_CUDA_MUTANTS): `run --device cuda
  // --mutant`, `gate --cuda-only --mutant` and the GPU tests switch it there.
  bool cuda = false;

  bool affects(const std::string& layer, Form form, Direction direction = Direction::forward) const;
  // Its targets' directions: a catalogue entry's targets are all of one direction.
  Direction direction() const { return targets.empty() ? Direction::forward : targets.front().direction; }
};

// Rewrites `inputs` (a valid input set of `spec`, as generate_inputs draws it) in
// place so that they contain `s`: strong_decay sets every log-decay to the bf16
// value nearest log(1e-30); zero_key zeroes the keys of every fifth token (t = 0,
// 5, …); zero_write_prefix gives the layer a write gate β that is 0 for the first
// three tokens (1 after) and drops its initial states. InputError when the layer
// has no such input (no log-decay, no key, no β).
void plant_special_input(SpecialInput s, const LayerSpec& spec, TensorMap<double>& inputs);

// Every mutant, in Mutant order (Mutant::none excluded).
const std::vector<MutantInfo>& mutant_catalogue();
const MutantInfo& mutant_info(Mutant m);  // std::invalid_argument for Mutant::none
// "none" for Mutant::none.
const char* mutant_name(Mutant m);
// A catalogue name, or "none"; InputError listing the known names otherwise.
Mutant parse_mutant(const std::string& name);
// The mutant for a run of a CUDA kernel: `name` parsed, and an InputError unless
// it is "none" or has a CUDA counterpart (MutantInfo::cuda; naming those that do).
Mutant parse_cuda_mutant(const std::string& name);
// The mutants that affect (layer, form, direction), in catalogue order.
std::vector<const MutantInfo*> mutants_for(const std::string& layer, Form form,
                                           Direction direction = Direction::forward);

}  // namespace ttr
