// Arithmetic policies of foreign kernels (gate/policies.hpp): a kernel built here,
// independently of ttrcheck's forms, that multiplies in TF32 (Triton's default for
// an fp32 tl.dot) passes as tf32 and fails as fp32; the fp32-rounded oracle passes
// as fp32 and is explained by it; a failure at a row whose exact value is 0 is
// noted as floor-bound; bad policy names and a policy contradicting --dtype are
// one-line InputErrors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gate/check_request.hpp"
#include "gate/policies.hpp"
#include "gate/report.hpp"
#include "oracles/error.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "reference/core/mca.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

// A float rounded to TF32 (10 explicit significand bits), to nearest even: what a
// tensor core reads of an fp32 matrix operand.
float tf32(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0xFFFu + ((u >> 13) & 1u);
  u &= ~0x1FFFu;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

TEST(ForeignPolicyTf32, RoundingHelperAndMcaFormatAgree) {
  EXPECT_EQ(tf32(1.0f), 1.0f);
  EXPECT_EQ(tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f);                       // a tie: to even
  EXPECT_EQ(tf32(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));  // a tie: up to even
  EXPECT_EQ(tf32(1.0f + std::ldexp(1.0f, -10)), 1.0f + std::ldexp(1.0f, -10));     // representable
  for (float x : {1.0f, 0.75f, 1.0f + std::ldexp(1.0f, -10), 3.1415926f, 1e-30f})
    EXPECT_EQ(mca_representable(x, McaFormat::tf32), tf32(x) == x) << x;
}

// Chunkwise linear attention (o_t = scale·Σ_{s≤t} (q_t·k_s) v_s) as a Triton kernel
// computes it in fp32 with TF32 dots: per chunk of C tokens, the score matrix
// A = Q Kᵀ (causal) and the chunk-initial state S are fp32 results fed to the next
// dot as TF32 operands; every product accumulates in fp32; S += Kᵀ V in fp32.
// Written from the math, not from reference/family/gated_linear_chunk.hpp.
void tf32_linear_attention(const Tensor<double>& q, const Tensor<double>& k, const Tensor<double>& v, float scale,
                           int C, Tensor<double>& o, Tensor<double>& ht) {
  const std::int64_t B = q.shape[0], T = q.shape[1], H = q.shape[2], K = q.shape[3], V = v.shape[3];
  o = Tensor<double>({B, T, H, V}, 0.0);
  ht = Tensor<double>({B, H, K, V}, 0.0);
  auto at = [&](const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t i,
                std::int64_t W) { return static_cast<float>(x.data[((b * T + t) * H + h) * W + i]); };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      std::vector<float> S(K * V, 0.0f);
      for (std::int64_t t0 = 0; t0 < T; t0 += C) {
        const std::int64_t c = std::min<std::int64_t>(C, T - t0);
        std::vector<float> A(c * c, 0.0f);
        for (std::int64_t i = 0; i < c; ++i)
          for (std::int64_t j = 0; j <= i; ++j) {
            float acc = 0.0f;
            for (std::int64_t d = 0; d < K; ++d) acc += tf32(at(q, b, t0 + i, h, d, K)) * tf32(at(k, b, t0 + j, h, d, K));
            A[i * c + j] = acc;
          }
        for (std::int64_t i = 0; i < c; ++i)
          for (std::int64_t e = 0; e < V; ++e) {
            float inter = 0.0f, intra = 0.0f;
            for (std::int64_t d = 0; d < K; ++d) inter += tf32(at(q, b, t0 + i, h, d, K)) * tf32(S[d * V + e]);
            for (std::int64_t j = 0; j <= i; ++j) intra += tf32(A[i * c + j]) * tf32(at(v, b, t0 + j, h, e, V));
            o.data[((b * T + t0 + i) * H + h) * V + e] = scale * (inter + intra);
          }
        for (std::int64_t d = 0; d < K; ++d)
          for (std::int64_t e = 0; e < V; ++e) {
            float acc = S[d * V + e];
            for (std::int64_t j = 0; j < c; ++j)
              acc += tf32(at(k, b, t0 + j, h, d, K)) * tf32(at(v, b, t0 + j, h, e, V));
            S[d * V + e] = acc;
          }
      }
      for (std::int64_t i = 0; i < K * V; ++i) ht.data[(b * H + h) * K * V + i] = S[i];
    }
}

