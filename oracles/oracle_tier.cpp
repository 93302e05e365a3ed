#include "oracles/oracle_tier.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "oracles/error.hpp"
#include "oracles/slices.hpp"
#include "oracles/tiers/dd_support.hpp"
#include "oracles/varlen.hpp"

namespace ttr {

OracleMode parse_oracle_mode(const std::string& s) {
  if (s == "auto") return OracleMode::fast;
  if (s == "mpfr") return OracleMode::mpfr;
  throw InputError(fmt::format("--oracle-tier: unknown value '{}' (auto|mpfr)", s));
}

const char* oracle_mode_name(OracleMode m) { return m == OracleMode::fast ? "auto" : "mpfr"; }

namespace {

// Positions of the batch, time and head dimensions in a tensor's dims (−1: absent).
struct Axes {
  int b = -1, t = -1, h = -1;
};
Axes axes_of(const TensorSpec& ts) {
  Axes a;
  for (int i = 0; i < static_cast<int>(ts.dims.size()); ++i) {
    if (ts.dims[i] == "B") a.b = i;
    if (ts.dims[i] == "T") a.t = i;
    if (ts.dims[i] == "H") a.h = i;
  }
  return a;
}

// Visits every element of a row-major tensor of shape s with its multi-index.
template <class F>
void for_each_index(const Shape& s, F&& f) {
  const std::int64_t n = numel(s);
  std::vector<std::int64_t> idx(s.size(), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    f(e, idx);
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

// Per row of one output: the sums the rule needs.
struct RowSums {
  double diff2 = 0, ref2 = 0, est2 = 0;
  bool nonfinite = false;
  std::int64_t b = 0, t = -1, h = 0;
};

// Row index (b, t, h) of every element of a tensor with these axes and shape;
// a rank differing from the dims (never in a validated run) makes one row.
struct Rows {
  Axes a;
  std::int64_t nb = 1, nt = 1, nh = 1;
  Rows(const TensorSpec& ts, const Shape& s) {
    if (ts.dims.size() == s.size()) a = axes_of(ts);
    nb = a.b >= 0 ? s[a.b] : 1, nt = a.t >= 0 ? s[a.t] : 1, nh = a.h >= 0 ? s[a.h] : 1;
  }
  std::int64_t count() const { return nb * nt * nh; }
  std::int64_t b(const std::vector<std::int64_t>& i) const { return a.b >= 0 ? i[a.b] : 0; }
  std::int64_t t(const std::vector<std::int64_t>& i) const { return a.t >= 0 ? i[a.t] : 0; }
  std::int64_t h(const std::vector<std::int64_t>& i) const { return a.h >= 0 ? i[a.h] : 0; }
  std::size_t row(const std::vector<std::int64_t>& i) const {
    return static_cast<std::size_t>((b(i) * nt + t(i)) * nh + h(i));
  }
};

// max over rows of ‖own_error_row‖ / (target_u ‖value_row‖): what the provenance
// records, after escalation (MPFR rows count 0).
double max_over_target(const TensorSpec& ts, const Tensor<double>& v, const Tensor<double>& est, double target_u) {
  const Rows rows(ts, v.shape);
  std::vector<double> e2(static_cast<std::size_t>(rows.count()), 0.0), o2(e2.size(), 0.0);
  for_each_index(v.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    const std::size_t row = rows.row(idx);
    e2[row] += est.data[e] * est.data[e];
    if (std::isfinite(v.data[e])) o2[row] += v.data[e] * v.data[e];
  });
  double m = 0.0;
  for (std::size_t i = 0; i < e2.size(); ++i)
    if (o2[i] > 0) m = std::max(m, std::sqrt(e2[i]) / (target_u * std::sqrt(o2[i])));
  return m;
}

// An output the slicer puts back element for element (oracles/slices.hpp), not
// summed over slices.
bool placed_whole(const TensorSpec& ts) {
  const AxisKind k = axis_kind(ts);
  return k == AxisKind::per_token || k == AxisKind::per_sequence;
}

// The rule of the header on one output of one slice: fills `est` (per element)
// and returns why the slice escalates ("" when it does not). Row indices are the
// slice's own (b = 0 and h = 0 once its batch row and head are cut out).
std::string judge_rows(const TensorSpec& ts, const Tensor<double>& dd, const Tensor<double>& f64, Tensor<double>& est,
                       double target_u) {
  const Rows index(ts, dd.shape);
  std::vector<RowSums> rows(static_cast<std::size_t>(index.count()));
  est = Tensor<double>(dd.shape, 0.0);
  for_each_index(dd.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    RowSums& r = rows[index.row(idx)];
    r.b = index.b(idx);
    r.t = index.a.t >= 0 ? index.t(idx) : -1;
    r.h = index.h(idx);
    const double o = dd.data[e], x = f64.data[e];
    if (!std::isfinite(o) || !std::isfinite(x)) {
      r.nonfinite = true;
      return;
    }
    const double diff = std::fabs(o - x);
    const double est_e = kOracleEstimateSafety * kDdOverFp64 * (diff + 0x1p-53 * std::fabs(o));
    est.data[e] = est_e;
    r.diff2 += diff * diff;
    r.ref2 += o * o;
    r.est2 += est_e * est_e;
  });
  for (const RowSums& r : rows) {
    const double diff = std::sqrt(r.diff2), ref = std::sqrt(r.ref2), e = std::sqrt(r.est2);
    std::string why;
    if (r.nonfinite) why = "a non-finite value in double-double or float64";
    else if (diff > kOracleGuard * ref)
      why = fmt::format("float64 differs from double-double by {:.3g} relative (> 2^-20: not first order)",
                        ref > 0 ? diff / ref : INFINITY);
    else if (e > kOracleEscalationFraction * target_u * ref) why = "estimated own error above 1/1000 of the bound";
    if (!why.empty()) return fmt::format("'{}' row (t={}): {}", ts.name, r.t, why);
  }
  return "";
}

OracleResult all_mpfr(const LayerEntry& layer, Form form, const TensorMap<double>& inputs, const Config& cfg,
                      Direction direction, const OracleRequest& req, int chunk_size, std::string reason) {
  OracleResult r;
  SliceOptions split;  // every (sequence, head) its own run, on all cores
  split.split = true;
  LayerResult m = run_layer_sliced(layer, form, {Tier::mpfr, req.bits}, inputs, cfg, chunk_size, direction, split);
  r.values = std::move(m.values);
  r.working_bits = m.working_bits;
  r.provenance.tier = fmt::format("mpfr:{}", req.bits);
  r.provenance.unit = "all";
  r.provenance.slices = 1;
  r.provenance.reason = std::move(reason);
  return r;
}

bool has_runner(const LayerEntry& layer, Form form, Tier t, Direction d) {
  if (t == Tier::dd && !dd_tier_runs_here()) return false;  // then MPFR serves (tiers/dd_support.hpp)
  for (const FormImpl& x : layer.forms)
    if (x.form == form && x.direction == d) return x.runners[static_cast<std::size_t>(t)] != nullptr;
  return false;
}

// What one slice's run decided.
struct SliceRecord {
  Slice slice;
  bool escalated = false;
  std::string reason;  // with the slice named
  double max_error_over_target = 0.0;  // over its rows (0 when MPFR produced them)
};

// The batch row (varlen: the sequence) a slice covers, −1 when it covers several:
// the slicer's row, or the only row of a one-row batch it splits by head only.
std::int64_t row_of(const Slice& s, bool varlen) {
  if (varlen) return s.first;
  if (s.row >= 0) return s.row;
  return s.head >= 0 && s.first == s.last ? s.first : -1;
}

// "sequence 3, head 1", "batch row 0, every head", "every batch row, head 2", ...
std::string slice_name(const Slice& s, bool varlen) {
  const std::int64_t row = row_of(s, varlen);
  const std::string rows = varlen ? fmt::format("sequence {}", row)
                           : row < 0 ? std::string("every batch row")
                                     : fmt::format("batch row {}", row);
  return fmt::format("{}, {}", rows, s.head < 0 ? std::string("every head") : fmt::format("head {}", s.head));
}

// The unit name of the slicer's plan: which axes its slices split.
std::string unit_name(const std::vector<SliceRecord>& records, bool varlen) {
  bool rows = false, heads = false;
  for (const SliceRecord& r : records) {
    rows = rows || row_of(r.slice, varlen) >= 0;
    heads = heads || r.slice.head >= 0;
  }
  if (!rows && !heads) return "all";
  const char* seq = varlen ? "n" : "b";
  if (rows && heads) return fmt::format("({},h)", seq);
  return rows ? fmt::format("({})", seq) : "(h)";
}

}  // namespace

OracleResult compute_oracle_values(const LayerEntry& layer, Form form, const TensorMap<double>& inputs,
                                   const Config& cfg, Direction direction, const OracleRequest& req, int chunk_size) {
  if (req.mode == OracleMode::mpfr) return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, "requested");
  if (form != Form::sequential)
    return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, "the dd tier serves the sequential form only");
  if (!has_runner(layer, form, Tier::dd, direction) || !has_runner(layer, form, Tier::fp64, direction))
    return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size,
                    fmt::format("no dd runner for {}'s sequential {} form", layer.spec.name, direction_name(direction)));

  const LayerSpec spec = direction_spec(layer.spec, direction);
  const LayerRunner dd = layer.runner(form, Tier::dd, direction), f64 = layer.runner(form, Tier::fp64, direction),
                    mpfr = layer.runner(form, Tier::mpfr, direction);
  const bool varlen = inputs.count(kCuSeqlens) > 0;
  std::mutex records_lock;
  std::map<std::size_t, SliceRecord> records;  // by plan index: the same whatever the thread order
  // One slice: dd and float64, judged row by row; MPFR in its place if any row
  // of any output escalates.
  const SliceRunner one = [&](const TensorMap<double>& part, const Config& c, const FormOptions& o,
                              const Slice& s) {
    LayerResult a = dd(part, c, o);
    const LayerResult x = f64(part, c, o);
    std::string why;
    for (const auto& [name, t] : a.values) {
      const TensorSpec* ts = spec.output(name);
      Tensor<double>& est = a.own_error[name];
      // Diagnostics of the arithmetic (GKA's kappa, resid) differ between tiers
      // by design and are never compared: they decide nothing.
      if (!ts || !ts->certifiable || !x.values.count(name)) {
        est = Tensor<double>(t.shape, 0.0);
        continue;
      }
      const std::string w = judge_rows(*ts, t, x.values.at(name), est, req.target_u);
      if (why.empty()) why = w;
    }
    SliceRecord rec{s, !why.empty(), "", 0.0};
    if (rec.escalated) {
      rec.reason = fmt::format("{}: {}", slice_name(s, varlen), why);
      LayerResult m = mpfr(part, c, o);
      for (const auto& [name, t] : m.values) m.own_error[name] = Tensor<double>(t.shape, 0.0);
      a = std::move(m);
    }
    // Outputs placed whole (per token or per sequence): each row lies within one
    // slice and keeps its bits when put back, so the largest ratio over slices is
    // the largest over rows, taken here on every core. Outputs summed over slices
    // (per-head gradients) are judged after the sum, below.
    for (auto it = a.own_error.begin(); it != a.own_error.end();) {
      const TensorSpec* ts = spec.output(it->first);
      if (!ts || !placed_whole(*ts)) {
        ++it;
        continue;
      }
      if (ts->certifiable && !rec.escalated)
        rec.max_error_over_target = std::max(
            rec.max_error_over_target, max_over_target(*ts, a.values.at(it->first), it->second, req.target_u));
      it = req.own_error ? std::next(it) : a.own_error.erase(it);
    }
    const std::lock_guard<std::mutex> lock(records_lock);
    records.emplace(s.index, std::move(rec));
    return a;
  };
  FormOptions fo;
  fo.bits = req.bits;
  fo.chunk_size = chunk_size;
  SliceOptions split;
  split.split = true;
  LayerResult all = run_sliced(spec, one, inputs, cfg, fo, split);

  std::vector<SliceRecord> plan;
  for (auto& [i, rec] : records) plan.push_back(std::move(rec));
  OracleResult r;
  r.values = std::move(all.values);
  r.own_error = std::move(all.own_error);
  r.working_bits = all.working_bits;
  OracleProvenance& p = r.provenance;
  p.unit = unit_name(plan, varlen);
  p.slices = static_cast<std::int64_t>(plan.size());
  for (const SliceRecord& rec : plan) {
    if (!rec.escalated) continue;
    p.escalated.push_back({row_of(rec.slice, varlen), rec.slice.head});
    if (p.reason.empty()) p.reason = rec.reason;  // the first in plan order
  }
  p.tier = p.escalated.empty()                  ? "dd"
           : p.escalated.size() == plan.size() ? fmt::format("mpfr:{}", req.bits)
                                                : fmt::format("dd+mpfr:{}", req.bits);
  for (const SliceRecord& rec : plan) p.max_error_over_target = std::max(p.max_error_over_target, rec.max_error_over_target);
  for (const auto& [name, t] : r.values)
    if (const TensorSpec* ts = spec.output(name); ts && ts->certifiable && !placed_whole(*ts) && r.own_error.count(name))
      p.max_error_over_target =
          std::max(p.max_error_over_target, max_over_target(*ts, t, r.own_error.at(name), req.target_u));
  if (!req.own_error) r.own_error.clear();
  return r;
}

}  // namespace ttr
