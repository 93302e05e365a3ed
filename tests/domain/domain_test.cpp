// The guaranteed domains (oracles/domain.hpp, docs/domains.md), against an
// independent computation of the forms' intermediates: the range trace
// (gate/range.hpp) runs a form exactly (double exponent range) and reports the
// first intermediate beyond its format's largest finite value.
//
// For each derived family, at the worst case of its derivation (docs/domains.md
// names it), the amplitude a of the inputs is walked on a grid of values exact
// in bf16 and fp16 (3-bit mantissas):
//  * just inside the domain (the largest a with no condition violated) the exact
//    trace finds nothing beyond, in every form, direction and dtype of the
//    derivation, and every form run in that dtype returns finite outputs;
//  * the smallest a at which the trace finds an intermediate beyond is where the
//    named limiting condition is violated by a factor f* ≥ 1 (soundness), and
//    f* ≤ 2 in the limiting form (the bound is not vacuous); f* is printed — it
//    is how tight the bound is (docs/domains.md quotes these numbers).
// `check`'s domain note, on hand-made inputs whose bounds are derived here,
// appears exactly when a condition is violated.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gate/check_request.hpp"
#include "gate/domain_note.hpp"
#include "gate/range.hpp"
#include "gate/report.hpp"
#include "oracles/catalogue.hpp"
#include "oracles/domain.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/domain/domain_probe.hpp"

namespace ttr::test {
namespace {

using namespace domain_probe;

// Gated linear worst case (docs/domains.md): scale = 1, q = 1, k = v = a, g = 0,
// (backward) do = a: Ŝ = T a² is the last state's every entry, the output
// K·T·a² its last token's, dq and dk reach their bounds too.
TensorMap<double> gated_linear_worst(const LayerSpec& s, Direction d, double a) {
  TensorMap<double> in;
  in["q"] = tensor({1, kT, 1, kK}, 1.0);
  in["k"] = tensor({1, kT, 1, kK}, a);
  in["v"] = tensor({1, kT, 1, kV}, a);
  if (const TensorSpec* g = s.input("g")) in["g"] = tensor(g->dims.size() == 3 ? Shape{1, kT, 1} : Shape{1, kT, 1, kK}, 0.0);
  if (d == Direction::backward) in["do"] = tensor({1, kT, 1, kV}, a);
  return in;
}

// Delta worst case: scale = 1, q = k = (1, 1, 0, 0) (‖k‖² = 2), β‖k‖² = 2 (β = 1,
// or Kaczmarz's β̃ = 2/(2 + eps)), v_t = (−1)^t a e₁, g = 0: the write is a
// reflection and the state grows linearly, ‖S_t‖_F = √2 t a = B_t exactly.
TensorMap<double> delta_worst(const LayerSpec& s, Direction d, double a, std::int64_t T = kT) {
  TensorMap<double> in;
  in["q"] = tensor({1, T, 1, kK}, 0.0);
  in["k"] = tensor({1, T, 1, kK}, 0.0);
  in["v"] = tensor({1, T, 1, kV}, 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t i = 0; i < 2; ++i) in["q"].data[t * kK + i] = in["k"].data[t * kK + i] = 1.0;
    in["v"].data[t * kV] = (t % 2 == 0 ? -a : a);
  }
  in["beta"] = tensor({1, T, 1}, s.input("beta")->range.hi);  // 1, or Kaczmarz's relaxation 2
  if (const TensorSpec* g = s.input("g")) in["g"] = tensor(g->dims.size() == 3 ? Shape{1, T, 1} : Shape{1, T, 1, kK}, 0.0);
  // Backward: do_t = (−1)^t a e₁ alternates like v, so the adjoint, reflected by the
  // same writes, grows linearly too.
  if (d == Direction::backward) {
    in["do"] = tensor({1, T, 1, kV}, 0.0);
    for (std::int64_t t = 0; t < T; ++t) in["do"].data[t * kV] = (t % 2 == 0 ? -a : a);
  }
  return in;
}

TEST(Domain, EveryDeclaredLayerHasOne) {
  for (const LayerEntry& e : registry()) {
    const LayerDomain* d = layer_domain(e.spec.name);
    if (!d) continue;  // a layer registered at run time by another test
    EXPECT_EQ(d->family, e.spec.family) << e.spec.name;
    EXPECT_TRUE(!d->conditions.empty() || !d->gaps.empty()) << e.spec.name;
  }
  for (const char* name : {"linear_attn", "simple_gla", "gla", "delta_rule", "gated_delta_rule", "kda",
                           "kaczmarz_delta_rule", "precond_gated_delta_rule", "precond_kda", "gka", "kalman_filter",
                           "pdn_exact", "kla_kalman"})
    ASSERT_NE(layer_domain(name), nullptr) << name;
  // The catalogue (`ttrcheck layers --json`, Python's layers()) carries it.
  const nlohmann::json gl = layer_json(find_layer("simple_gla"));
  ASSERT_TRUE(gl.contains("domain"));
  EXPECT_EQ(gl["domain"]["conditions"][1]["name"], "state");
  EXPECT_EQ(gl["domain"]["conditions"][1]["limits"]["chunk backward"]["fp16"], 65504.0);
  EXPECT_TRUE(gl["domain"]["not_derived"].empty());
  // gka: derived for every form and direction, but for the backward with solver=cg.
  const nlohmann::json gka = layer_json(find_layer("gka"));
  EXPECT_FALSE(gka["domain"]["conditions"].empty());
  ASSERT_EQ(gka["domain"]["not_derived"].size(), 1u);
  EXPECT_EQ(gka["domain"]["not_derived"][0]["directions"], nlohmann::json::array({"backward"}));
}

TEST(Domain, GatedLinearWorstCaseIsSoundAndTight) {
  for (const char* name : {"linear_attn", "simple_gla", "gla"}) {
    const LayerEntry& e = find_layer(name);
    for (Direction dir : {Direction::forward, Direction::backward})
      for (Form form : e.form_list(dir))
        for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16}) {
          const Probe p{e, dir, form, dtype, gated_linear_worst};
          // Forward: the last output K·T·a² is the bound `output` (and the chunk's
          // `unscaled output`; scale = 1). Backward without a gate: dq_T = V·T·a³ is
          // the bound `dq`. With a gate, `dg` binds first and is loose: its bound
          // K·V·D̂·Ŝ takes both factors at their maxima, the exact per-token term
          // peaks mid-sequence (about 4× below at T = 16).
          walk(p, dir == Direction::forward || !e.spec.input("g"));
        }
  }
}

