// KLA-K with p̄ = 0 (KLA-K Thm 1, eqs. (16)-(18), Cor. 1.1; docs/kla-scaled.md):
// without process noise eq. (18) is linear, Λ_t = ā^{-2}Λ_{t-1} + φ_t, so
//
//   Λ_t = ā^{-2t} (Λ_0 + Σ_{s≤t} ā^{2s} φ_s),   φ_s = k_s² λv_s,
//
// grows geometrically while the posterior mean μ_t = η_t/Λ_t stays an ordinary
// number. Measured against that closed form (an expectation independent of every
// form; the MPFR sequential recursion is checked against it too): the precision
// each fp32/bf16 CPU form returns (lambda_T after t tokens), the per-token error
// ratio of o (the judge's model and comparison, gate/error_model.hpp), and where
// o stops being finite.
//
// The predicted failure point of the paper's representation (`chunk_unscaled`,
// `scan_unscaled`: Λ_t a plain fp32 number). Λ_t rounds to +inf at the first
// token t* whose exact Λ_t exceeds fp32's largest value (bf16 has fp32's exponent
// range, and the precision path is held in fp32 under the bf16 policy). At t*,
// μ = η/inf = 0: o is finite but wrong. At t* + 1 the mean-scan gate
// f = ā/(ā² + p̄Λ_{t*}) = ā/(ā² + 0·inf) is NaN, and every later prefix of the
// affine scan composes it: o is NaN from t* + 1 on, in every slot whose t* ≤ T.
// The rounding of Λ_t itself can move the crossing by a token only where the
// exact Λ_t lies within the form's rounding allowance of the limit (below); the
// prediction is then the interval of tokens that allowance leaves open.
//
// The scaled forms (`chunk`, `scan`) carry mantissa and exponent: o finite at
// every token (docs/kla-scaled.md, "Why nothing overflows") and within their
// error model; their returned state lambda_T is +inf from t* on, the faithful
// value of a number beyond fp32.
#include <cfloat>
#include <cmath>
#include <fmt/format.h>

#include "oracles/registry.hpp"
#include "study/common.hpp"

