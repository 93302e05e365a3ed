// The backward passes in reference/ are generic over the scalar tier, like the
// forwards: every one of them instantiated for fp32, fp64, bf16 and MPFI (and MPFR,
// the other tests), checked against the MPFR-512 hand adjoint (itself checked
// against reverse mode and central differences in the other backward tests):
//   * fp64 within 1e-12 and fp32 within 1e-4 (normwise relative: short sequences of
//     contractions, so the error is a small multiple of the unit roundoff);
//   * bf16 finite and within 0.25 (8 significant bits, several roundings per term);
//   * MPFI at 256 bits: every gradient interval ENCLOSES the 512-bit value (interval
//     arithmetic of the same adjoint; a wrong formula would still give an
//     enclosure of the wrong number, so this checks the tier, not the math);
//   * the tape over double: reverse mode through the fp64 forward agrees with the
//     fp64 hand adjoint within 1e-13.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "oracles/tiers/bf16.hpp"
#include "reference/delta_rule/backward.hpp"
#include "reference/family/l2norm_backward.hpp"
#include "reference/gated_delta_rule/backward.hpp"
#include "reference/gated_delta_rule/sequential.hpp"
#include "reference/gka/backward.hpp"
#include "reference/gla/backward.hpp"
#include "reference/kaczmarz_delta_rule/backward.hpp"
#include "reference/kalman_filter/backward.hpp"
#include "reference/kda/backward.hpp"
#include "reference/kla_kalman/backward.hpp"
#include "reference/linear_attn/backward.hpp"
#include "reference/pdn_exact/backward.hpp"
#include "reference/precond_gated_delta_rule/backward.hpp"
#include "reference/simple_gla/backward.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;
using ttr::TensorMap;
using ttr::mpfi_real;
using bf16 = ttr::tiers::bf16;

constexpr std::int64_t B = 1, T = 6, H = 2, K = 3, V = 3;

TensorMap<double> inputs() {
  TensorMap<double> in;
  std::uint64_t s = 900;
  in["q"] = ttr::test::uniform({B, T, H, K}, s++, -1, 1);
  in["k"] = ttr::test::uniform({B, T, H, K}, s++, -0.8, 0.8);
  in["v"] = ttr::test::uniform({B, T, H, V}, s++, -1, 1);
  in["beta"] = ttr::test::uniform({B, T, H}, s++, 0.05, 0.75);
  in["g"] = ttr::test::uniform({B, T, H}, s++, -1, 0);
  in["gk"] = ttr::test::uniform({B, T, H, K}, s++, -1, 0);
  in["g_atk"] = ttr::test::uniform({B, T, H}, s++, -1, 0);
  in["beta_atk"] = ttr::test::uniform({B, T, H}, s++, 0.1, 1);
  in["center"] = ttr::test::uniform({H}, s++, -0.7, 0.3);
  in["A0"] = ttr::test::uniform({B, H, K}, s++, 0.05, 1);
  in["h0"] = ttr::test::uniform({B, H, K, V}, s++, -1, 1);
  in["do"] = ttr::test::uniform({B, T, H, V}, s++, -1, 1);
  in["dht"] = ttr::test::uniform({B, H, K, V}, s++, -1, 1);
  in["dAt"] = ttr::test::uniform({B, H, K}, s++, -1, 1);
  in["eta"] = ttr::test::uniform({B, T, H}, s++, 0.25, 2);
  in["lambda_v"] = ttr::test::uniform({B, T, H, V}, s++, 0.5, 2);
  in["a_bar"] = ttr::test::uniform({H, K, V}, s++, 0.5, 1);
  in["p_bar"] = ttr::test::uniform({H, K, V}, s++, 0.05, 0.5);
  in["do_var"] = ttr::test::uniform({B, T, H, V}, s++, -1, 1);
  return in;
}

template <class S>
TensorMap<S> convert(const TensorMap<double>& in) {
  TensorMap<S> out;
  for (const auto& [name, x] : in) {
    Tensor<S>& y = out[name];
    y.shape = x.shape;
    for (double d : x.data) y.data.push_back(ttr::from_double<S>(d));
  }
  return out;
}

