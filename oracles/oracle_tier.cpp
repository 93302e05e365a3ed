#include "oracles/oracle_tier.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>

#include "oracles/error.hpp"

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

std::int64_t offset_of(const Shape& s, const std::vector<std::int64_t>& idx) {
  std::int64_t off = 0;
  for (std::size_t d = 0; d < s.size(); ++d) off = off * s[d] + idx[d];
  return off;
}

enum class Unit { bh, h, all };

const char* unit_name(Unit u) { return u == Unit::bh ? "(b,h)" : u == Unit::h ? "(h)" : "all"; }

// The escalation unit of these tensors: (b, h) when every tensor with a head
// dimension also has a batch dimension; (h) when some has a head dimension only
// (its gradient sums over the batch); everything when a tensor has no head
// dimension, is unknown to the spec, or its rank differs from its dims.
Unit unit_of(const LayerSpec& spec, const TensorMap<double>& inputs, const TensorMap<double>& outputs) {
  Unit u = Unit::bh;
  auto visit = [&](const TensorSpec* ts, const Tensor<double>& t) {
    if (!ts || ts->dims.size() != t.shape.size()) return Unit::all;
    const Axes a = axes_of(*ts);
    if (a.h < 0) return Unit::all;
    return a.b < 0 ? Unit::h : Unit::bh;
  };
  for (const auto& [name, t] : inputs) u = std::max(u, visit(spec.input(name), t));
  for (const auto& [name, t] : outputs) u = std::max(u, visit(spec.output(name), t));
  return u;
}

Tensor<double> slice_tensor(const TensorSpec& ts, const Tensor<double>& t, std::int64_t b, std::int64_t h) {
  const Axes a = axes_of(ts);
  Tensor<double> out;
  out.shape = t.shape;
  if (a.b >= 0 && b >= 0) out.shape[a.b] = 1;
  if (a.h >= 0) out.shape[a.h] = 1;
  out.data.reserve(static_cast<std::size_t>(numel(out.shape)));
  for_each_index(t.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    if (a.b >= 0 && b >= 0 && idx[a.b] != b) return;
    if (a.h >= 0 && idx[a.h] != h) return;
    out.data.push_back(t.data[e]);
  });
  return out;
}

}  // namespace

TensorMap<double> slice_inputs(const LayerSpec& spec, const TensorMap<double>& inputs, std::int64_t b, std::int64_t h) {
  TensorMap<double> out;
  for (const auto& [name, t] : inputs) {
    const TensorSpec* ts = spec.input(name);
    if (!ts) throw std::logic_error(fmt::format("slice_inputs: '{}' is not an input of {}", name, spec.name));
    out[name] = slice_tensor(*ts, t, b, h);
  }
  return out;
}

void scatter_outputs(const LayerSpec& spec, const TensorMap<double>& slice, std::int64_t b, std::int64_t h,
                     TensorMap<double>& full) {
  for (const auto& [name, s] : slice) {
    const TensorSpec* ts = spec.output(name);
    auto it = full.find(name);
    if (!ts || it == full.end()) continue;
    const Axes a = axes_of(*ts);
    Tensor<double>& f = it->second;
    std::vector<std::int64_t> at;
    for_each_index(s.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
      at = idx;
      if (a.b >= 0 && b >= 0) at[a.b] = b;
      if (a.h >= 0) at[a.h] = h;
      f.data[offset_of(f.shape, at)] = s.data[e];
    });
  }
}

