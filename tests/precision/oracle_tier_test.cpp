// The double-double tier and the oracle's tier decision (oracles/oracle_tier.hpp,
// docs/oracle-tiers.md):
//   * dd is within a hand-derived rounding bound of the exact result (linear
//     attention, exact reference in MPFR-256), and agrees with MPFR to a float64
//     ulp on every layer's sequential form, forward and backward;
//   * the first-order estimate of dd's own error, 16·2^-51·(|o_dd − o_64| + 2^-53|o|),
//     is never below dd's actual error (against MPFR-256) on ill-conditioned inputs;
//   * an ill-conditioned slice escalates to MPFR (and only that slice); a benign
//     batch does not;
//   * the decision's unit is the slicer's (sequence, head): (b,h), (h) where a
//     per-head parameter's gradient sums over the batch, (n,h) under varlen;
//     the result is the same whatever the thread count; without a dd runner in
//     a direction, auto takes MPFR and says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "gate/judge.hpp"
#include "oracles/config.hpp"
#include "oracles/error.hpp"
#include "oracles/layers/gated_delta_rule.hpp"
#include "oracles/layers/linear_attn.hpp"
#include "oracles/oracle_tier.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/double_double.hpp"
#include "reference/core/multiprecision.hpp"
#include "tests/support/make_inputs.hpp"