// Every backward of reference/, in tier S; results named "<layer>.<gradient>".
template <class S>
TensorMap<S> all_grads(const TensorMap<double>& raw) {
  using std::log;
  const TensorMap<S> in = convert<S>(raw);
  const auto& q = in.at("q");
  const auto& k = in.at("k");
  const auto& v = in.at("v");
  const auto& beta = in.at("beta");
  const auto& g = in.at("g");
  const auto& gk = in.at("gk");
  const auto* h0 = &in.at("h0");
  const auto& dout = in.at("do");
  const auto* dht = &in.at("dht");
  const S scale = ttr::from_double<S>(0.5);
  TensorMap<S> r;
  auto at = [&r](const std::string& layer, const char* name) -> Tensor<S>& { return r[layer + "." + name]; };
  ttr::delta_rule_backward(q, k, v, beta, h0, scale, dout, dht, at("dn", "dq"), at("dn", "dk"), at("dn", "dv"),
                           at("dn", "dbeta"), at("dn", "dh0"));
  ttr::gated_delta_rule_backward(q, k, v, g, beta, h0, scale, dout, dht, at("gdn", "dq"), at("gdn", "dk"),
                                 at("gdn", "dv"), at("gdn", "dg"), at("gdn", "dbeta"), at("gdn", "dh0"));
  ttr::kda_backward(q, k, v, gk, beta, h0, scale, dout, dht, at("kda", "dq"), at("kda", "dk"), at("kda", "dv"),
                    at("kda", "dg"), at("kda", "dbeta"), at("kda", "dh0"));
  ttr::kaczmarz_delta_rule_backward(q, k, v, g, beta, ttr::from_double<S>(1.0 / 1024), h0, scale, dout, dht,
                                    at("kz", "dq"), at("kz", "dk"), at("kz", "dv"), at("kz", "dg"), at("kz", "dbeta"),
                                    at("kz", "dh0"));
  for (const bool per_key : {false, true}) {
    const std::string n = per_key ? "pkda" : "pgdn";
    const ttr::PrecondDelta<S> a{per_key ? ttr::Decay::per_key : ttr::Decay::scalar,
                                 q, k, v, per_key ? gk : g, beta, h0, scale, in.at("g_atk"), in.at("beta_atk"),
                                 in.at("center").data, &in.at("A0"), log(ttr::from_double<S>(1.5)),
                                 ttr::from_double<S>(1e-6)};
    ttr::PrecondDeltaGrads<S> d;
    ttr::precond_delta_backward<S>(a, {dout, dht, &in.at("dAt")}, d);
    at(n, "dq") = d.dq, at(n, "dk") = d.dk, at(n, "dv") = d.dv, at(n, "dg") = d.dg, at(n, "dbeta") = d.dbeta;
    at(n, "dg_atk") = d.dg_atk, at(n, "dbeta_atk") = d.dbeta_atk, at(n, "dh0") = d.dh0, at(n, "dA0") = d.dA0;
    at(n, "dcenter") = d.dlog_atk_scale;
  }
  ttr::linear_attn_backward(q, k, v, h0, scale, dout, dht, at("la", "dq"), at("la", "dk"), at("la", "dv"),
                            at("la", "dh0"));
  ttr::simple_gla_backward(q, k, v, g, h0, scale, dout, dht, at("sgla", "dq"), at("sgla", "dk"), at("sgla", "dv"),
                           at("sgla", "dg"), at("sgla", "dh0"));
  ttr::gla_backward(q, k, v, gk, h0, scale, dout, dht, at("gla", "dq"), at("gla", "dk"), at("gla", "dv"),
                    at("gla", "dg"), at("gla", "dh0"));
  const S lambda = ttr::from_double<S>(0.75);
  ttr::pdn_exact_backward(q, k, v, h0, lambda, scale, dout, dht, at("pdn", "dq"), at("pdn", "dk"), at("pdn", "dv"),
                          at("pdn", "dh0"));
  ttr::kalman_filter_backward(q, k, v, &in.at("eta"), h0, lambda, scale, dout, dht, at("kf", "dq"), at("kf", "dk"),
                              at("kf", "dv"), at("kf", "deta"), at("kf", "dh0"));
  {
    const ttr::KlaInputs<S> x{q, k, v, in.at("lambda_v"), in.at("a_bar"), in.at("p_bar"), nullptr, nullptr};
    ttr::KlaGrads<S> kg;
    ttr::kla_kalman_backward(x, ttr::from_double<S>(1.25), scale, {dout, &in.at("do_var"), nullptr, nullptr}, kg);
    for (auto [name, t] : {std::pair{"dq", &kg.dq}, {"dk", &kg.dk}, {"dv", &kg.dv}, {"dlambda_v", &kg.dlambda_v},
                           {"da_bar", &kg.da_bar}, {"dp_bar", &kg.dp_bar}, {"dlambda_init", &kg.dlambda_init}})
      at("kla", name) = *t;
  }
  for (const auto solver : {ttr::GkaSolver::exact, ttr::GkaSolver::chebyshev, ttr::GkaSolver::cg}) {
    ttr::GkaOptions o;
    o.solver = solver;
    o.a = 0.1;
    o.iters = solver == ttr::GkaSolver::cg ? 2 : 5;  // CG: r < K (cg_backward.hpp)
    const ttr::GkaInputs<S> x{q, k, v, g, &beta, &in.at("eta"), h0, nullptr};  // eta ∈ [0.25, 2] as α
    ttr::GkaGrads<S> gg;
    ttr::gka_backward(x, o, scale, {dout, dht, nullptr}, gg);
    const std::string n = solver == ttr::GkaSolver::exact ? "gka" : solver == ttr::GkaSolver::chebyshev ? "gka_ch" : "gka_cg";
    for (auto [name, t] : {std::pair{"dq", &gg.dq}, {"dk", &gg.dk}, {"dv", &gg.dv}, {"dg", &gg.dg},
                           {"dbeta", &gg.dbeta}, {"dalpha", &gg.dalpha}, {"dh0", &gg.dh0}})
      at(n, name) = *t;
  }
  at("l2", "dq") = ttr::l2normalize_rows_backward(q, dout, ttr::from_double<S>(1e-6));  // any [.., F] cotangent
  return r;
}