namespace ttr::study {
namespace {

// N = 1 key channel (k = ±1 after L2 normalisation, φ = λv) and D slots per head,
// one ā per head: every slot is an independent scalar filter and o_{t,d} = q_t μ_{t,d}.
struct GrowthParams {
  std::int64_t T, D;
  int chunk;
  std::vector<double> abar;  // per head, on the bf16 grid
  int samples;               // Monte Carlo runs of the error model
};

const double kLog2FltMax = std::log2(static_cast<double>(FLT_MAX));

constexpr Form kForms[] = {Form::chunk_unscaled, Form::scan_unscaled, Form::chunk, Form::scan};
constexpr Tier kTiers[] = {Tier::fp32, Tier::bf16};

TensorMap<double> growth_inputs(const GrowthParams& p, std::uint64_t seed) {
  const LayerEntry& kla = find_layer("kla_kalman");
  Regime r;
  r.zero_noise = true;  // p̄ = 0
  const std::int64_t H = static_cast<std::int64_t>(p.abar.size());
  TensorMap<double> in = draw_inputs(kla.spec, dims_of(1, p.T, H, 1, p.D), r, seed, "kla-precision-growth");
  Tensor<double>& a = in.at("a_bar");  // [H, N = 1, D]
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t d = 0; d < p.D; ++d) a.data[h * p.D + d] = p.abar[h];
  return in;
}

// The first `len` tokens of every [B, T, ...] input.
TensorMap<double> prefix(const TensorMap<double>& in, std::int64_t len) {
  TensorMap<double> out;
  for (const auto& [name, t] : in) {
    if (name != "q" && name != "k" && name != "v" && name != "lambda_v") {
      out[name] = t;
      continue;
    }
    const std::int64_t T = t.dim(1), inner = t.numel() / (t.dim(0) * T);
    Shape s = t.shape;
    s[1] = len;
    Tensor<double> x(s, 0.0);
    for (std::int64_t b = 0; b < t.dim(0); ++b)
      for (std::int64_t i = 0; i < len * inner; ++i) x.data[b * len * inner + i] = t.data[b * T * inner + i];
    out[name] = std::move(x);
  }
  return out;
}

// log2 Λ_t, t = 0 … T, of slot (h, d) from the closed form, in double in the log
// domain (the terms ā^{2s}φ_s are positive: the sum has relative error ≤ T·2^-53).
std::vector<double> log2_lambda_exact(const TensorMap<double>& in, std::int64_t h, std::int64_t d, double lambda0) {
  const Tensor<double>& k = in.at("k");
  const Tensor<double>& lv = in.at("lambda_v");
  const std::int64_t T = k.dim(1), H = k.dim(2), D = lv.dim(3);
  const double la = std::log2(in.at("a_bar").data[h * D + d]);
  std::vector<double> out(static_cast<std::size_t>(T + 1));
  double sum = lambda0;
  out[0] = std::log2(lambda0);
  for (std::int64_t t = 1; t <= T; ++t) {
    const double kk = k.data[(t - 1) * H + h], phi = kk * kk * lv.data[((t - 1) * H + h) * D + d];
    sum += std::exp2(2.0 * t * la + std::log2(phi));  // underflows to 0 where negligible against Λ_0
    out[t] = -2.0 * t * la + std::log2(sum);
  }
  return out;
}

// How far the unscaled form's rounding can move log2 Λ_t (docs/kla-scaled.md,
// "Rounding error"): the Möbius entries carry a relative e ≤ (3u + u_store) per
// composition on the prefix's path — 3u of fp32 compute plus, under the bf16
// policy, the storage rounding u_store = 2^-8 of each entry — over ≤ C + 2⌈log2(T/C)⌉ + 1
// compositions (chunked) or 2⌈log2 T⌉ (one tree), and applying P_t to Λ_0 adds
// 3u. Near the limit the entry d ≈ n/Λ_t (n = aΛ_0 + b ∈ [1/2, 2] after rescaling)
// is subnormal, and every stored composition on the path (and the final one) may
// round its d — no smaller than the final d — on the subnormal grid: up to half
// the smallest subnormal, 2^-150 (fp32) or 2^-134 (bf16), each time, a relative
// s·Λ_t with s = 2^-149 (2^-133) at most, depth + 1 times (the full study's first
// version counted it once, and bf16 scan_unscaled at ā = 0.8 came out 14% low
// against a 10% allowance). With σ = (depth + 1)·s·Λ_t:
//   Λ_t/(1 + e + σ) ≤ computed Λ_t ≤ Λ_t(1 + e)/(1 − σ)   (+inf once σ ≥ 1),
// returned as {log2 of the lower, log2 of the upper end}, from log2 Λ_t.
std::pair<double, double> unscaled_range(Form f, Tier dtype, std::int64_t T, int chunk, double log2_lambda) {
  const double u = std::ldexp(1.0, -24), u_store = dtype == Tier::bf16 ? std::ldexp(1.0, -8) : 0.0;
  const auto clog2 = [](double x) { return std::ceil(std::log2(std::max(x, 1.0))); };
  const double depth = f == Form::chunk_unscaled ? chunk + 2 * clog2(static_cast<double>(T) / chunk) + 1 : 2 * clog2(T);
  const double e = (3 * u + u_store) * depth + 3 * u;
  const double s_lambda =
      (depth + 1) * std::exp2(std::min(log2_lambda - (dtype == Tier::bf16 ? 133 : 149), 60.0));
  const double lower = log2_lambda - std::log2(1 + e + s_lambda);
  const double upper = s_lambda >= 1 ? INFINITY : log2_lambda + std::log2(1 + e) - std::log2(1 - s_lambda);
  return {lower, upper};
}

// Per-row error ratio of o at token t, head h, as the judge forms it: compare()
// on the one-row slices of the oracle, the model's RMS and the candidate.
double row_ratio(const LayerSpec& spec, const ErrorModel& m, const TensorMap<double>& oracle,
                 const TensorMap<double>& cand, std::int64_t t, std::int64_t h) {
  const Tensor<double>& o = oracle.at("o");
  const std::int64_t H = o.dim(2), D = o.dim(3), row = t * H + h;
  auto slice = [&](const Tensor<double>& x) {
    Tensor<double> s({1, 1, 1, D}, 0.0);
    for (std::int64_t d = 0; d < D; ++d) s.data[d] = x.data[row * D + d];
    return s;
  };
  ErrorModel one;
  one.spec = m.spec;
  one.u = m.u;
  one.rms["o"] = Tensor<double>({1}, m.rms.at("o").data[row]);
  const CheckResult r = compare(spec, {{"o", slice(o)}}, one, {{"o", slice(cand.at("o"))}});
  return ratio_of(r, "o");
}

double abs_rel_error(const Tensor<double>& c, const Tensor<double>& o, std::int64_t row, std::int64_t D) {
  double num2 = 0, den2 = 0;
  for (std::int64_t d = 0; d < D; ++d) {
    const double x = c.data[row * D + d], y = o.data[row * D + d];
    if (!std::isfinite(x)) return INFINITY;
    num2 += (x - y) * (x - y);
    den2 += y * y;
  }
  return num2 == 0 ? 0.0 : (den2 == 0 ? INFINITY : std::sqrt(num2 / den2));
}

// The exact values: the closed form for every slot and token, and the MPFR
// sequential recursion's Λ_t read from its o_var = q_t²/Λ_t (N = 1, scale 1)
// where that is a normal double.
Rows exact_case(const GrowthParams& p, std::uint64_t seed) {
  const LayerEntry& kla = find_layer("kla_kalman");
  const TensorMap<double> in = growth_inputs(p, seed);
  const Config cfg = Config::make(kla.spec, {});
  const double lambda0 = cfg.number("lambda0");
  const TensorMap<double> mp = run_layer(kla, Form::sequential, {Tier::mpfr, kOracleBits}, in, cfg).values;
  const Tensor<double>& ov = mp.at("o_var");
  const Tensor<double>& q = in.at("q");
  const std::int64_t H = static_cast<std::int64_t>(p.abar.size());
  Rows rows;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t d = 0; d < p.D; ++d) {
      const std::vector<double> ex = log2_lambda_exact(in, h, d, lambda0);
      double worst = 0;
      std::int64_t compared = 0, t_star = 0;
      for (std::int64_t t = 1; t <= p.T; ++t) {
        if (t_star == 0 && ex[t] > kLog2FltMax) t_star = t;
        const double x = ov.data[((t - 1) * H + h) * p.D + d], qq = q.data[(t - 1) * H + h];
        double mp_log2 = NAN;
        if (std::isnormal(x)) {
          mp_log2 = std::log2(qq * qq) - std::log2(x);
          worst = std::max(worst, std::abs(mp_log2 - ex[t]));
          ++compared;
        }
        if (d == 0)
          rows["precision"].push_back({p.abar[h], h, t, std::string("mpfr sequential"), std::string("mpfr"),
                                       std::string("sequential"), mp_log2, ex[t]});
      }
      rows["exact"].push_back({p.abar[h], h, d, t_star, compared, worst});
    }
  return rows;
}