namespace {

// Per row of one output: the sums the rule needs.
struct RowSums {
  double diff2 = 0, ref2 = 0, est2 = 0;
  bool nonfinite = false;
  std::int64_t b = 0, t = -1, h = 0;
};

struct Decision {
  std::set<std::pair<std::int64_t, std::int64_t>> units;  // (b or −1, h), or (−1, −1) for all
  std::string first_reason;
};

// max over rows of ‖own_error_row‖ / (target_u ‖value_row‖): what the provenance
// records, after escalation (MPFR rows count 0).
double max_over_target(const TensorSpec& ts, const Tensor<double>& v, const Tensor<double>& est, double target_u) {
  const Axes a = axes_of(ts);
  const std::int64_t nb = a.b >= 0 ? v.shape[a.b] : 1, nt = a.t >= 0 ? v.shape[a.t] : 1,
                     nh = a.h >= 0 ? v.shape[a.h] : 1;
  std::vector<double> e2(static_cast<std::size_t>(nb * nt * nh), 0.0), o2(e2.size(), 0.0);
  for_each_index(v.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    const std::int64_t b = a.b >= 0 ? idx[a.b] : 0, t = a.t >= 0 ? idx[a.t] : 0, h = a.h >= 0 ? idx[a.h] : 0;
    const auto row = static_cast<std::size_t>((b * nt + t) * nh + h);
    e2[row] += est.data[e] * est.data[e];
    if (std::isfinite(v.data[e])) o2[row] += v.data[e] * v.data[e];
  });
  double m = 0.0;
  for (std::size_t i = 0; i < e2.size(); ++i)
    if (o2[i] > 0) m = std::max(m, std::sqrt(e2[i]) / (target_u * std::sqrt(o2[i])));
  return m;
}

void judge_rows(const TensorSpec& ts, const Tensor<double>& dd, const Tensor<double>& f64, Tensor<double>& est,
                Unit unit, double target_u, Decision& d) {
  const Axes a = axes_of(ts);
  const std::int64_t nb = a.b >= 0 ? dd.shape[a.b] : 1, nt = a.t >= 0 ? dd.shape[a.t] : 1,
                     nh = a.h >= 0 ? dd.shape[a.h] : 1;
  std::vector<RowSums> rows(static_cast<std::size_t>(nb * nt * nh));
  est = Tensor<double>(dd.shape, 0.0);
  for_each_index(dd.shape, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    const std::int64_t b = a.b >= 0 ? idx[a.b] : 0, t = a.t >= 0 ? idx[a.t] : 0, h = a.h >= 0 ? idx[a.h] : 0;
    RowSums& r = rows[static_cast<std::size_t>((b * nt + t) * nh + h)];
    r.b = b;
    r.t = a.t >= 0 ? t : -1;
    r.h = h;
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
    else if (diff > kOracleGuard * ref) why = fmt::format("float64 differs from double-double by {:.3g} relative (> 2^-20: not first order)", ref > 0 ? diff / ref : INFINITY);
    else if (e > kOracleEscalationFraction * target_u * ref) why = "estimated own error above 1/1000 of the bound";
    if (why.empty()) continue;
    const std::pair<std::int64_t, std::int64_t> key =
        unit == Unit::all ? std::pair<std::int64_t, std::int64_t>{-1, -1}
                          : std::pair<std::int64_t, std::int64_t>{unit == Unit::h ? -1 : r.b, r.h};
    if (d.units.insert(key).second && d.first_reason.empty())
      d.first_reason = fmt::format("'{}' row (b={}, t={}, h={}): {}", ts.name, r.b, r.t, r.h, why);
  }
}

OracleResult all_mpfr(const LayerEntry& layer, Form form, const TensorMap<double>& inputs, const Config& cfg,
                      Direction direction, const OracleRequest& req, int chunk_size, std::string reason) {
  OracleResult r;
  LayerResult m = run_layer(layer, form, {Tier::mpfr, req.bits}, inputs, cfg, chunk_size, direction);
  r.values = std::move(m.values);
  r.working_bits = m.working_bits;
  r.provenance.tier = fmt::format("mpfr:{}", req.bits);
  r.provenance.unit = "all";
  r.provenance.slices = 1;
  r.provenance.reason = std::move(reason);
  return r;
}

bool has_runner(const LayerEntry& layer, Form form, Tier t, Direction d) {
  for (const FormImpl& x : layer.forms)
    if (x.form == form && x.direction == d) return x.runners[static_cast<std::size_t>(t)] != nullptr;
  return false;
}

}  // namespace