io::TensorFile file_of(const TensorMap<double>& m) {
  io::TensorFile f;
  for (const auto& [name, t] : m) f.tensors[name] = io::from_f64(t.data, t.shape, io::DType::F32);
  return f;
}

struct Case {
  CaseInputs in = case_inputs("linear_attn", "demo", "realistic_small");  // B=1 T=128 H=2 K=V=16
  CheckRequest request(const TensorMap<double>& candidate, const std::string& policy) const {
    CheckRequest r;
    r.layer = "linear_attn";
    r.inputs = file_of(in.tensors);
    r.candidate = file_of(candidate);
    r.policy = policy;
    r.sets = {"scale=0.25"};
    return r;
  }
  TensorMap<double> tf32_candidate() const {
    TensorMap<double> c;
    tf32_linear_attention(in.tensors.at("q"), in.tensors.at("k"), in.tensors.at("v"), 0.25f, 64, c["o"], c["ht"]);
    return c;
  }
};

double worst(const CheckResult& r) {
  double w = 0.0;
  for (const TensorVerdict& t : r.tensors) w = std::max(w, t.max_ratio);
  return w;
}

TEST(ForeignPolicy, Tf32KernelPassesAsTf32AndFailsAsFp32) {
  const Case c;
  const TensorMap<double> cand = c.tf32_candidate();
  const CheckResult as_fp32 = run_check(c.request(cand, "fp32")).second;
  const NamedCheck as_tf32 = run_check(c.request(cand, "tf32"));
  std::printf("TF32 linear attention: worst ratio %.3g as fp32, %.3g as tf32\n", worst(as_fp32), worst(as_tf32.second));
  EXPECT_FALSE(as_fp32.pass) << "worst ratio " << worst(as_fp32);
  EXPECT_GT(worst(as_fp32), 100.0);  // TF32's u is 2^13 times fp32's
  EXPECT_TRUE(as_tf32.second.pass) << "worst ratio " << worst(as_tf32.second);
  EXPECT_EQ(as_tf32.second.dtype, Tier::fp32);
  EXPECT_EQ(as_tf32.first, "linear_attn/chunk/tf32/inputs");  // no file metadata: the source name
  const PolicyExplanation e = explain_policy(c.request(cand, ""));
  EXPECT_EQ(e.best, "tf32");
  ASSERT_EQ(e.checks.size(), explain_order().size());
  EXPECT_FALSE(e.checks.front().second.pass);  // fp32, first
}

TEST(ForeignPolicy, Fp32RoundedOracleIsExplainedByFp32) {
  const Case c;
  TensorMap<double> exact =
      run_layer(find_layer("linear_attn"), Form::sequential, {Tier::mpfr, 256}, c.in.tensors, c.in.config).values;
  // The demo case's default scale is K^-1/2 = 0.25, the value the requests set.
  for (auto& [name, t] : exact)
    for (double& x : t.data) x = static_cast<float>(x);
  EXPECT_TRUE(run_check(c.request(exact, "fp32")).second.pass);
  EXPECT_EQ(explain_policy(c.request(exact, "")).best, "fp32");
}