// One form in one dtype: the full run (o, per-row ratios, first non-finite token
// per slot) and the returned state after every prefix length.
Rows form_case(const GrowthParams& p, Form form, Tier dtype, std::uint64_t seed) {
  const LayerEntry& kla = find_layer("kla_kalman");
  const TensorMap<double> in = growth_inputs(p, seed);
  const Config cfg = Config::make(kla.spec, {});
  const double lambda0 = cfg.number("lambda0");
  const std::int64_t H = static_cast<std::int64_t>(p.abar.size()), D = p.D;
  const std::string arith = fmt::format("{} {}", tier_name(dtype), form_name(form));
  Judge judge(kla, in, cfg, Arith{Tier::mpfr, kOracleBits});
  const ModelSpec ms = policy_model(form, Direction::forward, {dtype, Policy::native}, p.chunk, seed, p.samples);
  const ErrorModel& model = judge.model(ms);
  const TensorMap<double> out = run_layer(kla, form, {dtype, 0}, in, cfg, p.chunk).values;
  const Tensor<double>& o = out.at("o");
  Rows rows;
  std::vector<std::vector<double>> ex(static_cast<std::size_t>(H * D));
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t d = 0; d < D; ++d) ex[h * D + d] = log2_lambda_exact(in, h, d, lambda0);
  // t* of the head: the first token at which some slot's exact Λ_t is beyond fp32 (0: none).
  std::vector<std::int64_t> head_t_star(static_cast<std::size_t>(H), 0);
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t t = 1; t <= p.T; ++t)
        if (ex[h * D + d][t] > kLog2FltMax) {
          if (head_t_star[h] == 0 || t < head_t_star[h]) head_t_star[h] = t;
          break;
        }
  const Tensor<double>& truth = judge.oracle().at("o");
  for (std::int64_t t = 0; t < p.T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      double norm2 = 0;
      for (std::int64_t d = 0; d < D; ++d) norm2 += std::pow(truth.data[(t * H + h) * D + d], 2);
      const double ratio = row_ratio(judge.spec(), model, judge.oracle(), out, t, h);
      // Once μ_t ~ ā^t falls below fp32's normal range the row's bound is the
      // model's floor and the ratio that of a flush to zero: not drawn.
      const bool normal = std::sqrt(norm2) >= std::ldexp(1.0, -126);
      rows["ratios"].push_back({p.abar[h], h, t + 1, arith, std::string(tier_name(dtype)), std::string(form_name(form)),
                                ratio, normal ? ratio : NAN, abs_rel_error(o, truth, t * H + h, D), std::sqrt(norm2),
                                ex[h * D][t + 1], head_t_star[h]});
    }
  // The state each form returns after t tokens (lambda_T of the t-token prefix).
  std::vector<std::int64_t> first_inf(static_cast<std::size_t>(H * D), 0);
  for (std::int64_t t = 1; t <= p.T; ++t) {
    const Tensor<double> lam = run_layer(kla, form, {dtype, 0}, prefix(in, t), cfg, p.chunk).values.at("lambda_T");
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t d = 0; d < D; ++d)
        if (first_inf[h * D + d] == 0 && std::isinf(lam.data[h * D + d])) first_inf[h * D + d] = t;
      const double x = lam.data[h * D];
      rows["precision"].push_back({p.abar[h], h, t, arith, std::string(tier_name(dtype)), std::string(form_name(form)),
                                   std::isfinite(x) && x > 0 ? std::log2(x) : (std::isnan(x) ? NAN : INFINITY),
                                   ex[h * D][t]});
    }
  }
  // Per slot: the predicted and the observed failure point.
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t d = 0; d < D; ++d) {
      const std::vector<double>& e = ex[h * D + d];
      // lo: the earliest token the computed Λ_t can overflow at, hi: the latest.
      std::int64_t t_star = 0, lo = 0, hi = 0;
      double margin = INFINITY, allow_bits = 0;
      for (std::int64_t t = 1; t <= p.T; ++t) {
        const auto [down, up] = unscaled_range(form, dtype, p.T, p.chunk, e[t]);
        if (lo == 0 && up > kLog2FltMax) lo = t;
        if (hi == 0 && down > kLog2FltMax) hi = t;
        if (t_star == 0 && e[t] > kLog2FltMax) {
          t_star = t;
          margin = std::min(e[t] - kLog2FltMax, kLog2FltMax - e[t - 1]);
          const auto [down0, up0] = unscaled_range(form, dtype, p.T, p.chunk, e[t - 1]);
          allow_bits = std::max(e[t] - down, up0 - e[t - 1]);  // the wider side of the two tokens
        }
      }
      std::int64_t first_nan = 0, finite_after = 0;
      for (std::int64_t t = 0; t < p.T; ++t) {
        const bool finite = std::isfinite(o.data[(t * H + h) * D + d]);
        if (!finite && first_nan == 0) first_nan = t + 1;
        if (finite && first_nan != 0) ++finite_after;
      }
      // The first NaN comes one token after the crossing; 0: not within T.
      const auto nan_at = [&](std::int64_t cross) { return cross != 0 && cross + 1 <= p.T ? cross + 1 : 0; };
      rows["failure"].push_back({p.abar[h], h, d, arith, std::string(tier_name(dtype)), std::string(form_name(form)),
                                 t_star, nan_at(lo), nan_at(hi), margin, allow_bits, first_nan, finite_after,
                                 first_inf[h * D + d]});
    }
  return rows;
}