OracleResult compute_oracle_values(const LayerEntry& layer, Form form, const TensorMap<double>& inputs,
                                   const Config& cfg, Direction direction, const OracleRequest& req, int chunk_size) {
  if (req.mode == OracleMode::mpfr) return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, "requested");
  if (form != Form::sequential)
    return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, "the dd tier serves the sequential form only");
  if (!has_runner(layer, form, Tier::dd, direction) || !has_runner(layer, form, Tier::fp64, direction))
    return all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, "no dd runner for this layer");

  const LayerSpec spec = direction_spec(layer.spec, direction);
  LayerResult dd = run_layer(layer, form, {Tier::dd, 0}, inputs, cfg, chunk_size, direction);
  const LayerResult f64 = run_layer(layer, form, {Tier::fp64, 0}, inputs, cfg, chunk_size, direction);
  const Unit unit = unit_of(spec, inputs, dd.values);

  OracleResult r;
  r.working_bits = dd.working_bits;
  Decision d;
  std::set<std::pair<std::int64_t, std::int64_t>> all_units;
  for (const auto& [name, t] : dd.values) {
    const TensorSpec* ts = spec.output(name);
    Tensor<double>& est = r.own_error[name];
    if (!ts || !f64.values.count(name)) {
      est = Tensor<double>(t.shape, 0.0);
      continue;
    }
    // Units present in this tensor (for the count of slices).
    if (unit != Unit::all) {
      const Axes a = axes_of(*ts);
      const std::int64_t nb = unit == Unit::bh && a.b >= 0 ? t.shape[a.b] : 1, nh = t.shape[a.h];
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t h = 0; h < nh; ++h) all_units.insert({unit == Unit::h ? -1 : b, h});
    }
    // Diagnostics of the arithmetic (GKA's kappa, resid) differ between tiers by
    // design and are never compared: they decide nothing.
    if (!ts->certifiable) {
      est = Tensor<double>(t.shape, 0.0);
      continue;
    }
    judge_rows(*ts, t, f64.values.at(name), est, unit, req.target_u, d);
  }
  if (unit == Unit::all) all_units.insert({-1, -1});

  r.values = std::move(dd.values);
  OracleProvenance& p = r.provenance;
  p.unit = unit_name(unit);
  p.slices = static_cast<std::int64_t>(all_units.size());
  if (!d.units.empty() && (unit == Unit::all || d.units.size() == all_units.size())) {
    OracleResult m = all_mpfr(layer, form, inputs, cfg, direction, req, chunk_size, d.first_reason);
    m.provenance.unit = p.unit;
    m.provenance.slices = p.slices;
    for (const auto& [b, h] : d.units) m.provenance.escalated.push_back({b, h});
    for (auto& [name, t] : r.own_error) m.own_error[name] = Tensor<double>(t.shape, 0.0);
    return m;
  }
  for (const auto& [b, h] : d.units) {
    const TensorMap<double> sub = slice_inputs(spec, inputs, b, h);
    const LayerResult m = run_layer(layer, form, {Tier::mpfr, req.bits}, sub, cfg, chunk_size, direction);
    scatter_outputs(spec, m.values, b, h, r.values);
    TensorMap<double> zeros;
    for (const auto& [name, t] : m.values) zeros[name] = Tensor<double>(t.shape, 0.0);
    scatter_outputs(spec, zeros, b, h, r.own_error);
    p.escalated.push_back({b, h});
  }
  p.tier = p.escalated.empty() ? "dd" : fmt::format("dd+mpfr:{}", req.bits);
  p.reason = d.first_reason;
  for (const auto& [name, t] : r.values)
    if (const TensorSpec* ts = spec.output(name); ts && ts->certifiable && r.own_error.count(name))
      p.max_error_over_target = std::max(p.max_error_over_target, max_over_target(*ts, t, r.own_error.at(name), req.target_u));
  return r;
}

}  // namespace ttr
