// Range classification of non-finite results (docs/error-model.md, "Range
// findings"). A NaN/Inf in a kernel's output where the oracle is finite is a
// kernel failure — unless the exact computation of the kernel's own form, on
// these inputs, already has an intermediate beyond the largest finite value of
// the format that intermediate is rounded to: then no kernel of this form and
// dtype can compute the case, and the finding is a `range` finding, reported
// with the offending intermediate and not counted as a failure (unless
// --strict-range).
//
// How: the form runs once in the `mca` tier without perturbation — double
// arithmetic, whose exponent range (±1024) exceeds fp32's, bf16's and fp16's by
// far, so each intermediate is its exact value up to a relative 1e-16 times the
// form's own conditioning (the same stand-in for "exact" as the error model's) —
// with the range trace of reference/core/mca.hpp on: every operation result is
// compared with the largest finite value of the format the kernel computes in
// (fp32 for the chunk and scan forms, the dtype for the sequential form), every
// value the policy narrows with the storage format's (bf16, fp16), and the first
// one beyond is kept, named by the form's NamedIntermediate scope
// (reference/core/intermediate.hpp). A result that is ±inf in double counts as
// beyond (it is beyond double's range, a fortiori fp32's); a division by zero
// does not (no value is out of range there: the form divides by zero). The
// form's final outputs whose truth is beyond the format (KLA-K's lambda_T) are
// not intermediates: their ±inf is the faithful result (the oracle's rule).
#pragma once

#include "gate/error_model.hpp"

namespace ttr {

// The first intermediate of `ms.form` (in `ms.dtype`'s arithmetic) beyond its
// format's range on these inputs; RangeNote::beyond false when there is none.
// Runs outside any mutant: it is the correct form's exact computation.
RangeNote trace_range(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg,
                      const ModelSpec& ms);

// Applies a range note to a check that has non-finite failures: records it, and
// unless `strict`, excuses the check (its failures, non-finite or ratio: the
// outputs of a form whose intermediates left the format are undefined in it; the
// tensors keep their counts and ratios for the report). A check without
// non-finite failures or a note with beyond == false is left as it is.
void apply_range(CheckResult& r, const RangeNote& note, bool strict);

}  // namespace ttr