std::vector<Claim> assess(const Tables& t) {
  std::vector<Claim> claims;
  {  // The MPFR recursion against the closed form.
    const Table& ex = t.at("exact");
    double worst = 0;
    std::int64_t compared = 0;
    for (const Row& r : ex.rows) {
      worst = std::max(worst, ex.num(r, "max_abs_log2_diff"));
      compared += static_cast<std::int64_t>(ex.num(r, "compared"));
    }
    // Tolerance in bits: the closed form's double rounding (|2t log2 ā| ≤ 2^13 times
    // 2^-52, the sum's T·2^-53) and o_var's rounding to double, far below 1e-9.
    claims.push_back({"closed_form", "KLA-K eq. (18) with p̄ = 0",
                      "Lambda_t = abar^-2 Lambda_{t-1} + phi_t, so Lambda_t = abar^{-2t} (Lambda_0 + sum_s abar^{2s} phi_s)",
                      true, compared > 0 && worst <= 1e-9 ? Verdict::agrees : Verdict::disagrees,
                      fmt::format("MPFR-{} sequential recursion vs the closed form over {} (slot, token) pairs where "
                                  "its Lambda_t is within double's range: max |log2 difference| = {:.3g} bits",
                                  kOracleBits, compared, worst)});
  }
  const Table& f = t.at("failure");
  {  // The unscaled forms' failure point.
    std::int64_t slots = 0, exact_token = 0, interval = 0, wrong = 0, finite_after = 0, beyond_T = 0;
    std::string first_wrong;
    for (const Row& r : f.rows) {
      if (f.text(r, "form").find("unscaled") == std::string::npos) continue;
      ++slots;
      finite_after += static_cast<std::int64_t>(f.num(r, "finite_after_first_nan"));
      const double lo = f.num(r, "predicted_first_nan_lo"), hi = f.num(r, "predicted_first_nan_hi"),
                   got = f.num(r, "first_nan");
      // lo == 0: no crossing within T even with the largest rounding; hi == 0: not
      // certain within T (the smallest rounding may keep Λ_t finite to T).
      const bool ok = lo == 0 ? got == 0 : (got == 0 ? hi == 0 : got >= lo && (hi == 0 || got <= hi));
      if (lo == 0) ++beyond_T;
      else if (lo == hi) ++exact_token;
      else ++interval;
      if (!ok && wrong++ == 0)
        first_wrong = fmt::format(" (first: {} abar = {} slot {}: predicted [{}, {}], first NaN at {})",
                                  f.text(r, "arithmetic"), f.text(r, "abar"), f.text(r, "slot"), lo, hi, got);
    }
    claims.push_back(
        {"unscaled_failure_point", "KLA-K Cor. 1.1 as the paper represents it (docs/kla-scaled.md, \"The failure\")",
         "with p̄ = 0 the unscaled forms' o is NaN exactly from token t*+1 on, t* the first token whose exact Lambda_t "
         "exceeds fp32's largest value (bf16: the same exponent range)",
         true, slots > 0 && wrong == 0 && finite_after == 0 ? Verdict::agrees : Verdict::disagrees,
         fmt::format("{} (form, dtype, slot) triples: {} at the predicted token t*+1, {} inside the predicted interval "
                     "(exact Lambda_t within the form's rounding allowance of the limit), {} never crossing within T; "
                     "{} off the prediction{}, {} finite tokens after a first NaN",
                     slots, exact_token, interval, beyond_T, wrong, first_wrong, finite_after)});
  }
  const Table& ra = t.at("ratios");
  {  // The scaled forms: finite, within the model.
    std::int64_t rows = 0, nonfinite = 0;
    double worst = 0;
    for (const Row& r : ra.rows) {
      if (ra.text(r, "form").find("unscaled") != std::string::npos) continue;
      ++rows;
      const double x = ra.num(r, "ratio");
      if (!std::isfinite(x)) ++nonfinite;
      else worst = std::max(worst, x);
    }
    std::int64_t beyond = 0;
    for (const Row& r : f.rows)
      if (f.text(r, "form").find("unscaled") == std::string::npos && f.num(r, "t_star") > 0) ++beyond;
    claims.push_back({"scaled_finite", "docs/kla-scaled.md, \"Why nothing overflows\"",
                      "the scaled forms (chunk, scan) give a finite o at every token in fp32 and bf16, also where "
                      "Lambda_t is beyond fp32",
                      true, rows > 0 && nonfinite == 0 ? Verdict::agrees : Verdict::disagrees,
                      fmt::format("{} (token, head) rows of o over both scaled forms and dtypes: {} non-finite; {} "
                                  "(form, dtype, slot) triples have Lambda_t beyond fp32 before T",
                                  rows, nonfinite, beyond)});
    claims.push_back({"scaled_within_model", "docs/kla-scaled.md, \"Rounding error\"; docs/error-model.md",
                      "the scaled forms' error stays within their error model (ratio <= 8) at every token", false,
                      rows > 0 && nonfinite == 0 && worst <= kRatioThreshold ? Verdict::agrees : Verdict::disagrees,
                      fmt::format("largest per-token error ratio of o: {}", num(worst))});
  }
  {  // The unscaled forms before their failure, and the state they return.
    double before = 0;
    std::int64_t rows_before = 0;
    for (const Row& r : ra.rows) {
      if (ra.text(r, "form").find("unscaled") == std::string::npos) continue;
      const double ts = ra.num(r, "head_t_star");
      if (ts > 0 && ra.num(r, "t") >= ts) continue;  // some slot of the row is beyond fp32
      ++rows_before;
      before = std::max(before, ra.num(r, "ratio"));
    }
    std::int64_t triples = 0, at_tstar = 0;
    for (const Row& r : f.rows)
      if (f.num(r, "t_star") > 0) {
        ++triples;
        at_tstar += f.num(r, "first_inf_lambda") == f.num(r, "t_star") ? 1 : 0;
      }
    claims.push_back({"unscaled_before", "docs/kla-scaled.md",
                      "while Lambda_t is representable the unscaled forms are as accurate as the scaled ones", false,
                      Verdict::observed,
                      fmt::format("largest per-token ratio of the unscaled forms over the {} rows before t*: {}",
                                  rows_before, num(before))});
    claims.push_back({"returned_state", "docs/kla-scaled.md, \"Why nothing overflows\"",
                      "every form's returned state lambda_T is +inf once Lambda_t is beyond fp32 (the faithful value)",
                      false, Verdict::observed,
                      fmt::format("lambda_T of the t-token prefix first +inf at t* in {} of {} (form, dtype, slot) "
                                  "triples that cross: a state handed on in fp32 cannot carry Lambda_t past t* in "
                                  "either representation",
                                  at_tstar, triples)});
  }
  return claims;
}

}  // namespace