namespace ttr::test {
namespace {

template <class T>
TensorMap<T> convert(const TensorMap<double>& in) {
  TensorMap<T> out;
  for (const auto& [name, t] : in) {
    Tensor<T>& y = out[name];
    y.shape = t.shape;
    for (double x : t.data) y.data.push_back(from_double<T>(x));
  }
  return out;
}

// A dd value exactly, in MPFR-256 (hi + lo needs at most 106 + exponent-gap bits
// for normalised pairs; at 256 bits the sum is exact).
mpfr_real exact(const dd_real& x) { return mpfr_real(x.x[0]) + mpfr_real(x.x[1]); }

template <class Layer, class T>
TensorMap<T> sequential(const TensorMap<double>& in, const Config& cfg) {
  TensorMap<T> out;
  Layer::template sequential<T>(convert<T>(in), cfg, FormOptions{}, out);
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Linear attention o_t[j] = s·Σ_i q_t[i] Σ_{r≤t} k_r[i] v_r[j]: t products and sums
// for S_t[i][j], K more for the readout, one for the scale. The standard bound
// (Higham, Accuracy and Stability, §3.1) with per-operation relative error u:
//   |fl(o) − o| ≤ γ_N · s · Σ_i |q_t[i]| Σ_{r≤t} |k_r[i]| |v_r[j]|,  N = t + K + 2,
// γ_N = N u / (1 − N u). QD as Debian builds it (sloppy add, Cray-style) has
// per-operation error ≤ 2·2^-104 on products and on each summand of a sum
// (reference/core/double_double.hpp); u = 2^-102 leaves a factor 2 of margin.
TEST(OracleTier, DoubleDoubleWithinHandDerivedBoundOfLinearAttention) {
  const std::int64_t T = 24, K = 8, V = 4;
  TensorMap<double> in;
  in["q"] = uniform({1, T, 1, K}, 11, -1, 1);
  in["k"] = uniform({1, T, 1, K}, 12, -1, 1);
  in["v"] = uniform({1, T, 1, V}, 13, -1, 1);
  const Config cfg = Config::make(find_layer("linear_attn").spec, {{"scale", "0.25"}});
  precision_control<mpfr_real>::set_bits(256);
  const auto dd = sequential<layers::linear_attn, dd_real>(in, cfg);
  const auto mp = sequential<layers::linear_attn, mpfr_real>(in, cfg);
  const double u = 0x1p-102;
  double worst = 0.0, largest_error = 0.0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < V; ++j) {
      double terms = 0.0;
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t r = 0; r <= t; ++r)
          terms += std::fabs(in["q"].data[t * K + i]) * std::fabs(in["k"].data[r * K + i]) *
                   std::fabs(in["v"].data[r * V + j]);
      const double N = static_cast<double>(t + 1 + K + 2), gamma = N * u / (1 - N * u);
      const double bound = gamma * 0.25 * terms * (1 + 0x1p-50);  // terms summed in double: +2^-50 relative
      const std::size_t e = static_cast<std::size_t>(t * V + j);
      const double err = to_double(mpfr_real(abs(exact(dd.at("o").data[e]) - mp.at("o").data[e])));
      EXPECT_LE(err, bound) << "t=" << t << " j=" << j;
      worst = std::max(worst, err / bound);
      largest_error = std::max(largest_error, err);
    }
  EXPECT_GT(largest_error, 0.0) << "dd exact everywhere: the case tests nothing";
  RecordProperty("worst_error_over_bound", std::to_string(worst));
}

// Every layer's dd sequential form, forward and backward, rounds to within one
// float64 ulp of the MPFR-256 oracle on the tiny suite's inputs (benign:
// dd's own error is ~1e-30 relative, far inside half an ulp except at ties).
TEST(OracleTier, DoubleDoubleAgreesWithMpfrToAnUlpOnEveryLayer) {
  int compared = 0;
  for (const LayerEntry& layer : registry()) {
    if (!layer.has_form(Form::sequential)) continue;
    for (const VectorCase& c : suite_cases(layer.spec, "tiny"))
      for (Direction d : {Direction::forward, Direction::backward}) {
        if (!layer.has_form(Form::sequential, d)) continue;
        const TensorMap<double> in = d == Direction::forward ? generate_inputs(layer.spec, c, 3)
                                                             : generate_backward_inputs(layer.spec, c, 3);
        const Config cfg = Config::make(layer.spec, c.config);
        const LayerResult dd = run_layer(layer, Form::sequential, {Tier::dd, 0}, in, cfg, 64, d);
        const LayerResult mp = run_layer(layer, Form::sequential, {Tier::mpfr, 256}, in, cfg, 64, d);
        EXPECT_EQ(dd.working_bits, 106u);
        const LayerSpec spec = direction_spec(layer.spec, d);
        for (const auto& [name, want] : mp.values) {
          const TensorSpec* ts = spec.output(name);
          if (!ts || !ts->certifiable) continue;
          const Tensor<double>& got = dd.values.at(name);
          ASSERT_EQ(got.shape, want.shape);
          for (std::size_t e = 0; e < want.data.size(); ++e) {
            const double w = want.data[e], g = got.data[e];
            if (!std::isfinite(w)) {
              EXPECT_TRUE(same_bits(w, g) || (std::isnan(w) && std::isnan(g))) << layer.spec.name << " " << name;
              continue;
            }
            EXPECT_LE(std::fabs(g - w), 0x1p-52 * std::fabs(w) + 1e-300)
                << layer.spec.name << " " << direction_name(d) << " " << c.name << " " << name << "[" << e << "]";
          }
          ++compared;
        }
      }
  }
  EXPECT_GT(compared, 40);
}

// The chunk and scan forms have no dd runner (tiers.def: TTR_TIER_FORMS), and
// say so; the oracle then takes MPFR.
TEST(OracleTier, OnlySequentialFormsHaveDdRunners) {
  const LayerEntry& gdn = find_layer("gated_delta_rule");
  EXPECT_NO_THROW(gdn.runner(Form::sequential, Tier::dd, Direction::backward));
  try {
    gdn.runner(Form::chunk, Tier::dd);
    ADD_FAILURE() << "a dd chunk runner exists";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no dd runner"), std::string::npos) << e.what();
  }
  const TensorMap<double> in = gated_inputs(1, 8, 1, 4, 4, 5, {});
  const Config cfg = Config::make(gdn.spec, {});
  const OracleResult r = compute_oracle_values(gdn, Form::chunk, in, cfg, Direction::forward, {});
  EXPECT_EQ(r.provenance.tier, "mpfr:256");
  EXPECT_EQ(r.provenance.reason, "the dd tier serves the sequential form only");
}

struct Regime {
  const char* name;
  TensorMap<double> in;
};

// Rows of k scaled to unit L2 norm (FLA's use_qk_l2norm_in_kernel), so that the
// writes I − β k kᵀ contract for β ≤ 1.
void normalise_keys(Tensor<double>& k) {
  const std::int64_t K = k.shape.back();
  for (std::size_t r = 0; r < k.data.size(); r += static_cast<std::size_t>(K)) {
    double n = 0;
    for (std::int64_t i = 0; i < K; ++i) n += k.data[r + i] * k.data[r + i];
    for (std::int64_t i = 0; i < K; ++i) k.data[r + i] /= std::sqrt(n);
  }
}

// Inputs on which float64 loses digits: unit keys within 1e-6 of one direction
// per head, decays 1 − 1e-4 and β = 0.999 (each write nearly erases the last: the
// state along the shared direction is a long chain of near-cancellations), and
// values of ±1e6 alternating per token without decay (the state is a sum of large
// terms that cancel).
std::vector<Regime> adversarial_regimes() {
  std::vector<Regime> out;
  {
    TensorMap<double> in = gated_inputs(1, 96, 2, 8, 8, 21, {});
    auto& k = in["k"];
    const Tensor<double> base = uniform({1, 1, 2, 8}, 22, -1, 1), noise = uniform(k.shape, 23, -1, 1);
    for (std::size_t e = 0; e < k.data.size(); ++e) k.data[e] = base.data[e % 16] + 1e-6 * noise.data[e];
    normalise_keys(k);
    for (double& g : in["g"].data) g = -1e-4;
    for (double& b : in["beta"].data) b = 0.999;
    out.push_back({"gated_delta_rule near-collinear unit keys, decay 1 - 1e-4, beta 0.999", std::move(in)});
  }
  {
    TensorMap<double> in = gated_inputs(1, 64, 2, 8, 8, 31, {});
    normalise_keys(in["k"]);
    auto& v = in["v"];
    for (std::size_t e = 0; e < v.data.size(); ++e) v.data[e] = ((e / 16) % 2 ? -1e6 : 1e6) * (1 + v.data[e] * 1e-3);
    for (double& g : in["g"].data) g = 0.0;
    out.push_back({"gated_delta_rule values of 1e6 with alternating signs, no decay", std::move(in)});
  }
  {
    TensorMap<double> in = gated_inputs(1, 256, 2, 8, 8, 41, {});
    auto& k = in["k"];
    const Tensor<double> base = uniform({1, 1, 2, 8}, 42, -1, 1), noise = uniform(k.shape, 43, -1, 1);
    for (std::size_t e = 0; e < k.data.size(); ++e) k.data[e] = base.data[e % 16] + 1e-9 * noise.data[e];
    normalise_keys(k);
    for (double& g : in["g"].data) g = 0.0;
    for (double& b : in["beta"].data) b = 1.0;
    auto& v = in["v"];
    for (std::size_t e = 0; e < v.data.size(); ++e) v.data[e] = ((e / 16) % 2 ? -1e4 : 1e4) * (1 + v.data[e] * 1e-3);
    out.push_back({"gated_delta_rule keys within 1e-9, beta 1, no decay, values 1e4 alternating, T 256", std::move(in)});
  }
  return out;
}

// The estimate per row, as oracle_tier.cpp forms it, against dd's actual error
// measured in MPFR-256 with dd's full 106 bits.
TEST(OracleTier, EstimateNeverBelowActualErrorOnIllConditionedInputs) {
  const LayerEntry& gdn = find_layer("gated_delta_rule");
  const Config cfg = Config::make(gdn.spec, {});
  precision_control<mpfr_real>::set_bits(256);
  for (const Regime& reg : adversarial_regimes()) {
    const auto dd = sequential<layers::gated_delta_rule, dd_real>(reg.in, cfg);
    const auto f64 = sequential<layers::gated_delta_rule, double>(reg.in, cfg);
    const auto mp = sequential<layers::gated_delta_rule, mpfr_real>(reg.in, cfg);
    const auto& o_dd = dd.at("o");
    const std::int64_t V = o_dd.shape[3], rows = o_dd.numel() / V;
    double worst = 0.0, fp64_loss = 0.0;
    int rows_with_error = 0;
    for (std::int64_t row = 0; row < rows; ++row) {
      double actual2 = 0.0, est2 = 0.0, diff2 = 0.0, ref2 = 0.0;
      for (std::int64_t j = row * V; j < (row + 1) * V; ++j) {
        const double rounded = to_double(o_dd.data[j]), x = f64.at("o").data[j];
        const double a = to_double(mpfr_real(exact(o_dd.data[j]) - mp.at("o").data[j]));
        const double e = kOracleEstimateSafety * kDdOverFp64 * (std::fabs(rounded - x) + 0x1p-53 * std::fabs(rounded));
        actual2 += a * a;
        est2 += e * e;
        diff2 += (rounded - x) * (rounded - x);
        ref2 += rounded * rounded;
      }
      const double actual = std::sqrt(actual2), est = std::sqrt(est2);
      if (actual > 0) ++rows_with_error;
      EXPECT_LE(actual, est) << reg.name << " row " << row;
      if (est > 0) worst = std::max(worst, actual / est);
      if (ref2 > 0) fp64_loss = std::max(fp64_loss, std::sqrt(diff2 / ref2));
    }
    // The regime is adversarial (float64 ~2^11 and more above its 2^-53; measured
    // 2.6e-13 to 1.3e-12) and dd not exact.
    EXPECT_GT(fp64_loss, 1e-13) << reg.name;
    EXPECT_GT(rows_with_error, 0) << reg.name;
    std::printf("[ estimator ] %s: float64 relative error up to %.3g; dd actual/estimate at most %.3g\n", reg.name,
                fp64_loss, worst);
  }
}

// One (b, h) slice of a linear-attention batch holds 1e17 + 1 − 1e17 (float64
// returns 0, the truth is 1): that slice, and only it, escalates to MPFR, and its
// values are then MPFR's bit for bit; the judge reports it.
TEST(OracleTier, IllConditionedSliceEscalatesAndOnlyIt) {
  const LayerEntry& la = find_layer("linear_attn");
  const std::int64_t B = 2, T = 3, H = 2, K = 2, V = 2;
  TensorMap<double> in;
  in["q"] = Tensor<double>({B, T, H, K}, 0.5);
  in["k"] = Tensor<double>({B, T, H, K}, 0.5);
  in["v"] = uniform({B, T, H, V}, 41, -1, 1);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < V; ++j) in["v"].data[i4(in["v"].shape, 1, t, 0, j)] = t == 0 ? 1e17 : t == 1 ? 1.0 : -1e17;
  const Config cfg = Config::make(la.spec, {{"scale", "1"}});
  const OracleResult r = compute_oracle_values(la, Form::sequential, in, cfg, Direction::forward, {});
  EXPECT_EQ(r.provenance.tier, "dd+mpfr:256");
  EXPECT_EQ(r.provenance.unit, "(b,h)");
  EXPECT_EQ(r.provenance.slices, B * H);
  ASSERT_EQ(r.provenance.escalated.size(), 1u);
  EXPECT_EQ(r.provenance.escalated[0].b, 1);
  EXPECT_EQ(r.provenance.escalated[0].h, 0);
  EXPECT_NE(r.provenance.reason.find("not first order"), std::string::npos) << r.provenance.reason;
  const LayerResult mp = run_layer(la, Form::sequential, {Tier::mpfr, 256}, in, cfg);
  const Tensor<double>& o = r.values.at("o");
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < V; ++j) {
      const std::size_t e = i4(o.shape, 1, t, 0, j);
      EXPECT_TRUE(same_bits(o.data[e], mp.values.at("o").data[e]));
      EXPECT_EQ(r.own_error.at("o").data[e], 0.0);
    }
  EXPECT_EQ(o.data[i4(o.shape, 1, 2, 0, 0)], 0.5 * 0.5 * 2);  // q·k = 0.5, Σ v = 1 (per channel j = 0)
  // The judge carries it into the check.
  const TensorMap<double> cand = mp.values;
  JudgeOptions jo;
  jo.model.form = Form::chunk;
  jo.model.dtype = Tier::fp32;
  const CheckResult c = judge(la, in, cfg, cand, jo);
  EXPECT_EQ(c.oracle.provenance.tier, "dd+mpfr:256");
  ASSERT_EQ(c.oracle.provenance.escalated.size(), 1u);
  EXPECT_TRUE(std::isfinite(c.oracle.error_ratio));
  EXPECT_LT(c.oracle.error_ratio, kOracleEscalationFraction);
  // --oracle-tier mpfr: MPFR throughout, nothing estimated.
  jo.oracle_mode = OracleMode::mpfr;
  const CheckResult m = judge(la, in, cfg, cand, jo);
  EXPECT_EQ(m.oracle.provenance.tier, "mpfr:256");
  EXPECT_TRUE(std::isnan(m.oracle.error_ratio));
}