// The preconditioned layers at the delta worst case: the preconditioner held at
// B_t = 1 (A_t = A_0 = 1 with β_atk = g_atk = 0, and the centre c = log(1 + eps), so
// r_t = 0 exactly in the trace), the L2 norm off so that β‖k‖² = 2: the write is
// the same reflection (PDN eq. (9) with k̃ = k).
TensorMap<double> precond_worst(const LayerSpec& s, Direction d, double a) {
  TensorMap<double> in = delta_worst(s, d, a);
  in["g_atk"] = tensor({1, kT, 1}, 0.0);
  in["beta_atk"] = tensor({1, kT, 1}, 0.0);
  in["initial_A_state"] = tensor({1, 1, kK}, 1.0);
  in["log_atk_scale"] = tensor({1}, std::log(1.0 + 1e-6));
  return in;
}

TEST(Domain, DeltaWorstCaseIsSoundAndTight) {
  for (const char* name : {"delta_rule", "gated_delta_rule", "kda", "kaczmarz_delta_rule", "precond_gated_delta_rule",
                           "precond_kda"}) {
    const LayerEntry& e = find_layer(name);
    const bool precond = e.spec.input("g_atk") != nullptr;
    const Config cfg = Config::make(e.spec, precond ? std::vector<std::pair<std::string, std::string>>{
                                                          {"scale", "1"}, {"use_qk_l2norm_in_kernel", "false"}}
                                                    : std::vector<std::pair<std::string, std::string>>{{"scale", "1"}});
    for (Direction dir : {Direction::forward, Direction::backward})
      for (Form form : e.form_list(dir))
        for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16}) {
          const Probe p{e, dir, form, dtype, precond ? Builder(precond_worst) : Builder([](const LayerSpec& ls, Direction dd, double a) { return delta_worst(ls, dd, a); }), cfg};
          EXPECT_TRUE(p.dom.covers(p.ctx())) << p.label();
          // Sequential forward: the write k_t δ_tᵀ has entries (2t − 1)a against the
          // bound `residual` √2(2t − 1)a (f* ≈ √2). Chunk: the WY and output bounds add
          // the chunk's terms without their cancellations; backward: the gradient
          // bounds multiply norms of the state, adjoint and residual, and the chunk
          // backward's bounds add the UT transform's row sums Θ (printed, not asserted).
          walk(p, dir == Direction::forward && form == Form::sequential);
        }
  }
}

