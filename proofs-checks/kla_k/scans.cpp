// KLA-K entries about compositions: the Möbius prefix product (Cor. 1.1) and
// the affine scan (Cor. 2.1). The whole layer (eqs. (22)-(23), Table 3, Thm 3,
// App. E.4) is in layer.cpp.
//
// Code under test here: reference/kla_kalman/scan.hpp (compose_mobius,
// apply_mobius) and reference/scan/blelloch.hpp (Blelloch and chunked scans). The
// independent side is always this folder's own computation: the one-step
// recurrences (printed.hpp's eqs. (16), (19)) token by token, brute-force sums
// and products.
//
// All in MPFR at opt.bits with tolerance exact_tolerance(bits) = 2^(48-bits):
// every Möbius entry and forget gate is ≥ 0 (no cancellation in the products).
#include <algorithm>
#include <cmath>

#include "proofs-checks/kla_k/printed.hpp"
#include "reference/kla_kalman/scan.hpp"
#include "reference/scan/blelloch.hpp"

namespace ttr::proofs::klak {
namespace {

std::string where(Regime r, int rep, int t) {
  return "regime " + name(r) + ", sequence " + std::to_string(rep) + ", t=" + std::to_string(t);
}

// ------------------------------------------------------------------ Cor. 1.1

Evidence cor11_order(const ProofOptions& opt) {
  const std::string id = "kla_k.cor1_1.prefix_product_order";
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int T = opt.full ? 12 : 6, reps = opt.full ? 20 : 3;
  Worst printed, corrected;
  for (Regime r : kRegimes)
    for (int rep = 0; rep < reps; ++rep) {
      const std::vector<Token> tokens = draw_tokens(rng, r, T, true);
      const mp lam0 = draw_prior(rng).lambda;
      mp lam = lam0;
      Mat<mp> left_to_right = Mat<mp>::identity(2), later_on_left = Mat<mp>::identity(2);
      for (int t = 1; t <= T; ++t) {
        const Mat<mp> M = printed_M(tokens[t - 1]);
        lam = printed_eq16(tokens[t - 1], lam);       // the recurrence λ_t = M_t(λ_{t-1})
        left_to_right = left_to_right * M;            // ∏_{s=1}^t M_s = M_1 M_2 ⋯ M_t, as printed
        later_on_left = M * later_on_left;            // M_t ⋯ M_1
        printed.see(to_d(rel_err(mobius(left_to_right, lam0), lam)), where(r, rep, t));
        corrected.see(to_d(rel_err(mobius(later_on_left, lam0), lam)), where(r, rep, t));
      }
    }
  return printed_fails(printed.value, corrected.value, exact_tolerance(opt.bits),
                       "max rel. err. of M_{1:t}(lambda_0) vs the recurrence lambda_t = M_t(lambda_{t-1})",
                       "printed worst at " + printed.witness + "; corrected worst at " + corrected.witness,
                       "T=" + std::to_string(T) + ", " + std::to_string(reps) +
                           " sequences x 5 regimes, time-varying M_t (non-commuting)");
}

Evidence cor11_scan(const ProofOptions& opt) {
  const std::string id = "kla_k.cor1_1.scan_associativity";
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  using Block = MobiusBlock<mp>;
  const std::size_t S = std::size(kRegimes);  // one slot per regime
  Worst w;
  int scans = 0;
  const std::vector<int> lengths = opt.full ? std::vector<int>{1, 2, 3, 5, 7, 8, 13, 16, 31, 33}
                                            : std::vector<int>{1, 2, 5, 8, 13};
  for (int T : lengths) {
    std::vector<Block> Ms(T, Block::identity(S));
    std::vector<std::vector<mp>> lam(S);  // the recurrence, per slot
    std::vector<mp> lam0(S);
    for (std::size_t s = 0; s < S; ++s) {
      const std::vector<Token> tokens = draw_tokens(rng, kRegimes[s], T, true);
      lam0[s] = draw_prior(rng).lambda;
      mp l = lam0[s];
      for (int t = 0; t < T; ++t) {
        const Mat<mp> M = printed_M(tokens[t]);
        Ms[t].a[s] = M(0, 0);
        Ms[t].b[s] = M(0, 1);
        Ms[t].c[s] = M(1, 0);
        Ms[t].d[s] = M(1, 1);
        l = printed_eq16(tokens[t], l);
        lam[s].push_back(l);
      }
    }
    // Associativity of the composition, on consecutive triples.
    for (int t = 0; t + 2 < T; ++t) {
      Block xy = Ms[t], yz = Ms[t], left = Ms[t], right = Ms[t];
      compose_mobius(Ms[t], Ms[t + 1], xy);
      compose_mobius(xy, Ms[t + 2], left);
      compose_mobius(Ms[t + 1], Ms[t + 2], yz);
      compose_mobius(Ms[t], yz, right);
      for (std::size_t s = 0; s < S; ++s)
        w.see(std::max({to_d(rel_err(left.a[s], right.a[s])), to_d(rel_err(left.b[s], right.b[s])),
                        to_d(rel_err(left.c[s], right.c[s])), to_d(rel_err(left.d[s], right.d[s]))}),
              "associativity, T=" + std::to_string(T) + ", t=" + std::to_string(t) + ", regime " + name(kRegimes[s]));
    }
    // Prefix scans of reference/scan/blelloch.hpp: whole-sequence Blelloch and chunked.
    for (int chunk : {0, 1, 2, 3, 5}) {
      std::vector<Block> xs = Ms;
      if (chunk == 0)
        blelloch_inclusive_scan(xs, Block::identity(S), compose_mobius<mp>);
      else
        chunked_inclusive_scan(xs, static_cast<std::size_t>(chunk), Block::identity(S), compose_mobius<mp>);
      ++scans;
      for (int t = 0; t < T; ++t)
        for (std::size_t s = 0; s < S; ++s) {
          mp out, den;
          apply_mobius(xs[t], s, lam0[s], out, den);
          w.see(to_d(rel_err(out, lam[s][t])), "scan " + (chunk ? "chunk " + std::to_string(chunk) : "blelloch") +
                                                   ", T=" + std::to_string(T) + ", t=" + std::to_string(t + 1) +
                                                   ", regime " + name(kRegimes[s]));
        }
    }
  }
  return holds_if(w.value, exact_tolerance(opt.bits),
                  "max rel. err.: (xy)z vs x(yz) entrywise; prefix-scanned P_t(lambda_0) vs the recurrence", w.witness,
                  std::to_string(scans) + " scans (Blelloch and chunk 1, 2, 3, 5) x 5 slots (one per regime)");
}

// ------------------------------------------------------------------ Cor. 2.1

struct Affine {
  mp f, b;
};
// As printed: (f2, b2) ⊕ (f1, b1) = (f2 f1, f2 b1 + b2), the later map on the left.
Affine oplus(const Affine& later, const Affine& earlier) {
  return {later.f * earlier.f, later.f * earlier.b + later.b};
}

Evidence cor21(const ProofOptions& opt) {
  const std::string id = "kla_k.cor2_1.affine_scan";
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int T = opt.full ? 16 : 8, reps = opt.full ? 10 : 2;
  Worst w;
  int n = 0;
  for (Regime r : kRegimes)
    for (int rep = 0; rep < reps; ++rep) {
      const std::vector<Token> tokens = draw_tokens(rng, r, T, true);
      const Prior prior = draw_prior(rng);
      const mp eta0 = prior.lambda * prior.mu;
      std::vector<Affine> maps;
      std::vector<mp> eta_seq;  // eq. (19), step by step
      mp lam = prior.lambda, eta = eta0;
      for (const Token& tok : tokens) {
        const mp f = printed_forget_gate(tok, lam);
        // The proof's aside: f_t = a^{-1} when p_t = 0.
        if (tok.p == 0) w.see(to_d(rel_err(f, 1 / tok.a)), "f_t = 1/a_bar at p=0, " + name(r));
        maps.push_back({f, tok.k * tok.lv * tok.v});
        eta = printed_eq19(tok, lam, eta);
        lam = printed_eq18(tok, lam);
        eta_seq.push_back(eta);
      }
      // Reference Blelloch and chunked scans with combine(earlier, later) = later ⊕ earlier.
      const auto combine = [](const Affine& e, const Affine& l) { return oplus(l, e); };
      std::vector<Affine> blelloch = maps, chunked = maps;
      blelloch_inclusive_scan(blelloch, Affine{mp(1), mp(0)}, combine);
      chunked_inclusive_scan(chunked, 3, Affine{mp(1), mp(0)}, combine);
      Affine folded = maps[0];
      for (int t = 1; t <= T; ++t, ++n) {
        if (t > 1) folded = oplus(maps[t - 1], folded);  // (f_t, b_t) ⊕ … ⊕ (f_1, b_1), printed order
        // Brute force: η_t = (∏_{s≤t} f_s) η_0 + Σ_j (∏_{j<s≤t} f_s) b_j.
        mp brute = eta0;
        for (int s = 1; s <= t; ++s) brute *= maps[s - 1].f;
        for (int j = 1; j <= t; ++j) {
          mp term = maps[j - 1].b;
          for (int s = j + 1; s <= t; ++s) term *= maps[s - 1].f;
          brute += term;
        }
        const auto eval = [&](const Affine& m) { return mp(m.f * eta0 + m.b); };
        w.see(std::max({to_d(rel_err(eval(folded), brute)), to_d(rel_err(eta_seq[t - 1], brute)),
                        to_d(rel_err(eval(blelloch[t - 1]), brute)), to_d(rel_err(eval(chunked[t - 1]), brute))}),
              where(r, rep, t));
      }
      for (int t = 0; t + 2 < T; ++t) {  // associativity of ⊕
        const Affine l = oplus(oplus(maps[t + 2], maps[t + 1]), maps[t]), rr = oplus(maps[t + 2], oplus(maps[t + 1], maps[t]));
        w.see(std::max(to_d(rel_err(l.f, rr.f)), to_d(rel_err(l.b, rr.b))), "associativity, " + where(r, rep, t + 1));
      }
    }
  return holds_if(w.value, exact_tolerance(opt.bits),
                  "max rel. err. of f_{1:t} eta_0 + b_{1:t} (printed fold order, Blelloch, chunk 3) and of eq. (19) "
                  "vs the brute-force sum; associativity of (+); f_t = 1/a_bar at p=0",
                  w.witness, std::to_string(n) + " (sequence, t) pairs, T=" + std::to_string(T) + ", 5 regimes, eta_0 != 0");
}

}  // namespace

std::vector<Entry> scan_entries() {
  std::vector<Entry> v;
  v.push_back({"kla_k.cor1_1.prefix_product_order", Paper::KLA_K, "Cor. 1.1",
               "lambda_t = (M_t o ... o M_1)(lambda_0) = M_{1:t}(lambda_0) with M_{1:t} := prod_{s=1}^t M_s "
               "(proof of Cor. 1.1)",
               Method::exact_identity,
               "MPFR opt.bits; prod_{s=1}^t M_s read as M_1 M_2 ... M_t (index increasing left to right) and the "
               "corrected M_t ... M_1, applied to lambda_0, vs the recurrence lambda_t = M_t(lambda_{t-1}); T=6, 3 "
               "sequences x 5 regimes, time-varying (non-commuting) M_t",
               Status::fails_as_printed,
               "M_{1:t} = M_t M_{t-1} ... M_1 (the later matrix on the left), matching the composition "
               "M_t o ... o M_1 written just before",
               false, cor11_order});
  v.push_back({"kla_k.cor1_1.scan_associativity", Paper::KLA_K, "Cor. 1.1",
               "Möbius maps compose by 2x2 matrix multiplication, which is associative, so a parallel prefix scan "
               "over {M_t} gives every lambda_t",
               Method::exact_identity,
               "MPFR opt.bits; reference compose_mobius: (xy)z vs x(yz) entrywise on consecutive triples; "
               "reference blelloch_inclusive_scan and chunked_inclusive_scan (chunk 1, 2, 3, 5) over M_t of eq. "
               "(17), P_t(lambda_0) vs the recurrence; T in {1, 2, 5, 8, 13}, one slot per regime",
               Status::holds, "", false, cor11_scan});
  v.push_back({"kla_k.cor2_1.affine_scan", Paper::KLA_K, "Cor. 2.1",
               "with (f2, b2) (+) (f1, b1) = (f2 f1, f2 b1 + b2), (f_{1:t}, b_{1:t}) = (f_t, b_t) (+) ... (+) (f_1, "
               "b_1) gives eta_t = f_{1:t} eta_0 + b_{1:t}; f_t = 1/a when p_t = 0",
               Method::exact_identity,
               "MPFR opt.bits; printed fold order, reference Blelloch and chunked (3) scans with the printed (+), "
               "and eq. (19) step by step, vs the brute-force sum prod f eta_0 + sum_j prod_{s>j} f_s b_j; "
               "associativity on triples; T=8, 2 sequences x 5 regimes, eta_0 != 0",
               Status::holds, "", false, cor21});
  return v;
}

}  // namespace ttr::proofs::klak