// Normwise relative error of a tier's gradients against the 512-bit ones (through double).
template <class S>
double worst_rel(const TensorMap<S>& got, const TensorMap<mp>& want) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    const Tensor<S>& x = got.at(name);
    double num = 0, den = 0;
    for (std::size_t e = 0; e < w.data.size(); ++e) {
      const double a = ttr::to_double(x.data[e]), b = ttr::to_double(w.data[e]);
      EXPECT_TRUE(std::isfinite(a)) << name;
      num = std::max(num, std::abs(a - b));
      den = std::max(den, std::abs(b));
    }
    worst = std::max(worst, num / den);
  }
  return worst;
}

TEST(BackwardTiers, EveryBackwardInstantiatesForEveryTier) {
  Mp512 prec;
  const TensorMap<double> raw = inputs();
  const TensorMap<mp> ref = all_grads<mp>(raw);
  EXPECT_EQ(ref.size(), 95u);
  const double e64 = worst_rel(all_grads<double>(raw), ref);
  const double e32 = worst_rel(all_grads<float>(raw), ref);
  const double e16 = worst_rel(all_grads<bf16>(raw), ref);
  EXPECT_LT(e64, 1e-12);
  EXPECT_LT(e32, 1e-4);
  EXPECT_LT(e16, 0.25);
  if (std::getenv("TTR_GRAD_VERBOSE")) std::cout << "  fp64 " << e64 << "  fp32 " << e32 << "  bf16 " << e16 << "\n";
  // MPFI at 256 bits encloses the 512-bit values.
  const unsigned saved = mpfi_real::default_precision();
  EXPECT_GE(ttr::precision_control<mpfi_real>::set_bits(256), 256u);
  const TensorMap<mpfi_real> iv = all_grads<mpfi_real>(raw);
  mpfi_real::default_precision(saved);
  for (const auto& [name, w] : ref)
    for (std::size_t e = 0; e < w.data.size(); ++e) {
      const auto& x = iv.at(name).data[e].backend().data();
      EXPECT_GT(mpfi_is_inside_fr(w.data[e].backend().data(), x), 0) << name << " element " << e;
    }
}

// Reverse mode over double (Taped<double>) through the fp64 forward agrees with the
// fp64 hand adjoint: the tape is generic over its base scalar.
TEST(BackwardTiers, TapeOverDoubleMatchesTheDoubleAdjoint) {
  const TensorMap<double> raw = inputs();
  TensorMap<double> in{{"q", raw.at("q")}, {"k", raw.at("k")}, {"v", raw.at("v")},
                       {"g", raw.at("g")}, {"beta", raw.at("beta")}, {"h0", raw.at("h0")}};
  ttr::Tape<double> tape;
  ttr::TapeScope<double> scope(tape);
  using td = ttr::Taped<double>;
  TensorMap<td> tin;
  for (const auto& [name, x] : in) tin[name] = ttr::tape_inputs(x);
  Tensor<td> o, ht;
  ttr::gated_delta_rule_sequential<td>(tin.at("q"), tin.at("k"), tin.at("v"), tin.at("g"), tin.at("beta"),
                                       &tin.at("h0"), td(0.5), o, ht);
  std::vector<std::pair<int, double>> seeds;
  for (std::size_t e = 0; e < o.data.size(); ++e) seeds.emplace_back(o.data[e].id, raw.at("do").data[e]);
  for (std::size_t e = 0; e < ht.data.size(); ++e) seeds.emplace_back(ht.data[e].id, raw.at("dht").data[e]);
  const std::vector<double> adj = tape.adjoints(seeds);
  TensorMap<double> hand;
  ttr::gated_delta_rule_backward(in.at("q"), in.at("k"), in.at("v"), in.at("g"), in.at("beta"), &in.at("h0"), 0.5,
                                 raw.at("do"), &raw.at("dht"), hand["q"], hand["k"], hand["v"], hand["g"],
                                 hand["beta"], hand["h0"]);
  for (const auto& [name, x] : tin) {
    const Tensor<double> t = ttr::tape_adjoints(adj, x);
    double num = 0, den = 0;
    for (std::size_t e = 0; e < t.data.size(); ++e) {
      num = std::max(num, std::abs(t.data[e] - hand.at(name).data[e]));
      den = std::max(den, std::abs(t.data[e]));
    }
    EXPECT_LT(num / den, 1e-13) << name;
    EXPECT_GT(den, 1e-6) << name;
  }
}

}  // namespace
