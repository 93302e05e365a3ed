// The slicer: one generic mechanism that runs a layer form on a batch as many
// independent B = 1 problems and reassembles the outputs (docs/varlen.md).
//
//  * Varlen batches (cu_seqlens, oracles/varlen.hpp): every sequence n runs on its
//    own tokens [cu_seqlens[n], cu_seqlens[n+1]) with its own row n of every
//    per-sequence tensor (h0, dht, ...), so a chunk form's chunks restart at each
//    sequence start exactly as FLA's chunk indices do. No layer sees cu_seqlens.
//  * Parallel oracles and models: with `split`, every (sequence, head) — a batch
//    row b or a varlen sequence n, times a head h — is its own run, and the runs
//    go to all cores (OpenMP). Each run computes exactly what the whole-batch run
//    computes for that row (the heads and rows of every layer are independent:
//    tests/varlen/slices_test.cpp proves it bit for bit per layer, form and
//    direction), and the outputs are put together in plan order, so the result
//    is bit-identical whatever the thread count.
//
// What a tensor is comes from its spec dims alone (axis_kind): per-token tensors
// are cut along T, per-sequence tensors indexed by row, per-head tensors (shared
// by all sequences: KLA-K's a_bar, PDN's log_atk_scale) cut by head and passed
// whole to every sequence; the gradients of those are summed over sequences in
// sequence order (float64, after each sequence's own rounding: one rounding per
// sequence added, 2^-53 relative, far below every dtype's bound).
//
// An empty sequence (cu_seqlens[n] == cu_seqlens[n+1]) runs as a T = 0 problem:
// it emits no token, and its per-sequence outputs are what the layer returns for
// T = 0 (ht = h0, dh0 = dht, ...).
#pragma once

#include <cstdint>
#include <functional>

#include "oracles/arith.hpp"
#include "oracles/registry.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"
#include "oracles/threads.hpp"  // slice_threads, SliceThreadsScope
#include "reference/core/mutant.hpp"

namespace ttr {

// The varlen mutants (gate/mutants.cpp lists them): bugs of a varlen kernel's
// sequence handling, planted here in the slicer rather than in the forms (the
// forms never see a sequence boundary). Only kernel forms (chunk, scan) are
// mutated; the sequential form is the oracle's definition.
inline constexpr Mutant kVarlenStateLeaks = Mutant::varlen_state_leaks;
inline constexpr Mutant kVarlenChunkStraddles = Mutant::varlen_chunk_straddles;
inline constexpr Mutant kVarlenDh0FromPrevious = Mutant::varlen_dh0_from_previous;

// One run of the plan: sequences [first, last] (one, unless a mutant merges
// them), tokens [t0, t1) of batch row `row`, head `head` (-1: every head).
struct Slice {
  std::size_t index = 0;  // position in the plan
  std::int64_t row = 0;   // batch row of the per-token tensors (0 under varlen)
  std::int64_t first = 0, last = 0;  // sequences (per-sequence rows)
  std::int64_t t0 = 0, t1 = 0;
  std::int64_t head = -1;
};

struct SliceOptions {
  // Split every batch row (non-varlen) and head into its own run (oracles and
  // models). Without it only a varlen batch is split, by sequence — how the CPU
  // kernel forms run one, keeping every head of a sequence in one run as a
  // kernel does (state-leaks-across-heads stays visible).
  bool split = false;
  // The form is a kernel form (chunk, scan): the varlen mutants may apply.
  bool kernel_form = false;
  int threads = 0;  // 0: slice_threads() (oracles/threads.hpp)
  // Called on the thread that runs the slice, before and after it (the error
  // model seeds its Monte Carlo stream per slice from (seed, sequence, head)).
  std::function<void(const Slice&)> before, after;
};

// Runs `run` (a form of the layer whose direction's spec is `spec`) on `in`,
// sliced as above. Without cu_seqlens and without `split`, exactly run(in, cfg, opt).
// InputError for offsets that do not fit the inputs (programmatic callers;
// files are checked by validate_inputs first).
LayerResult run_sliced(const LayerSpec& spec, LayerRunner run, const TensorMap<double>& in, const Config& cfg,
                       const FormOptions& opt, const SliceOptions& so);

// The same with a run that also sees which slice it computes (the oracle tiers,
// oracles/oracle_tier.hpp, decide their arithmetic per slice). A run over the
// whole input (no slicing applies) gets the slice {index 0, row -1, head -1}.
// Every map of the LayerResult is reassembled alike (own_error like values).
using SliceRunner =
    std::function<LayerResult(const TensorMap<double>& part, const Config&, const FormOptions&, const Slice&)>;
LayerResult run_sliced(const LayerSpec& spec, const SliceRunner& run, const TensorMap<double>& in, const Config& cfg,
                       const FormOptions& opt, const SliceOptions& so);

// run_layer with slice options: the oracle's and the model's way to run a form
// (so.split) on all cores.
LayerResult run_layer_sliced(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                             const Config& cfg, int chunk_size, Direction direction, SliceOptions so);

}  // namespace ttr
