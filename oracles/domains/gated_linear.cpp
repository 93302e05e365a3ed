// The guaranteed domain of the gated linear family (linear_attn, simple_gla,
// gla): docs/domains.md, "Gated linear attention". Every intermediate of the
// sequential, chunk and scan forms, forward and backward, is a sum of products
// of input entries with decay factors in [0, 1] (the chunk forms exponentiate
// only b_t − b_s, s ≤ t: reference/family/chunk_common.hpp), so elementwise
// majorants bound them all:
//
//   Ŝ = max|h0| + Σ_t ‖k_t‖∞ ‖v_t‖∞                (every state and partial state)
//   D̂ = max|dht| + max(1, scale) Σ_t ‖q_t‖∞ ‖do_t‖∞  (every state adjoint)
//
// each maximised over the (sequence, head) problems.
#include <algorithm>

#include "oracles/domains/sequences.hpp"

namespace ttr::domains {

namespace {

struct Majorants {
  double inputs = 0.0;          // max |x| over the narrowed inputs
  double S = 0.0, D = 0.0;      // Ŝ, D̂
  double q1 = 0.0, k1 = 0.0, v1 = 0.0, do1 = 0.0;  // max_t ‖x_t‖₁
  double qi = 0.0, ki = 0.0, vi = 0.0;             // max |x|
  double g = 0.0;               // max |g|
  double s = 1.0, sp = 1.0;     // scale, max(1, scale)
  double C = 0.0;               // the longest chunk of the form (0: no chunk)
  double Kg = 1.0;              // channels one gate entry covers: K (scalar gate), 1 (per key)
  double V = 1.0;
};

Majorants majorants(const DomainInputs& in, const DomainContext& c) {
  const TensorMap<double>& x = in.tensors;
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v");
  const Tensor<double>*g = optional(x, "g"), *h0 = optional(x, "h0"), *d_o = optional(x, "do"),
                     *dht = optional(x, "dht");
  Majorants m;
  m.s = scale_of(in);
  m.sp = std::max(1.0, m.s);
  m.V = static_cast<double>(v.dim(3));
  m.Kg = g && g->shape.size() == 3 ? static_cast<double>(q.dim(3)) : 1.0;
  m.qi = max_abs(q);
  m.ki = max_abs(k);
  m.vi = max_abs(v);
  m.inputs = std::max({m.qi, m.ki, m.vi, h0 ? max_abs(*h0) : 0.0});
  if (c.direction == Direction::backward)
    m.inputs = std::max({m.inputs, d_o ? max_abs(*d_o) : 0.0, dht ? max_abs(*dht) : 0.0});
  m.g = g ? max_abs(*g) : 0.0;
  for (const Problem& p : problems(x)) {
    double S = h0 ? block(*h0, p.n, p.h).max_abs() : 0.0;
    double D = dht ? block(*dht, p.n, p.h).max_abs() : 0.0;
    for (std::int64_t t = p.bos; t < p.eos; ++t) {
      const Row qt = row(q, p.b, t, p.h), kt = row(k, p.b, t, p.h), vt = row(v, p.b, t, p.h);
      S += kt.max_abs() * vt.max_abs();
      m.q1 = std::max(m.q1, qt.l1());
      m.k1 = std::max(m.k1, kt.l1());
      m.v1 = std::max(m.v1, vt.l1());
      if (c.direction == Direction::backward && d_o) {
        const Row dt = row(*d_o, p.b, t, p.h);
        D += m.sp * qt.max_abs() * dt.max_abs();
        m.do1 = std::max(m.do1, dt.l1());
      }
    }
    m.S = std::max(m.S, S);
    m.D = std::max(m.D, D);
    m.C = std::max(m.C, static_cast<double>(chunk_tokens(c, p.eos - p.bos)));
  }
  return m;
}

using Measure = double (*)(const Majorants&, const DomainContext&);

DomainCondition condition(std::string name, std::string bound, std::string covers, std::vector<Form> forms,
                          std::vector<Direction> dirs, Held held, Measure f) {
  return {std::move(name), std::move(bound), std::move(covers), std::move(forms), std::move(dirs), held,
          [f](const DomainInputs& in, const DomainContext& c) { return f(majorants(in, c), c); }};
}

}  // namespace

LayerDomain gated_linear(const LayerSpec& s) {
  const bool gated = s.input("g") != nullptr;
  const std::vector<Form> all = {}, chunk = {Form::chunk};
  const std::vector<Direction> both = {}, bwd = {Direction::backward};
  LayerDomain d;
  d.derivation = "docs/domains.md#gated-linear-attention";
  d.conditions.push_back(condition(
      "inputs", "max |q|, |k|, |v|, |h0| (backward: also |do|, |dht|)",
      "the inputs as the form receives them (narrowed to the storage format)", all, both, Held::stored,
      [](const Majorants& m, const DomainContext&) { return m.inputs; }));
  d.conditions.push_back(condition(
      "state", "Ŝ = max|h0| + Σ_t ‖k_t‖∞‖v_t‖∞",
      "every state S_t, partial state and product partial sum: sequential states, the chunk states "
      "(running fp32, and as a narrowed operand) and (K ⊙ e^{b_last−b})ᵀV, the scan's affine pairs",
      all, both, Held::stored, [](const Majorants& m, const DomainContext&) { return m.S; }));
  d.conditions.push_back(condition(
      "output", "scale · max_t ‖q_t‖₁ · Ŝ  (and scale · max|q|)",
      "o and its partial sums Sᵀ(scale·q) (sequential, scan: scale·q first), the chunk's o after scale", all, both,
      Held::stored, [](const Majorants& m, const DomainContext&) { return m.s * std::max(m.q1 * m.S, m.qi); }));
  d.conditions.push_back(condition(
      "unscaled output", "max_t ‖q_t‖₁ · Ŝ",
      "the chunk's output sums (Q ⊙ e^{b})S_0 + [QKᵀ ⊙ Γ]V before scale (held in the compute format)", chunk, both,
      Held::compute, [](const Majorants& m, const DomainContext&) { return m.q1 * m.S; }));
  d.conditions.push_back(condition(
      "scores", "max_t ‖q_t‖₁ · max|k| (backward: and max(1, scale) · max_t ‖do_t‖₁ · max|v|)",
      "the chunk form's score matrix QKᵀ ⊙ Γ (narrowed) and its backward's dO Vᵀ", chunk, both, Held::stored,
      [](const Majorants& m, const DomainContext& c) {
        const double fwd = m.q1 * m.ki;
        return c.direction == Direction::backward ? std::max(fwd, m.sp * m.do1 * m.vi) : fwd;
      }));
  if (gated)
    d.conditions.push_back(condition(
        "gate sum", "C · max|g| (C: the chunk's tokens)",
        "the chunk form's cumulative log decay b_t = Σ g over the chunk, held in fp32 (beyond it b = −inf and "
        "b_t − b_s = NaN)",
        chunk, both, Held::compute, [](const Majorants& m, const DomainContext&) { return m.C * m.g; }));
  d.conditions.push_back(condition(
      "state adjoint", "D̂ = max|dht| + max(1, scale) Σ_t ‖q_t‖∞‖do_t‖∞",
      "every state adjoint dS_t and partial adjoint (the chunk's dS, narrowed as an operand; the scan's "
      "adjoint pairs), dh0",
      all, bwd, Held::stored, [](const Majorants& m, const DomainContext&) { return m.D; }));
  d.conditions.push_back(condition(
      "dq", "max(1, scale) · Ŝ · max_t ‖do_t‖₁", "dq_t = scale·S_t do_t and its partial sums in every form", all, bwd,
      Held::stored, [](const Majorants& m, const DomainContext&) { return m.sp * m.S * m.do1; }));
  d.conditions.push_back(condition(
      "dk, dv", "D̂ · max(max_t ‖v_t‖₁, max_t ‖k_t‖₁)", "dk_t = dS_t v_t, dv_t = dS_tᵀ k_t and their partial sums",
      all, bwd, Held::stored,
      [](const Majorants& m, const DomainContext&) { return m.D * std::max(m.v1, m.k1); }));
  if (gated)
    d.conditions.push_back(condition(
        "dg", "K_g · (C · (max|q| · max(1, scale) · Ŝ · max‖do‖₁ + 2 max|k| · D̂ · max‖v‖₁) + V · D̂ · Ŝ)",
        "the gate gradient: per token Σ dS ⊙ S̄ (sequential, scan), the chunk's db = q ⊙ dq − k ⊙ dk and its "
        "reverse cumulative sum over the chunk; K_g = K for a scalar gate, 1 per key",
        all, bwd, Held::stored, [](const Majorants& m, const DomainContext&) {
          return m.Kg * (m.C * (m.qi * m.sp * m.S * m.do1 + 2.0 * m.ki * m.D * m.v1) + m.V * m.D * m.S);
        }));
  return d;
}

}  // namespace ttr::domains