// A benign batch (the tiny/demo-like regime): nothing escalates, the estimated
// own error is far below 1/1000 of float64's u·‖o‖, and the values are MPFR's to
// an ulp.
TEST(OracleTier, BenignBatchStaysDoubleDouble) {
  const LayerEntry& gdn = find_layer("gated_delta_rule");
  const TensorMap<double> in = gated_inputs(2, 64, 2, 16, 16, 51, {.with_h0 = true});
  const Config cfg = Config::make(gdn.spec, {});
  const OracleResult r = compute_oracle_values(gdn, Form::sequential, in, cfg, Direction::forward, {});
  EXPECT_EQ(r.provenance.tier, "dd");
  EXPECT_TRUE(r.provenance.escalated.empty());
  EXPECT_EQ(r.provenance.slices, 4);
  EXPECT_GT(r.provenance.max_error_over_target, 0.0);
  EXPECT_LT(r.provenance.max_error_over_target, kOracleEscalationFraction);
  EXPECT_EQ(r.working_bits, 106u);
}

// Per-head parameters (the preconditioned layers' log_atk_scale [H], KLA-K's
// a_bar) have gradients summed over the batch: the slicer keeps the batch rows
// of a head together, so the unit of the decision is (h), one per head. (That a
// slice's run equals the whole batch's bit for bit, which makes escalation
// exact, is the slicer's own test: Slices.HeadsAndRowsAreIndependentInEveryLayer.)
TEST(OracleTier, PerHeadParametersMakeTheUnitAHead) {
  int layers = 0;
  for (const LayerEntry& layer : registry())
    for (Direction d : {Direction::forward, Direction::backward}) {
      if (!layer.has_form(Form::sequential, d)) continue;
      VectorCase c = suite_cases(layer.spec, "tiny").back();
      c.dims = {{"B", 2}, {"T", 5}, {"H", 3}, {"K", 3}, {"V", 2}, {"N", 3}, {"D", 2}};
      const LayerSpec spec = direction_spec(layer.spec, d);
      const TensorMap<double> in =
          d == Direction::forward ? generate_inputs(layer.spec, c, 7) : generate_backward_inputs(layer.spec, c, 7);
      bool per_head_gradient = false;
      for (const TensorSpec& ts : spec.outputs)
        per_head_gradient = per_head_gradient || (!ts.dims.empty() && ts.dims.front() == "H");
      const OracleResult r = compute_oracle_values(layer, Form::sequential, in, Config::make(layer.spec, c.config), d, {});
      EXPECT_EQ(r.provenance.unit, per_head_gradient ? "(h)" : "(b,h)") << layer.spec.name << " " << direction_name(d);
      EXPECT_EQ(r.provenance.slices, per_head_gradient ? 3 : 6) << layer.spec.name << " " << direction_name(d);
      layers += per_head_gradient ? 1 : 0;
    }
  EXPECT_GE(layers, 2);  // at least precond_* and kla_kalman backward
}