Study kla_precision_growth() {
  Study s;
  s.name = "kla-precision-growth";
  s.title = "KLA-K with p̄ = 0: growth of the precision and the fp32/bf16 failure point";
  s.source = "KLA-K Thm 1, eqs. (16)-(18), Cor. 1.1, 2.1; docs/kla-scaled.md";
  s.claim = "With p̄ = 0 the precision grows like Lambda_t = abar^{-2t}(Lambda_0 + sum abar^{2s} phi_s): the paper's "
            "scan representation (Lambda as a plain number) fails in fp32 and bf16 once Lambda_t passes 3.4e38, "
            "while the posterior mean it feeds stays an ordinary number.";
  s.plan = [](const Options& opt) {
    // ā per head (bf16 values): the fuzz finding's 2^-17 (crossing at the 4th token),
    // then slower growth: 8.6, 3.5, 1.5 (full: also 13.3, 5.5, 0.83, 0.64) bits per token.
    GrowthParams p = opt.quick ? GrowthParams{96, 4, 16, {0x1p-17, 0.05004883, 0.30078125, 0.6015625}, 8}
                               : GrowthParams{256, 8, 64,
                                              {0x1p-17, 0.0100097656, 0.05004883, 0.1484375, 0.30078125, 0.6015625,
                                               0.75, 0.80078125},
                                              8};
    Plan plan;
    plan.config = {{"layer", "kla_kalman"}, {"B", 1}, {"T", p.T}, {"H", p.abar.size()}, {"N", 1}, {"D", p.D},
                   {"a_bar_per_head", p.abar}, {"p_bar", 0}, {"lambda0", 1}, {"scale", 1}, {"chunk_size", p.chunk},
                   {"forms", {"chunk_unscaled", "scan_unscaled", "chunk", "scan"}}, {"dtypes", {"fp32", "bf16"}},
                   {"model_samples", p.samples},
                   {"oracle", fmt::format("sequential form, MPFR {} bits", kOracleBits)},
                   {"exact", "closed form Lambda_t = abar^{-2t}(Lambda_0 + sum_s abar^{2s} phi_s), double, log domain"},
                   {"fp32_limit_log2", kLog2FltMax},
                   {"inputs", "ttrcheck vectors draws with p_bar = 0 (q, k = +-1 with N = 1, v N(0,1), lambda_v "
                              "lognormal), a_bar set per head"}};
    plan.tables = {
        {"precision", {"abar", "head", "t", "arithmetic", "dtype", "form", "log2_lambda", "log2_lambda_exact"},
         "slot 0 of each head: log2 of Lambda_t as each form returns it after t tokens (lambda_T of the prefix; "
         "mpfr: from o_var), and the closed form"},
        {"ratios", {"abar", "head", "t", "arithmetic", "dtype", "form", "ratio", "ratio_normal_range", "rel_error", "o_norm",
          "log2_lambda_exact", "head_t_star"},
         "per token and head: the judge's error ratio of o (inf: NaN/Inf; ratio_normal_range: NaN where the true o "
         "is below fp32's normal range), its relative error, the true o's norm, log2 Lambda_t of slot 0 and the "
         "head's t* (the first token with some slot's Lambda_t beyond fp32; 0: none)"},
        {"failure",
         {"abar", "head", "slot", "arithmetic", "dtype", "form", "t_star", "predicted_first_nan_lo",
          "predicted_first_nan_hi", "margin_bits", "allowance_bits", "first_nan", "finite_after_first_nan",
          "first_inf_lambda"},
         "per slot: t* (first exact Lambda_t beyond fp32, 0: none within T), the predicted first NaN token of the "
         "unscaled forms (an interval where the exact value is within the rounding allowance), the observed one (0: "
         "none), and the first prefix whose returned lambda_T is +inf"},
        {"exact", {"abar", "head", "slot", "t_star", "compared", "max_abs_log2_diff"},
         "per slot: the MPFR sequential recursion against the closed form"}};
    const std::uint64_t seed = opt.seed;
    plan.cases.push_back({"exact", [p, seed](std::uint64_t) { return exact_case(p, seed); }});
    for (Form f : kForms)
      for (Tier d : kTiers)
        plan.cases.push_back({fmt::format("{}/{}", form_name(f), tier_name(d)),
                              [p, f, d, seed](std::uint64_t) { return form_case(p, f, d, seed); }});
    plan.figures = {
        {"kla_precision", "log2 of the precision Lambda_t: exact, and as each form returns it", "precision", "t",
         {"log2_lambda"}, {"log2_lambda_exact"}, "arithmetic", "abar", {}, false, false, "token t",
         "log2 Lambda_t (slot 0)", {{kLog2FltMax, "fp32/bf16 largest value"}},
         "Dashed: the closed form. Red crosses at the top: the returned lambda_T is +inf (every form: the state "
         "itself is beyond fp32)."},
        {"kla_ratio", "Error ratio of o per token", "ratios", "t", {"ratio_normal_range"}, {}, "arithmetic", "abar",
         {}, false, true, "token t", "error ratio of o (token, head)", {{kRatioThreshold, "threshold 8"}},
         "Unscaled forms: the ratio jumps at t* (o = eta/inf = 0) and is NaN from t*+1 (red crosses); the scaled "
         "forms stay under the threshold. Tokens whose true o is below fp32's normal range (mu_t ~ abar^t) are not "
         "drawn."}};
    plan.assess = assess;
    plan.conclusion = [](const Tables&, const std::vector<Claim>& c) {
      return fmt::format(
          "The precision follows the closed form ({}), and the paper's unscaled scans fail where predicted from "
          "fp32's range: {}. The scaled forms {} ({}; {}), though the state they return, lambda_T, is +inf beyond "
          "t* like any fp32 number.",
          c.at(0).evidence, c.at(1).evidence,
          c.at(2).verdict == Verdict::agrees ? "stay finite at every token" : "do NOT stay finite", c.at(2).evidence,
          c.at(3).evidence);
    };
    return plan;
  };
  return s;
}

}  // namespace ttr::study
