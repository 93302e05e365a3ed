#include "study/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <optional>

#include "gate/gate.hpp"

namespace ttr::study {
namespace {

constexpr int kSamples = 8;  // Monte Carlo runs of the error model, as the gate

// One layer at a group of points that share their inputs (same T and K, no
// transform): the oracles are computed once for the group (the judge caches them).
Rows sweep_case(const SweepDef& def, const LayerEntry& layer, const std::vector<SweepPoint>& group,
                std::uint64_t input_seed, std::uint64_t seed) {
  Rows rows;
  const LayerSpec& spec = layer.spec;
  const Config cfg = Config::make(spec, study_config(spec));  // GKA: its chunkwise solver, as the gate
  const SweepPoint& first = group.front();
  const Dims dims = dims_of(1, first.T, 2, first.K, first.K);
  auto emit = [&](const SweepPoint& pt, const std::string& direction, Tier dtype, Form form, double err,
                  const std::string& tensor, double ratio, double measured) {
    rows["sweep"].push_back({spec.name, pt.label, direction, std::string(tier_name(dtype)), std::string(form_name(form)),
                             std::int64_t{pt.T}, std::int64_t{pt.chunk}, err, tensor, ratio, measured,
                             fmt::format("{} {}", direction, tier_name(dtype))});
  };
  {  // forward: the kernel form under the dtype's policy
    TensorMap<double> in = draw_inputs(spec, dims, Regime{}, input_seed, def.name);
    double measured = std::nan("");
    if (def.transform) def.transform(layer, first, in, input_seed, measured);
    const Form form = kernel_form(layer);
    Judge judge(layer, in, cfg, Arith{Tier::mpfr, kOracleBits});
    for (const SweepPoint& pt : group)
      for (Tier d : pt.dtypes) {
        const TensorMap<double> cand = run_layer(layer, form, {d, 0}, in, cfg, pt.chunk).values;
        const CheckResult cr = judge_candidate(judge, cand, form, d, pt.chunk, Direction::forward, seed, kSamples);
        const auto [err, tensor] = max_rel_error(spec, cand, judge.oracle());
        emit(pt, "forward", d, form, err, tensor, max_ratio(cr), measured);
      }
  }
  if (layer.has_form(Form::sequential, Direction::backward)) {
    // backward: the sequential backward in the dtype (every operation rounded)
    TensorMap<double> in = draw_backward_inputs(spec, dims, Regime{}, input_seed, def.name);
    double measured = std::nan("");
    if (def.transform) def.transform(layer, first, in, input_seed, measured);
    std::optional<Judge> judge;
    for (const SweepPoint& pt : group) {
      if (!pt.backward) continue;
      if (!judge) judge.emplace(layer, in, cfg, Arith{Tier::mpfr, kOracleBits}, Direction::backward);
      for (Tier d : pt.dtypes) {
        const TensorMap<double> cand =
            run_layer(layer, Form::sequential, {d, 0}, in, cfg, pt.chunk, Direction::backward).values;
        const CheckResult cr =
            judge_candidate(*judge, cand, Form::sequential, d, pt.chunk, Direction::backward, seed, kSamples);
        const auto [err, tensor] = max_rel_error(judge->spec(), cand, judge->oracle());
        emit(pt, "backward", d, Form::sequential, err, tensor, max_ratio(cr), measured);
      }
    }
  }
  return rows;
}

std::vector<Claim> assess(const SweepDef& def, const Tables& t) {
  const Table& s = t.at("sweep");
  std::vector<Claim> claims;
  for (const std::string direction : {"forward", "backward"}) {
    double worst = 0;
    std::string where;
    int points = 0, over = 0;
    for (const Row& r : s.rows) {
      if (s.text(r, "direction") != direction) continue;
      ++points;
      const double q = s.num(r, "ratio");
      if (!(q <= kRatioThreshold)) ++over;
      if (!(q <= worst)) worst = q, where = fmt::format("{} {} {} = {}", s.text(r, "layer"), s.text(r, "dtype"),
                                                          def.axis, s.text(r, "x"));
    }
    if (points == 0) continue;
    claims.push_back({"ratio_" + direction, "docs/error-model.md (calibration)",
                      fmt::format("a correct {} keeps every error ratio under the threshold {} along {}",
                                  direction == "forward" ? "kernel" : "backward pass", kRatioThreshold, def.axis_label),
                      false, over == 0 ? Verdict::agrees : Verdict::disagrees,
                      fmt::format("{} of {} points above {}; largest ratio {} ({})", over, points, kRatioThreshold,
                                  num(worst), where)});
  }
  // How the relative error moves along the axis: at each point, the largest
  // forward relative error over layers and dtypes.
  std::vector<std::string> labels;
  for (const Row& r : s.rows)
    if (std::find(labels.begin(), labels.end(), s.text(r, "x")) == labels.end()) labels.push_back(s.text(r, "x"));
  std::string growth;
  for (const std::string& x : labels) {
    double worst = -1;
    std::string who;
    for (const Row& r : s.rows)
      if (s.text(r, "direction") == "forward" && s.text(r, "x") == x && !(s.num(r, "rel_err") <= worst))
        worst = s.num(r, "rel_err"), who = s.text(r, "layer") + " " + s.text(r, "dtype");
    growth += fmt::format("{}{} = {}: {} ({})", growth.empty() ? "largest forward relative error at " : "; ", def.axis,
                          x, num(worst), who);
  }
  claims.push_back({"growth", def.title, def.claim, false, Verdict::observed, growth});
  return claims;
}

}  // namespace

Study make_sweep(const SweepDef& def) {
  Study s;
  s.name = def.name;
  s.title = def.title;
  s.source = "every layer (oracles/layers/layers.def); the error model (docs/error-model.md)";
  s.claim = def.claim;
  s.plan = [def](const Options& opt) {
    Plan plan;
    const std::vector<SweepPoint> pts = def.points(opt.quick);
    nlohmann::json jp = nlohmann::json::array();
    for (const SweepPoint& p : pts) {
      std::vector<std::string> d;
      for (Tier t : p.dtypes) d.push_back(tier_name(t));
      jp.push_back({{def.axis, p.label}, {"T", p.T}, {"K", p.K}, {"V", p.K}, {"chunk_size", p.chunk}, {"dtypes", d},
                    {"backward", p.backward}});
    }
    std::vector<std::string> layers;
    for (const LayerEntry& e : registry())
      if (def.applies(e)) layers.push_back(e.spec.name);
    plan.config = {{"axis", def.axis}, {"points", jp}, {"B", 1}, {"H", 2}, {"layers", layers},
                   {"forward", "each layer's kernel form (chunk, else scan, else sequential) under the dtype's policy"},
                   {"backward", "the sequential backward form in the dtype (every operation rounded)"},
                   {"oracle", fmt::format("sequential form, MPFR {} bits", kOracleBits)},
                   {"model_samples", kSamples}, {"threshold", kRatioThreshold},
                   {"layer_config", "the gate's (gka: solver=chebyshev)"}};
    plan.tables = {{"sweep",
                    {"layer", "x", "direction", "dtype", "form", "T", "chunk", "rel_err", "tensor", "ratio",
                     def.measured_name.empty() ? "measured" : def.measured_name, "panel"},
                    fmt::format("per (layer, {}, direction, dtype): the largest relative error over the compared "
                                "tensors and the largest error ratio",
                                def.axis)}};
    const std::uint64_t input_seed = opt.seed;
    // Cases: one per (layer, group of points sharing inputs). Points share inputs
    // when they have the same T and K and the sweep transforms nothing (chunk
    // size, dtype): then one oracle serves them all.
    std::vector<std::vector<SweepPoint>> groups;
    for (const SweepPoint& p : pts) {
      auto same = [&](const std::vector<SweepPoint>& g) { return !def.transform && g[0].T == p.T && g[0].K == p.K; };
      auto it = std::find_if(groups.begin(), groups.end(), same);
      if (it == groups.end()) groups.push_back({p});
      else it->push_back(p);
    }
    for (const std::string& name : layers)
      for (const std::vector<SweepPoint>& g : groups) {
        const LayerEntry* e = &find_layer(name);
        std::string id = fmt::format("{}/{}=", name, def.axis);
        for (std::size_t i = 0; i < g.size(); ++i) id += (i ? "," : "") + g[i].label;
        plan.cases.push_back({id, [def, e, g, input_seed](std::uint64_t seed) { return sweep_case(def, *e, g, input_seed, seed); }});
      }
    plan.figures = {
        {def.name + "_ratio", def.title + ": error ratio", "sweep", "x", {"ratio"}, {}, "layer", "panel", {}, def.logx,
         true, def.axis_label, "largest error ratio (error / model)", {{kRatioThreshold, "threshold 8"}},
         "One line per layer; panels: direction and dtype. Above the threshold a kernel fails the gate."},
        {def.name + "_error", def.title + ": relative error", "sweep", "x", {"rel_err"}, {}, "layer", "panel", {},
         def.logx, true, def.axis_label, "||x - x*|| / ||x*|| (worst tensor)", {}, "One line per layer."}};
    plan.assess = [def](const Tables& t) { return assess(def, t); };
    plan.conclusion = [def](const Tables&, const std::vector<Claim>& c) {
      std::string s;
      for (const Claim& cl : c) s += cl.evidence + ". ";
      return s;
    };
    return plan;
  };
  return s;
}

}  // namespace ttr::study