// max over rows of ‖own error‖ / (2^-53 ‖value‖), rows being (batch row, token,
// head) — every one of those axes the output has — written out here independently
// of oracles/oracle_tier.cpp.
double largest_row_ratio(const TensorSpec& ts, const Tensor<double>& v, const Tensor<double>& est) {
  std::map<std::vector<std::int64_t>, std::pair<double, double>> rows;  // (b, t, h) -> (Σ est², Σ o²)
  std::vector<std::int64_t> idx(v.shape.size(), 0);
  for (std::size_t e = 0; e < v.data.size(); ++e) {
    std::vector<std::int64_t> key(3, 0);
    for (std::size_t a = 0; a < ts.dims.size() && a < idx.size(); ++a)
      if (ts.dims[a] == "B") key[0] = idx[a];
      else if (ts.dims[a] == "T") key[1] = idx[a];
      else if (ts.dims[a] == "H") key[2] = idx[a];
    auto& [e2, o2] = rows[key];
    e2 += est.data[e] * est.data[e];
    if (std::isfinite(v.data[e])) o2 += v.data[e] * v.data[e];
    for (std::size_t a = idx.size(); a-- > 0;)
      if (++idx[a] < v.shape[a]) break;
      else idx[a] = 0;
  }
  double m = 0.0;
  for (const auto& [key, sums] : rows)
    if (sums.second > 0) m = std::max(m, std::sqrt(sums.first) / (0x1p-53 * std::sqrt(sums.second)));
  return m;
}