// A failure at a row whose exact value is 0 (q_t = 0 makes o_t = 0, and its model
// 0) is bounded by the dtype's subnormal floor alone: a residue of 1e-30 there fails
// fp32 and tf32 and passes fp16 (floor 2⁻²⁴), whatever arithmetic made it. The
// explanation's notes say so for the failing policies, naming the tensor and row;
// an ordinary failure (the TF32 kernel's as fp32) has none.
TEST(ForeignPolicy, FailuresAtExactZeroRowsAreNoted) {
  Case c;
  Tensor<double>& q = c.in.tensors.at("q");
  const std::int64_t H = q.shape[2], K = q.shape[3];  // B = 1: row (0, t, h) at (t·H + h)
  const std::int64_t t = 3, h = 1;
  for (std::int64_t d = 0; d < K; ++d) q.data[static_cast<std::size_t>((t * H + h) * K + d)] = 0.0;
  TensorMap<double> cand =
      run_layer(find_layer("linear_attn"), Form::sequential, {Tier::mpfr, 256}, c.in.tensors, c.in.config).values;
  for (auto& [name, x] : cand)
    for (double& v : x.data) v = static_cast<float>(v);
  Tensor<double>& o = cand.at("o");
  const std::int64_t V = o.shape[3];
  for (std::int64_t e = 0; e < V; ++e) ASSERT_EQ(o.data[static_cast<std::size_t>((t * H + h) * V + e)], 0.0);
  o.data[static_cast<std::size_t>((t * H + h) * V + 2)] = 1e-30;
  const PolicyExplanation e = explain_policy(c.request(cand, ""));
  ASSERT_EQ(e.notes.size(), e.checks.size());
  EXPECT_EQ(e.best, "fp16");
  for (std::size_t i = 0; i < e.checks.size(); ++i) {
    const std::string& name = explain_order()[i];
    if (e.checks[i].second.pass) {
      EXPECT_EQ(e.notes[i], "") << name;
      continue;
    }
    EXPECT_EQ(e.notes[i], "o fails at (0,3,1), where the exact value and the model are 0: the subnormal floor "
                          "alone bounds that row, whatever the kernel's arithmetic")
        << name;
  }
  EXPECT_FALSE(e.checks[0].second.pass);  // fp32
  // The plain check says the same: the verdict's flag, the table's line, the JSON field.
  const NamedCheck plain = run_check(c.request(cand, ""));
  const TensorVerdict& v = plain.second.tensors.front();
  ASSERT_EQ(v.name, "o");
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(v.worst_at_floor);
  EXPECT_EQ(floor_line(v), e.notes[0]);
  EXPECT_EQ(check_json(plain.first, plain.second)["tensors"][0].value("worst_at_floor", false), true);
  const PolicyExplanation tf = explain_policy(c.request(c.tf32_candidate(), ""));
  ASSERT_FALSE(tf.checks[0].second.pass);
  EXPECT_EQ(tf.notes[0], "");
  const NamedCheck tf_plain = run_check(c.request(c.tf32_candidate(), ""));
  ASSERT_FALSE(tf_plain.second.pass);
  for (const TensorVerdict& t : tf_plain.second.tensors) {
    EXPECT_FALSE(t.worst_at_floor) << t.name;  // its worst rows are nonzero: an ordinary failure
    EXPECT_EQ(floor_line(t), "") << t.name;
  }
  const nlohmann::json tf_json = check_json(tf_plain.first, tf_plain.second);
  for (const auto& t : tf_json.at("tensors")) EXPECT_FALSE(t.contains("worst_at_floor"));
}

TEST(ForeignPolicy, BadNamesAndContradictionsAreInputErrors) {
  EXPECT_EQ(parse_policy("tf32").dtype, Tier::fp32);
  EXPECT_EQ(parse_policy("tf32").policy, Policy::tf32);
  EXPECT_EQ(parse_policy("bf16").policy, Policy::native);
  EXPECT_EQ(policy_name(Tier::fp32, Policy::bf16_storage), "bf16-storage");
  try {
    parse_policy("tf16");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--policy: unknown arithmetic policy 'tf16' (fp32|tf32|fp16|bf16-storage|bf16|fp64)");
  }
  const Case c;
  CheckRequest r = c.request(c.tf32_candidate(), "tf32");
  r.dtype = "bf16";
  try {
    run_check(r);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--policy tf32 is a fp32 kernel's arithmetic; --dtype says bf16");
  }
}

}  // namespace
}  // namespace ttr::test
