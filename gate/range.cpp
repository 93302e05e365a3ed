#include "gate/range.hpp"

#include "oracles/slices.hpp"

#include <cmath>
#include <limits>

#include "reference/core/mca.hpp"
#include "reference/core/mutant.hpp"

namespace ttr {
namespace {

// The formats a form rounds to (as error_model.cpp's rounding_of): the sequential
// form every operation to the dtype; the chunk and scan forms compute in fp32
// (fp64 for an fp64 kernel) and store 16-bit values in the dtype.
struct Formats {
  Tier op, store;
};
Formats formats_of(Form form, Tier dtype) {
  if (one_token_at_a_time(form)) return {dtype, dtype};
  if (dtype == Tier::bf16 || dtype == Tier::fp16) return {Tier::fp32, dtype};
  return {dtype, dtype};
}

McaFormat mca_format(Tier t) {
  switch (t) {
    case Tier::bf16: return McaFormat::bf16;
    case Tier::fp16: return McaFormat::fp16;
    case Tier::fp32: return McaFormat::fp32;
    default: return McaFormat::any;
  }
}

// Restores the thread's Monte Carlo context (trace off, no perturbation) however
// the run ends.
struct TraceScope {
  TraceScope(double op_max, double store_max, McaFormat op, McaFormat store) {
    mca_seed(0, 0.0, op, 0.0, store);
    McaContext& c = mca_context();
    c.trace_range = true;
    c.op_max = op_max;
    c.store_max = store_max;
    c.first_beyond = {};
  }
  ~TraceScope() {
    McaContext& c = mca_context();
    c.trace_range = false;
    c.first_beyond = {};
    mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
  }
};

}  // namespace

RangeNote trace_range(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg,
                      const ModelSpec& ms) {
  const Formats f = formats_of(ms.form, ms.dtype);
  RangeNote note;
  note.form = ms.form;
  const LayerRunner run = layer.runner(ms.form, Tier::mca, ms.direction);
  FormOptions opt;
  opt.chunk_size = ms.chunk_size;
  McaRangeEvent first;
  {
    const MutantScope correct(Mutant::none);
    const TraceScope trace(max_finite(f.op), max_finite(f.store), mca_format(f.op), mca_format(f.store));
    // On this thread (the trace is thread-local); a varlen batch sequence by sequence.
    SliceOptions serial;
    serial.threads = 1;
    serial.kernel_form = false;
    run_sliced(direction_spec(layer.spec, ms.direction), run, inputs, cfg, opt, serial);
    first = mca_context().first_beyond;
  }
  if (!first.exceeded) return note;
  note.beyond = true;
  note.intermediate = first.intermediate ? first.intermediate : "";
  note.operation = first.operation;
  note.value = first.value;
  const bool stored = note.operation == "store";
  note.format = tier_name(stored ? f.store : f.op);
  note.limit = first.limit;
  return note;
}

void apply_range(CheckResult& r, const RangeNote& note, bool strict) {
  std::int64_t nonfinite = 0;
  for (const TensorVerdict& v : r.tensors) nonfinite += v.nonfinite_failures;
  if (nonfinite == 0 || !note.beyond) return;
  r.range = note;
  r.range_excused = !strict;
  if (strict) return;
  // The whole check: once an intermediate the form must hold is beyond the
  // format, none of its outputs is defined in that dtype (the unscaled KLA-K
  // forms return 0 = η/inf one token before the NaN, a finite wrong value).
  r.pass = true;
  for (TensorVerdict& v : r.tensors) v.pass = true;
}

}  // namespace ttr