// Without own_error (the oracle command's request when not certified) the slices
// keep only their largest row ratio: the values are the same bits, and the largest
// ratio is the one recomputed here from the full run's own_error, row by row —
// rows are (batch row, token, head), every axis the output has, so per-head
// gradients (summed over batch rows) are judged after the sum.
TEST(OracleTier, WithoutOwnErrorTheSameValuesAndLargestRatio) {
  int layers = 0, summed = 0;
  for (const LayerEntry& layer : registry())
    for (Direction d : {Direction::forward, Direction::backward})
      for (bool varlen : {false, true}) {
      if (!layer.has_form(Form::sequential, d)) continue;
      // Two batch rows split by head; or a varlen batch of one- and five-token
      // sequences, where per-head gradients are summed over the sequences.
      VectorCase c = varlen ? suite_cases(layer.spec, "varlen").at(1) : suite_cases(layer.spec, "tiny").back();
      c.dims = {{"B", varlen ? 1 : 2}, {"T", 5}, {"H", 3}, {"K", 3}, {"V", 2}, {"N", 3}, {"D", 2}};
      if (varlen) {
        c.regime.cu_seqlens = {0, 1, 1, 2, 7};
        c.dims["T"] = 7;
      }
      const LayerSpec spec = direction_spec(layer.spec, d);
      const TensorMap<double> in =
          d == Direction::forward ? generate_inputs(layer.spec, c, 9) : generate_backward_inputs(layer.spec, c, 9);
      const Config cfg = Config::make(layer.spec, c.config);
      const std::string what = layer.spec.name + " " + direction_name(d) + (varlen ? " varlen" : "");
      OracleRequest lean;
      lean.own_error = false;
      const OracleResult full = compute_oracle_values(layer, Form::sequential, in, cfg, d, {});
      const OracleResult r = compute_oracle_values(layer, Form::sequential, in, cfg, d, lean);
      EXPECT_TRUE(r.own_error.empty()) << what;
      ASSERT_EQ(r.values.size(), full.values.size()) << what;
      for (const auto& [name, t] : full.values)
        for (std::size_t e = 0; e < t.data.size(); ++e)
          ASSERT_TRUE(same_bits(r.values.at(name).data[e], t.data[e])) << what << " " << name << "[" << e << "]";
      EXPECT_EQ(r.provenance.tier, full.provenance.tier) << what;
      double want = 0.0;
      for (const auto& [name, v] : full.values) {
        const TensorSpec* ts = spec.output(name);
        if (!ts || !ts->certifiable || !full.own_error.count(name)) continue;
        want = std::max(want, largest_row_ratio(*ts, v, full.own_error.at(name)));
      }
      EXPECT_GT(want, 0.0) << what;  // dd rows with an estimate: the comparison below has something to compare
      // The same sums in the same order: the same bits, not merely close.
      EXPECT_TRUE(same_bits(full.provenance.max_error_over_target, want))
          << what << ": " << full.provenance.max_error_over_target << " vs " << want;
      EXPECT_TRUE(same_bits(r.provenance.max_error_over_target, full.provenance.max_error_over_target)) << what;
      ++layers;
      for (const TensorSpec& ts : spec.outputs) summed += varlen && !ts.dims.empty() && ts.dims.front() == "H";
    }
  EXPECT_GE(layers, 40);
  EXPECT_GE(summed, 2);  // per-head gradients summed over sequences: precond_* and kla_kalman backward
}

