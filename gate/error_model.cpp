#include "gate/error_model.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "oracles/error.hpp"
#include "oracles/slices.hpp"
#include "reference/core/float16.hpp"
#include "reference/core/mca.hpp"

namespace ttr {
namespace {

// Smallest positive (subnormal) value of a dtype: the absolute spacing below
// which nothing is representable, hence the floor of every bound.
double tiny(Tier dtype) {
  switch (dtype) {
    case Tier::bf16: return std::ldexp(1.0, -133);
    case Tier::fp16: return std::ldexp(1.0, -24);
    case Tier::fp32: return std::ldexp(1.0, -149);
    default: return std::numeric_limits<double>::denorm_min();
  }
}

// What the kernel's rounding is, per form: the sequential definition rounds
// every operation to the dtype; the chunk and scan forms compute in fp32 (fp64
// for an fp64 kernel) and store/feed 16-bit values (docs/arithmetic-policies.md).
struct Rounding {
  double u_op;
  McaFormat op_format;
  double u_store;
  McaFormat store_format;
};
McaFormat format_of(Tier dtype) {
  switch (dtype) {
    case Tier::bf16: return McaFormat::bf16;
    case Tier::fp16: return McaFormat::fp16;
    case Tier::fp32: return McaFormat::fp32;
    default: return McaFormat::any;
  }
}
Rounding rounding_of(Form form, Tier dtype, Policy policy) {
  // A foreign fp32 kernel's narrowed values (gate/policies.hpp): matrix operands in
  // TF32, or states and operands stored in bf16; compute in fp32 in every form (a
  // sequential form narrows nothing, so there the policy is fp32's).
  // TF32 by truncation or rounding (reference/core/tf32_policy.hpp): one TF32 ulp, 2^-10.
  if (policy == Policy::tf32) return {unit_roundoff(Tier::fp32), McaFormat::fp32, std::ldexp(1.0, -10), McaFormat::tf32};
  if (policy == Policy::bf16_storage)
    return {unit_roundoff(Tier::fp32), McaFormat::fp32, unit_roundoff(Tier::bf16), McaFormat::bf16};
  const double u = unit_roundoff(dtype);
  if (one_token_at_a_time(form)) return {u, format_of(dtype), 0.0, McaFormat::any};
  const bool narrow16 = dtype == Tier::bf16 || dtype == Tier::fp16;
  if (narrow16) return {unit_roundoff(Tier::fp32), McaFormat::fp32, u, format_of(dtype)};
  return {u, format_of(dtype), 0.0, McaFormat::any};
}

}  // namespace

double unit_roundoff(Tier dtype) {
  switch (dtype) {
    case Tier::bf16: return std::ldexp(1.0, -8);
    case Tier::fp16: return std::ldexp(1.0, -11);
    case Tier::fp32: return std::ldexp(1.0, -24);
    case Tier::fp64: return std::ldexp(1.0, -53);
    default: throw InputError(fmt::format("no kernel dtype '{}' (bf16|fp16|fp32|fp64)", tier_name(dtype)));
  }
}

double max_finite(Tier dtype) {
  switch (dtype) {
    case Tier::bf16: return BF16Format::max_finite();
    case Tier::fp16: return FP16Format::max_finite();
    case Tier::fp32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

Location RowLayout::locate(std::int64_t row) const {
  if (per_token) return {row / (T * H), (row / H) % T, row % H};
  return {row / H, -1, row % H};
}

RowLayout row_layout(const TensorSpec& out, const Shape& shape) {
  RowLayout l;
  const std::int64_t n = numel(shape);
  l.per_token = out.dims.size() >= 3 && out.dims[1] == "T";
  if (l.per_token) {
    l.T = shape.at(1);
    l.H = shape.at(2);
    l.rows = shape.at(0) * l.T * l.H;
  } else {
    l.H = shape.size() >= 2 ? shape[1] : 1;
    l.rows = shape.at(0) * l.H;
  }
  l.width = l.rows ? n / l.rows : 0;
  return l;
}

ErrorModel model_errors(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg,
                        const TensorMap<double>& oracle, const ModelSpec& spec) {
  ErrorModel m;
  m.spec = spec;
  m.u = unit_roundoff(spec.dtype);
  const LayerRunner run = layer.runner(spec.form, Tier::mca, spec.direction);
  const LayerSpec outputs = direction_spec(layer.spec, spec.direction);
  if (spec.policy != Policy::native && spec.dtype != Tier::fp32)
    throw InputError(fmt::format("policy '{}' is for fp32 kernels, not {}", policy_name(Tier::fp32, spec.policy),
                                 tier_name(spec.dtype)));
  const Rounding r = rounding_of(spec.form, spec.dtype, spec.policy);
  const double top = max_finite(spec.dtype);
  FormOptions opt;
  opt.chunk_size = spec.chunk_size;
  // Sum over samples of each row's squared deviation from the oracle; NaN marks a
  // row the model cannot describe (the oracle or a perturbed run non-finite).
  TensorMap<double> sumsq;
  for (int i = 0; i < spec.samples; ++i) {
    const std::uint64_t sample_seed = spec.seed * 0x100000001B3ull + static_cast<std::uint64_t>(i);
    // The key of the elementwise functions' perturbations is the sample's (the
    // same argument rounds the same way in every slice of one run).
    mca_seed(sample_seed, r.u_op, r.op_format, r.u_store, r.store_format);
    const std::uint64_t run_key = mca_context().key;
    // Every (sequence, head) its own run on all cores (oracles/slices.hpp), each
    // with its own perturbation stream derived from (seed, sample, sequence,
    // head): the model is the same whatever the thread count.
    SliceOptions so;
    so.split = true;
    so.before = [&](const Slice& s) {
      mca_seed(sample_seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(s.first + 1)) ^
                   (0xC2B2AE3D27D4EB4Full * static_cast<std::uint64_t>(s.head + 2)),
               r.u_op, r.op_format, r.u_store, r.store_format);
      mca_context().key = run_key;
    };
    so.after = [](const Slice&) { mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any); };
    const LayerResult sample = run_sliced(outputs, run, inputs, cfg, opt, so);
    for (const TensorSpec& out : outputs.outputs) {
      const auto ref = oracle.find(out.name);
      const auto got = sample.values.find(out.name);
      if (ref == oracle.end() || got == sample.values.end()) continue;
      const RowLayout l = row_layout(out, ref->second.shape);
      Tensor<double>& acc = sumsq[out.name];
      if (acc.data.empty()) acc = Tensor<double>({l.rows}, 0.0);
      for (std::int64_t row = 0; row < l.rows; ++row) {
        // Over the elements compare() judges: an oracle beyond the dtype's range
        // forms no ratio (KLA-K's Λ_T beside representable ones in a state row).
        double s = 0.0;
        for (std::int64_t j = row * l.width; j < (row + 1) * l.width; ++j) {
          if (!(std::fabs(ref->second.data[j]) <= top)) continue;
          const double d = got->second.data[j] - ref->second.data[j];
          s += d * d;
        }
        acc.data[row] += std::isfinite(s) ? s : std::numeric_limits<double>::quiet_NaN();
      }
    }
  }
  for (auto& [name, t] : sumsq) {
    for (double& x : t.data) x = std::sqrt(x / spec.samples);
    m.rms[name] = std::move(t);
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);  // leave the thread's arithmetic unperturbed
  return m;
}

namespace {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The bound of a row (header): modelled error + storage rounding + a floor.
double row_bound(double model, double u, double ref_norm, Tier dtype, std::int64_t width) {
  return model + u * ref_norm + tiny(dtype) * std::sqrt(static_cast<double>(width));
}

// One row's contribution: squared error and squared oracle norm over elements
// where both are finite and the oracle is representable; non-finite bookkeeping.
void compare_tensor(const TensorSpec& out, const Tensor<double>& ref, const Tensor<double>& cand,
                    const Tensor<double>* rms, double u, Tier dtype, double threshold, TensorVerdict& v) {
  const RowLayout l = row_layout(out, ref.shape);
  const double top = max_finite(dtype);
  v.elements = ref.numel();
  v.rows = l.rows;
  if (l.rows > 0) v.worst = l.locate(0);
  for (std::int64_t row = 0; row < l.rows; ++row) {
    double err2 = 0.0, ref2 = 0.0;
    bool modelled = true, bad = false, exact_zero = true;
    for (std::int64_t j = row * l.width; j < (row + 1) * l.width; ++j) {
      const double c = cand.data[j], o = ref.data[j];
      const bool representable = std::isfinite(o) && std::fabs(o) <= top;
      exact_zero = exact_zero && o == 0.0;
      if (std::isnan(c)) ++v.nan_count;
      if (std::isinf(c)) ++v.inf_count;
      if (!std::isfinite(c)) {
        // A failure where the true value is finite and fits the dtype — except an
        // infinity of the right sign where the truth lies within the accepted
        // error (threshold × the row's modelled error and storage rounding) of the
        // dtype's largest value: a correct kernel's rounding may carry it past
        // (a bf16 Λ_T of 3.24e38 against bf16's 3.39e38). A NaN is never a faithful
        // value; an infinity must carry the right sign.
        const double row_model = rms && std::isfinite(rms->data[row]) ? rms->data[row] : 0.0;
        const bool rounds_past_top = std::isinf(c) && std::isfinite(o) && std::signbit(c) == std::signbit(o) &&
                                     std::fabs(o) + threshold * (row_model + u * std::fabs(o)) > top;
        if (rounds_past_top) {
          modelled = false;  // no error ratio to form for this row's infinity
          continue;
        }
        if (representable || std::isnan(c) || (std::isinf(o) && c != o) ||
            (std::isfinite(o) && std::signbit(c) != std::signbit(o))) {
          if (v.nonfinite_failures++ == 0) v.first_nonfinite = l.locate(row);
          bad = true;
        }
        continue;
      }
      if (!representable) {  // the truth overflows the dtype: no error ratio to form
        modelled = false;
        continue;
      }
      const double d = c - o;
      v.max_abs_error = std::max(v.max_abs_error, std::fabs(d));
      err2 += d * d;
      ref2 += o * o;
    }
    double ratio = 0.0;
    bool at_floor = false;
    if (bad) {
      ratio = std::numeric_limits<double>::infinity();
    } else if (modelled) {
      const double model = rms ? rms->data[row] : 0.0;
      if (!std::isfinite(model)) continue;  // the model cannot describe this row
      ratio = std::sqrt(err2) / row_bound(model, u, std::sqrt(ref2), dtype, l.width);
      at_floor = exact_zero && model == 0.0;
    }
    if (ratio > v.max_ratio) {
      v.max_ratio = ratio;
      v.worst = l.locate(row);
      v.worst_at_floor = at_floor;
    }
  }
  v.pass = v.nonfinite_failures == 0 && v.max_ratio <= threshold;
}

}  // namespace

CheckResult compare(const LayerSpec& spec, const TensorMap<double>& oracle, const ErrorModel& model,
                    const TensorMap<double>& candidate) {
  CheckResult r;
  r.layer = spec.name;
  r.dtype = model.spec.dtype;
  r.policy = model.spec.policy;
  r.model_form = model.spec.form;
  r.direction = model.spec.direction;
  r.chunk_size = model.spec.chunk_size;
  r.model_samples = model.spec.samples;
  for (const TensorSpec& out : spec.outputs) {
    if (!out.certifiable) continue;  // diagnostics of the arithmetic, not of the math
    // Not computed for these inputs (backward: the gradient of an optional input
    // that was not given, e.g. dh0 without h0): nothing to compare.
    if (!oracle.count(out.name)) continue;
    TensorVerdict v;
    v.name = out.name;
    const auto c = candidate.find(out.name);
    if (c == candidate.end()) {
      if (out.name == "o") throw InputError("candidate has no output tensor 'o'");
      v.present = false;
      r.tensors.push_back(v);
      continue;
    }
    const Tensor<double>& ref = oracle.at(out.name);
    if (c->second.shape != ref.shape)
      throw InputError(fmt::format("candidate tensor '{}' has shape {}, expected {}", out.name,
                                   shape_str(c->second.shape), shape_str(ref.shape)));
    const auto m = model.rms.find(out.name);
    compare_tensor(out, ref, c->second, m == model.rms.end() ? nullptr : &m->second, model.u, model.spec.dtype,
                   r.threshold, v);
    r.pass = r.pass && v.pass;
    r.tensors.push_back(v);
  }
  return r;
}

double oracle_error_ratio(const LayerSpec& spec, const TensorMap<double>& oracle, const ErrorModel& model,
                          const TensorMap<double>& own_error) {
  const double top = max_finite(model.spec.dtype);
  double worst = 0.0;
  for (const TensorSpec& out : spec.outputs) {
    if (!out.certifiable) continue;
    const auto ref = oracle.find(out.name);
    const auto own = own_error.find(out.name);
    if (ref == oracle.end() || own == own_error.end()) continue;
    const RowLayout l = row_layout(out, ref->second.shape);
    const auto m = model.rms.find(out.name);
    for (std::int64_t row = 0; row < l.rows; ++row) {
      double e2 = 0.0, ref2 = 0.0;
      for (std::int64_t j = row * l.width; j < (row + 1) * l.width; ++j) {
        const double o = ref->second.data[j];
        if (!(std::fabs(o) <= top)) continue;  // as compare(): no ratio beyond the dtype's range
        e2 += own->second.data[j] * own->second.data[j];
        ref2 += o * o;
      }
      const double rms = m == model.rms.end() ? 0.0 : m->second.data[row];
      if (!std::isfinite(rms)) continue;
      worst = std::max(worst, std::sqrt(e2) / row_bound(rms, model.u, std::sqrt(ref2), model.spec.dtype, l.width));
    }
  }
  return worst;
}

}  // namespace ttr
