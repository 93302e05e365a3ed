// GKA forward entries about the Chebyshev weight schedule: Lemma 3 (the weights'
// monotone bounds), Lemma 4 (their contraction, and step (iv) of its proof) and the
// numbers of Remark 1. Under test: the weights of reference/solvers/chebyshev.hpp
// (gkaf::reference_weights); the independent side is MPFR arithmetic on the
// closed forms ω_1* = 2(1 − √(1−ρ²))/ρ² and R = (κ−1)/(κ+1)·(√κ−1)/(√κ+1).
#include <algorithm>

#include "proofs-checks/gka/forward_support.hpp"

namespace ttr::proofs {
namespace {

using namespace gkaf;

// --- Lemma 3 and Lemma 4 ----------------------------------------------------------

// Largest violation of Lemma 3 at one ρ: 2 = ω_0 ≥ ω_1 ≥ … ≥ ω_r ≥ ω_1* > 1 and
// 4 − ρ²ω_i ∈ [2, 4], for the reference weights (chebyshev_forward).
double lemma3_violation(const mp& rho, int r) {
  const std::vector<mp> w = reference_weights(rho, r);
  // ω_1* = 2(1 − √(1−ρ²))/ρ² written as 2/(1 + √(1−ρ²)) (the same number, free of
  // the cancellation that costs log2(1/ρ²) bits near ρ = 0).
  const mp r2 = rho * rho, w1s = 2 / (1 + sqrt(1 - r2));
  mp v = std::max<mp>(abs(w[0] - 2), 1 - w1s);
  for (int i = 0; i <= r; ++i) {
    if (i > 0) v = std::max<mp>(v, w[i] - w[i - 1]);
    v = std::max<mp>(v, w1s - w[i]);
    const mp d = 4 - r2 * w[i];
    v = std::max<mp>(v, std::max<mp>(2 - d, d - 4));
  }
  return to_d(v);
}
// Largest violation of Lemma 4 at one κ: (ω_i − ω_1*) ≤ R^i (ω_0 − ω_1*), relative to
// ω_0 − ω_1*; and step (iv) of its proof, 1 − √(1−ρ²) = R.
double lemma4_violation(const mp& kappa, int r, double* tight) {
  const mp rho = (kappa - 1) / (kappa + 1), r2 = rho * rho, sk = sqrt(kappa);
  const mp R = (kappa - 1) / (kappa + 1) * (sk - 1) / (sk + 1);
  const mp w1s = 2 / (1 + sqrt(1 - r2));  // = 2(1 − √(1−ρ²))/ρ², as in lemma3_violation
  const std::vector<mp> w = reference_weights(rho, r);
  // Step (iv): 1 − √(1−ρ²) = R, the left side as ρ²/(1 + √(1−ρ²)) (no cancellation).
  mp v = abs(r2 / (1 + sqrt(1 - r2)) - R) / R, Ri = 1;
  for (int i = 1; i <= r; ++i) {
    Ri *= R;
    v = std::max<mp>(v, ((w[i] - w1s) - Ri * (w[0] - w1s)) / (w[0] - w1s));
    if (tight && w[i] - w1s > mp(1e-40) * (w[0] - w1s))  // above rounding noise
      *tight = std::max(*tight, to_d((w[i] - w1s) / (Ri * (w[0] - w1s))));
  }
  return to_d(v);
}

template <class F>
Evidence search_over_kappa(const ProofOptions& opt, const std::string& id, F&& violation, const std::string& measure,
                           const std::string& extra) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int trials = opt.full ? 400 : 40, steps = opt.full ? 20 : 5;
  int evals = 0;
  Worst worst;
  for (int tr = 0; tr < trials; ++tr) {
    // κ from 1 + 1e-6 (ρ ≈ 5e-7) to 1e12 (ρ → 1): both ends of (0, 1).
    double lk = unif(rng, std::log(1e-6), std::log(1e12));
    auto kappa_of = [](double l) { return l < 0 ? 1 + std::exp(l) : std::exp(l) + 1; };
    double cur = violation(mp(kappa_of(lk)));
    ++evals;
    worst.see(cur, "kappa=" + num(kappa_of(lk)));
    for (int st = 0; st < steps; ++st) {
      const double l2 = std::clamp(lk + std::ldexp(unif(rng, -1, 1), -static_cast<int>(rng() % 10)),
                                   std::log(1e-6), std::log(1e12));
      const double v = violation(mp(kappa_of(l2)));
      ++evals;
      worst.see(v, "kappa=" + num(kappa_of(l2)));
      if (v > cur) cur = v, lk = l2;
    }
  }
  return holds_if(worst.value, exact_tolerance(opt.bits), measure, worst.where,
                  std::to_string(evals) + " evaluations, r = 64" + extra);
}

Evidence lemma3(const ProofOptions& opt, const std::string& id) {
  return search_over_kappa(
      opt, id, [](const mp& kappa) { return lemma3_violation((kappa - 1) / (kappa + 1), 64); },
      "max violation of 2 = w0 >= w1 >= ... >= w_r >= w1* > 1 and 4 - rho^2 w_i in [2,4] (<= 0: holds)", "");
}

Evidence lemma4(const ProofOptions& opt, const std::string& id) {
  double tight = 0;
  Evidence e = search_over_kappa(
      opt, id, [&](const mp& kappa) { return lemma4_violation(kappa, 64, &tight); },
      "max ((w_i - w1*) - R^i (w0 - w1*))/(w0 - w1*), and rel. error of proof step (iv)", "");
  e.detail += "; max (w_i - w1*)/(R^i (w0 - w1*)) = " + num(tight) +
              " (the true contraction is R_a^2 < R: (w_i - w1*)/(w_{i-1} - w1*) -> rho^2 w1*/(4 - rho^2 w1*))";
  return e;
}

// --- Remark 1 ---------------------------------------------------------------------

struct Printed {
  const char* name;
  int base;  // 0: R, 1: R_a
  int power;
  double value, half_unit;  // as printed, and half a unit of its last printed digit
};

// Excess of |true − printed| over half a unit of the last printed digit, relative.
double excess(const Printed& p, const mp& R, const mp& Ra) {
  const mp x = pow(p.base ? Ra : R, p.power);
  return std::max(0.0, to_d((abs(x - mp(p.value)) - mp(p.half_unit)) / x));
}

Evidence remark1_numbers(const ProofOptions& opt, const std::string&) {
  MpPrecision prec(opt.bits);
  const mp kappa = mp(102) / 2;  // L/μ = 1.02/0.02 = 51 exactly
  const mp sk = sqrt(kappa), Ra = (sk - 1) / (sk + 1), R = (kappa - 1) / (kappa + 1) * Ra;
  const Printed printed[] = {{"R", 0, 1, 0.7253, 5e-5},     {"R^5", 0, 5, 0.2, 0.05},
                             {"R^10", 0, 10, 0.04, 0.005},  {"R^20", 0, 20, 0.0016, 5e-5},
                             {"R^30", 0, 30, 6e-5, 5e-6},   {"Ra", 1, 1, 0.7543, 5e-5},
                             {"Ra^5", 1, 5, 0.244, 5e-4},   {"Ra^10", 1, 10, 0.0597, 5e-5},
                             {"Ra^20", 1, 20, 0.0036, 5e-5}, {"Ra^30", 1, 30, 0.0002, 5e-5}};
  double worst = 0, corrected = std::abs(to_d(kappa) - 1.02 / 0.02) > 1e-12 ? 1.0 : 0.0;
  std::string where, values;
  for (const Printed& p : printed) {
    const double e = excess(p, R, Ra);
    values += std::string(values.empty() ? "" : ", ") + p.name + " = " + num(to_d(pow(p.base ? Ra : R, p.power)));
    if (e > worst) worst = e, where = std::string(p.name) + " printed " + num(p.value);
    // Corrected list: R^30 ≈ 6.5e-5 (two digits); the others as printed.
    const Printed c = std::string(p.name) == "R^30" ? Printed{"R^30", 0, 30, 6.5e-5, 5e-7} : p;
    corrected = std::max(corrected, excess(c, R, Ra));
  }
  return printed_fails(worst, corrected, 0.0,
                       "max over the ten printed numbers of (|true - printed| - half unit of last digit)/true",
                       where, values);
}

Evidence remark1_bf16(const ProofOptions& opt, const std::string&) {
  MpPrecision prec(opt.bits);
  const mp kappa = 51, rho = (kappa - 1) / (kappa + 1), r2 = rho * rho, sk = sqrt(kappa);
  const mp R = (kappa - 1) / (kappa + 1) * (sk - 1) / (sk + 1), w1s = 2 * (1 - sqrt(1 - r2)) / r2;
  const std::vector<mp> w = reference_weights(rho, 30);
  const mp u = ldexp(mp(1), -8);  // bf16 unit roundoff (8 significant bits)
  // Lemma 4's bound after 20 iterations, relative to ω_1*, must be within bf16.
  const mp lemma_bound = pow(R, 20) * (w[0] - w1s) / w1s;
  int first = -1;
  for (int i = 0; i <= 30; ++i)
    if (first < 0 && abs(w[i] - w1s) / w1s <= u) first = i;
  return holds_if(std::max(0.0, to_d(lemma_bound - u)), 0.0, "R^20 (w0 - w1*)/w1* - 2^-8 (<= 0: within bf16 after 20 iterations)",
                  "kappa = 51", "Lemma 4 bound at i = 20: " + num(to_d(lemma_bound)) +
                                    "; actual first i with |w_i - w1*|/w1* <= 2^-8: " + std::to_string(first));
}

}  // namespace