// A per-head gradient summed over sequences is judged after the sum: two equal
// sequences with cotangents of opposite sign (the second's scaled by 1 − 2^-20)
// make precond_gated_delta_rule's dlog_atk_scale nearly cancel, so its row's own
// error relative to its value is by far the largest — and a ratio taken per
// sequence, before the sum, would not see it.
TEST(OracleTier, PerHeadGradientsAreJudgedAfterTheSum) {
  const LayerEntry& layer = find_layer("precond_gated_delta_rule");
  VectorCase c = suite_cases(layer.spec, "varlen").at(1);
  c.dims = {{"B", 1}, {"T", 10}, {"H", 2}, {"K", 3}, {"V", 2}};
  c.regime.cu_seqlens = {0, 5, 10};
  TensorMap<double> in = generate_backward_inputs(layer.spec, c, 5);
  const LayerSpec spec = direction_spec(layer.spec, Direction::backward);
  for (auto& [name, t] : in) {
    const TensorSpec* ts = spec.input(name);
    if (!ts || ts->dims.empty() || ts->dims[0] != "B") continue;  // cu_seqlens, per-head parameters
    const bool cotangent = !layer.spec.input(name);
    const double f = cotangent ? -(1 - 0x1p-20) : 1.0;
    // Per token: tokens 5..9 from 0..4; per sequence (h0, dht, ...): row 1 from row 0.
    const std::size_t half = t.data.size() / 2;
    for (std::size_t e = 0; e < half; ++e) t.data[half + e] = f * t.data[e];
  }
  const Config cfg = Config::make(layer.spec, c.config);
  const OracleResult full = compute_oracle_values(layer, Form::sequential, in, cfg, Direction::backward, {});
  OracleRequest lean;
  lean.own_error = false;
  const OracleResult r = compute_oracle_values(layer, Form::sequential, in, cfg, Direction::backward, lean);
  ASSERT_EQ(full.provenance.tier, "dd");
  ASSERT_EQ(full.provenance.unit, "(n,h)");  // per-head parameters cut by head, their gradients summed over n
  double per_head = 0.0, rest = 0.0;
  for (const auto& [name, v] : full.values) {
    const TensorSpec* ts = spec.output(name);
    if (!ts || !ts->certifiable) continue;
    const double m = largest_row_ratio(*ts, v, full.own_error.at(name));
    (ts->dims.front() == "H" ? per_head : rest) = std::max(ts->dims.front() == "H" ? per_head : rest, m);
  }
  EXPECT_GT(per_head, 1e3 * rest);  // the case does what it is built for
  EXPECT_TRUE(same_bits(full.provenance.max_error_over_target, per_head)) << full.provenance.max_error_over_target << " vs " << per_head;
  EXPECT_TRUE(same_bits(r.provenance.max_error_over_target, full.provenance.max_error_over_target));
}