// The chunk backward holds intermediates of its own (the UT transform's adjoint,
// dΔ, dWy, its gradient sums): at the delta worst case with T = 64 and chunks of 8
// in fp32 its exact trace leaves fp32 at an amplitude where the sequential
// adjoint's does not, so there the conditions it shares with the sequential
// adjoint (`gradients` on the final values, the state and residual) all hold, and
// only its own — chunk adjoint, UT adjoint, chunk gradients — exclude the input.
// Cutting them (e.g. to 1/64) makes this test fail: the walk finds the trace
// beyond inside the domain.
TEST(Domain, DeltaChunkBackwardNeedsItsOwnConditions) {
  const LayerEntry& e = find_layer("delta_rule");
  const Builder long_worst = [](const LayerSpec& s, Direction d, double a) { return delta_worst(s, d, a, 64); };
  const Probe chunk{e, Direction::backward, Form::chunk, Tier::fp32, long_worst};
  const Probe seq{e, Direction::backward, Form::sequential, Tier::fp32, long_worst};
  walk(chunk, false);
  const int n = first_beyond(chunk);
  EXPECT_LT(n, first_beyond(seq)) << "the chunk backward leaves fp32 no earlier than the sequential adjoint";
  std::vector<std::string> own, shared;
  for (const DomainViolation& v : chunk.violations(n))
    (v.condition == "chunk adjoint" || v.condition == "UT adjoint" || v.condition == "chunk gradients" ? own : shared)
        .push_back(v.condition);
  EXPECT_FALSE(own.empty());
  EXPECT_TRUE(shared.empty()) << shared.front();
}

// Kaczmarz's step β̃ = β/(‖k‖² + eps) is stored in the 16-bit format: a zero key
// makes it β/eps = 10^6, beyond fp16 (inf·0 = NaN in the write), while the truth
// is finite (a zero key writes nothing). The domain says so; fp32 is inside.
TEST(Domain, KaczmarzZeroKeyLeavesTheFp16Domain) {
  const LayerEntry& e = find_layer("kaczmarz_delta_rule");
  const Builder zero_key = [](const LayerSpec&, Direction, double) {
    TensorMap<double> in;
    in["q"] = tensor({1, 2, 1, 2}, 1.0);
    in["k"] = tensor({1, 2, 1, 2}, 0.0);
    in["v"] = tensor({1, 2, 1, 2}, 1.0);
    in["g"] = tensor({1, 2, 1}, 0.0);
    in["beta"] = tensor({1, 2, 1}, 1.0);
    return in;
  };
  for (Form form : {Form::sequential, Form::chunk}) {
    const Probe p16{e, Direction::forward, form, Tier::fp16, zero_key};
    // β̃ = 1/eps; the residual δ = β̃·v (v = (1, 1): ‖v‖ = √2) and, in the chunk, U = β̃ ⊙ V follow.
    const auto v = p16.violations(0);
    std::vector<std::string> names;
    for (const DomainViolation& x : v) names.push_back(x.condition);
    const std::vector<std::string> expected =
        form == Form::chunk ? std::vector<std::string>{"inputs", "residual", "WY"}
                            : std::vector<std::string>{"inputs", "residual"};
    EXPECT_EQ(names, expected) << p16.label();
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v[0].condition, "inputs");
    EXPECT_NEAR(v[0].value, 1e6, 1e3);  // 1/eps, eps = 1e-6 (the fp16 sequential form's: 1/fp16(1e-6))
    EXPECT_EQ(v[0].limit, 65504.0);
    EXPECT_TRUE(p16.beyond(0)) << p16.label();
    EXPECT_FALSE(p16.finite(0)) << p16.label();
    const Probe p32{e, Direction::forward, form, Tier::fp32, zero_key};
    EXPECT_TRUE(p32.violations(0).empty()) << p32.label();
    EXPECT_TRUE(p32.finite(0)) << p32.label();
  }
}