std::vector<Entry> gka_forward_chebyshev_weight_entries() {
  const Method X = Method::exact_identity, I = Method::inequality_search;
  return {
      gka_entry("gka.lemma3.weights", "Lemma 3",
           "2 = omega_0 >= omega_1 >= ... >= omega_r >= omega_1* = 2(1 - sqrt(1-rho^2))/rho^2 > 1, and "
           "4 - rho^2 omega_i in [2,4]",
           I,
           "adversarial search, MPFR opt.bits: 40 (full: 400) log-uniform kappa in [1+1e-6, 1e12] (rho from 5e-7 to "
           "1 - 2e-12) + 5 (full: 20) local steps each maximising the largest violation; reference weights, r = 64",
           Status::holds, "", lemma3),
      gka_entry("gka.lemma4.weight_contraction", "Lemma 4",
           "omega_i - omega_1* <= R^i (omega_0 - omega_1*), R = (kappa-1)/(kappa+1) (sqrt(kappa)-1)/(sqrt(kappa)+1)",
           I, "adversarial search as gka.lemma3.weights; also proof step (iv) 1 - sqrt(1-rho^2) = R as an identity",
           Status::holds, "", lemma4),
      gka_entry("gka.remark1.numbers", "Remark 1",
           "kappa = 1.02/0.02 = 51: R ~ 0.7253, R^5 ~ 0.2, R^10 ~ 0.04, R^20 ~ 0.0016, R^30 ~ 6e-5; Ra ~ 0.7543, "
           "Ra^5 ~ 0.244, Ra^10 ~ 0.0597, Ra^20 ~ 0.0036, Ra^30 ~ 0.0002",
           X,
           "MPFR opt.bits: each number recomputed; a printed value passes if within half a unit of its last printed "
           "digit",
           Status::fails_as_printed,
           "R^30 = 6.547e-5, i.e. ~6.5e-5 (7e-5 to one digit), not 6e-5; the other nine numbers are correctly "
           "rounded",
           remark1_numbers),
      gka_entry("gka.remark1.bf16_20_iterations", "Remark 1",
           "with kappa = 51 the weight schedule converges in at most 20 iterations up to bfloat16 precision", I,
           "MPFR opt.bits: Lemma 4's bound R^20 (omega_0 - omega_1*)/omega_1* vs the bf16 unit roundoff 2^-8, and "
           "the first i where the reference weights are within 2^-8 of omega_1*",
           Status::holds, "", remark1_bf16),
  };
}

}  // namespace ttr::proofs