// A varlen batch (cu_seqlens [0, 3, 3, 7]: sequences of 3, 0 and 4 tokens, two
// heads) is decided per (sequence, head): only the slice holding
// 1e17 + 1 − 1e17 (sequence 2, head 1) escalates, its values are MPFR's bit for
// bit with zero own error, and the others are double-double.
TEST(OracleTier, VarlenSlicesAreDecidedPerSequenceAndHead) {
  const LayerEntry& la = find_layer("linear_attn");
  const std::int64_t T = 7, H = 2, K = 2, V = 2;
  TensorMap<double> in;
  in["q"] = Tensor<double>({1, T, H, K}, 0.5);
  in["k"] = Tensor<double>({1, T, H, K}, 0.5);
  in["v"] = uniform({1, T, H, V}, 43, -1, 1);
  in["cu_seqlens"] = Tensor<double>({4}, 0.0);
  in["cu_seqlens"].data = {0, 3, 3, 7};
  for (std::int64_t t = 3; t < 6; ++t)
    for (std::int64_t j = 0; j < V; ++j) in["v"].data[i4(in["v"].shape, 0, t, 1, j)] = t == 3 ? 1e17 : t == 4 ? 1.0 : -1e17;
  const Config cfg = Config::make(la.spec, {{"scale", "1"}});
  const OracleResult r = compute_oracle_values(la, Form::sequential, in, cfg, Direction::forward, {});
  EXPECT_EQ(r.provenance.unit, "(n,h)");
  EXPECT_EQ(r.provenance.slices, 3 * H);
  EXPECT_EQ(r.provenance.tier, "dd+mpfr:256");
  ASSERT_EQ(r.provenance.escalated.size(), 1u);
  EXPECT_EQ(r.provenance.escalated[0].b, 2);  // the sequence
  EXPECT_EQ(r.provenance.escalated[0].h, 1);
  EXPECT_NE(r.provenance.reason.find("sequence 2, head 1"), std::string::npos) << r.provenance.reason;
  const LayerResult mp = run_layer(la, Form::sequential, {Tier::mpfr, 256}, in, cfg);
  const Tensor<double>& o = r.values.at("o");
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < V; ++j) {
        const std::size_t e = i4(o.shape, 0, t, h, j);
        const double want = mp.values.at("o").data[e];
        if (t >= 3 && h == 1) {
          EXPECT_TRUE(same_bits(o.data[e], want)) << "t=" << t << " j=" << j;
          EXPECT_EQ(r.own_error.at("o").data[e], 0.0);
        } else {
          EXPECT_LE(std::fabs(o.data[e] - want), 0x1p-52 * std::fabs(want)) << "t=" << t << " h=" << h;
          EXPECT_GT(r.own_error.at("o").data[e], 0.0);
        }
      }
  // Σ_{r ≤ t} (q·k) v_r over the sequence: (q·k) = 0.5, and 1e17 + 1 − 1e17 = 1 at t = 5.
  EXPECT_EQ(o.data[i4(o.shape, 0, 5, 1, 0)], 0.5);
}