// `check --report`: the domain note appears exactly when a condition is violated.
// linear_attn, T = 4, K = V = 2, scale = 1, q = 1, k = v = a, fp16 chunk form:
// Ŝ = T a² = 4a², output = scale·‖q‖₁·Ŝ = 8a², scores = ‖q‖₁·max|k| = 2a,
// unscaled output 8a² (against fp32). a = 64: 16384, 32768, 128 — inside.
// a = 128: state 65536 and output 131072 exceed fp16's 65504 — the only two.
io::TensorFile file_of(const TensorMap<double>& m) {
  io::TensorFile f;
  for (const auto& [name, t] : m) f.tensors[name] = io::from_f64(t.data, t.shape, io::DType::F32);
  return f;
}

struct NotedCheck {
  NamedCheck check;
  std::vector<DomainViolation> domain;
};

NotedCheck check_linear_attn(double a) {
  const std::int64_t T = 4, K = 2, V = 2;
  TensorMap<double> in;
  in["q"] = tensor({1, T, 1, K}, 1.0);
  in["k"] = tensor({1, T, 1, K}, a);
  in["v"] = tensor({1, T, 1, V}, a);
  // The exact outputs: S_t = t a² in every entry, o_t = K t a², ht = T a².
  TensorMap<double> cand;
  cand["o"] = tensor({1, T, 1, V}, 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < V; ++j) cand["o"].data[t * V + j] = static_cast<double>(K * (t + 1)) * a * a;
  cand["ht"] = tensor({1, 1, K, V}, static_cast<double>(T) * a * a);
  CheckRequest r;
  r.layer = "linear_attn";
  r.inputs = file_of(in);
  r.candidate = file_of(cand);
  r.dtype = "fp16";
  r.form = "chunk";
  r.chunk_size = 2;
  r.sets = {"scale=1"};
  NotedCheck out;
  out.check = run_check(r, &out.domain);
  return out;
}

TEST(Domain, CheckNotesExactlyTheViolatedConditions) {
  const NotedCheck inside = check_linear_attn(64.0);
  EXPECT_TRUE(inside.domain.empty());
  EXPECT_FALSE(check_report_json(inside.check, inside.domain)["checks"][0].contains("domain"));

  const NotedCheck outside = check_linear_attn(128.0);
  ASSERT_EQ(outside.domain.size(), 2u);
  const nlohmann::json j = check_report_json(outside.check, outside.domain)["checks"][0];
  ASSERT_TRUE(j.contains("domain"));
  EXPECT_EQ(j["domain"]["form"], "chunk");
  const auto& v = j["domain"]["violated"];
  EXPECT_EQ(v[0]["condition"], "state");
  EXPECT_EQ(v[0]["value"], 65536.0);
  EXPECT_EQ(v[0]["limit"], 65504.0);
  EXPECT_EQ(v[0]["format"], "fp16");
  EXPECT_EQ(v[1]["condition"], "output");
  EXPECT_EQ(v[1]["value"], 131072.0);
  // A note, not a failure: the candidate is the exact output, so every ratio is 0
  // where the oracle is representable in fp16, and rows beyond fp16 form none.
  EXPECT_TRUE(outside.check.second.pass);

  // The table names the conditions, their values and the limit.
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  print_check_table(f, outside.check, outside.domain);
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
  std::fclose(f);
  EXPECT_NE(text.find("domain: the inputs leave the guaranteed domain of the chunk forward form in fp16"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("state = 65536 > 65504 (fp16's largest finite value); output = 131072 > 65504"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ttr::test