// The decision and the values are the same whatever the thread count (slices
// decided alone, assembled in plan order), escalation included.
TEST(OracleTier, SameOracleWhateverTheThreadCount) {
  const LayerEntry& gdn = find_layer("gated_delta_rule");
  TensorMap<double> in = gated_inputs(3, 40, 3, 8, 8, 61, {.with_h0 = true});
  const Config cfg = Config::make(gdn.spec, {});
  // One slice (batch row 1, head 2) beyond double's range: v ~ 1e308, q ~ 1e3
  // make o (and the gradients) overflow in dd and float64, not in MPFR.
  for (std::int64_t t = 0; t < 40; ++t) {
    for (std::int64_t j = 0; j < 8; ++j) in["v"].data[i4(in["v"].shape, 1, t, 2, j)] *= 1e308;
    for (std::int64_t i = 0; i < 8; ++i) in["q"].data[i4(in["q"].shape, 1, t, 2, i)] *= 1e3;
  }
  for (Direction d : {Direction::forward, Direction::backward}) {
    TensorMap<double> x = in;
    if (d == Direction::backward) {
      x["do"] = uniform({3, 40, 3, 8}, 62, -1, 1);
      x["dht"] = uniform({3, 3, 8, 8}, 63, -1, 1);
    }
    std::vector<OracleResult> runs;
    for (int threads : {1, 2, 5}) {
      const SliceThreadsScope scope(threads);
      runs.push_back(compute_oracle_values(gdn, Form::sequential, x, cfg, d, {}));
    }
    const OracleResult& a = runs.front();
    EXPECT_EQ(a.provenance.unit, "(b,h)");
    EXPECT_EQ(a.provenance.slices, 9);
    ASSERT_FALSE(a.provenance.escalated.empty()) << direction_name(d);
    EXPECT_EQ(a.provenance.escalated[0].b, 1);
    EXPECT_EQ(a.provenance.escalated[0].h, 2);
    for (const OracleResult& b : runs) {
      EXPECT_EQ(b.provenance.tier, a.provenance.tier);
      EXPECT_EQ(b.provenance.reason, a.provenance.reason);
      EXPECT_EQ(b.provenance.escalated.size(), a.provenance.escalated.size());
      EXPECT_TRUE(same_bits(b.provenance.max_error_over_target, a.provenance.max_error_over_target));
      for (const auto& [name, t] : a.values)
        for (std::size_t e = 0; e < t.data.size(); ++e) {
          ASSERT_TRUE(same_bits(b.values.at(name).data[e], t.data[e])) << name << "[" << e << "]";
          ASSERT_TRUE(same_bits(b.own_error.at(name).data[e], a.own_error.at(name).data[e])) << name << "[" << e << "]";
        }
    }
  }
}

// The backward direction has dd runners for every layer; where a layer has none
// (here: a copy of GDN's entry with its dd backward runner removed), auto takes
// MPFR for the whole oracle, says why, and gives MPFR's values bit for bit.
TEST(OracleTier, NoDdBackwardRunnerFallsBackToMpfr) {
  for (const LayerEntry& layer : registry()) {
    if (layer.has_form(Form::sequential, Direction::backward)) {
      EXPECT_NO_THROW(layer.runner(Form::sequential, Tier::dd, Direction::backward)) << layer.spec.name;
    }
  }
  LayerEntry gdn = find_layer("gated_delta_rule");
  for (FormImpl& f : gdn.forms)
    if (f.direction == Direction::backward) f.runners[static_cast<std::size_t>(Tier::dd)] = nullptr;
  TensorMap<double> in = gated_inputs(1, 12, 2, 4, 4, 71, {});
  in["do"] = uniform({1, 12, 2, 4}, 72, -1, 1);
  const Config cfg = Config::make(gdn.spec, {});
  const OracleResult r = compute_oracle_values(gdn, Form::sequential, in, cfg, Direction::backward, {});
  EXPECT_EQ(r.provenance.tier, "mpfr:256");
  EXPECT_EQ(r.provenance.reason, "no dd runner for gated_delta_rule's sequential backward form");
  EXPECT_TRUE(r.own_error.empty());
  const LayerResult mp = run_layer(gdn, Form::sequential, {Tier::mpfr, 256}, in, cfg, 64, Direction::backward);
  ASSERT_FALSE(mp.values.empty());
  for (const auto& [name, t] : mp.values)
    for (std::size_t e = 0; e < t.data.size(); ++e) ASSERT_TRUE(same_bits(r.values.at(name).data[e], t.data[e]));
  // The forward direction keeps its dd runner.
  EXPECT_EQ(compute_oracle_values(gdn, Form::sequential, gated_inputs(1, 12, 2, 4, 4, 71, {}), cfg,
                                  Direction::forward, {})
                .provenance.tier,
            "dd");
}

}  // namespace
}  // namespace ttr::test
