// Properties every layer of layers.def has, whatever its recurrence:
//
//  * Determinism: the same inputs give bit-identical outputs, every form, in
//    fp64, fp32 and bf16 (docs/architecture.md, "Determinism").
//  * Head and batch independence: every recurrence of docs/layers.md runs "per batch,
//    head" with no coupling, so running head h (batch b) alone reproduces the
//    outputs of that head (batch) bit for bit (fp64: the same operations in the
//    same order on the same numbers).
//  * Linearity in (h0, v): for fixed keys, gates and queries every state of
//    docs/layers.md is an affine recurrence in the value-carrying part — S_t = M_t S_{t-1}
//    + w_t v_tᵀ with M_t, w_t independent of v and S (delta family, gated linear,
//    pdn_exact/kalman_filter: P_t and Φ_t do not see v; GKA eq. (CH): S_t = γS + βkvᵀ;
//    KLA-K Thm 2 eq. (19): η_t = f_t η_{t-1} + k λv v with f_t from Λ only) — and
//    the readouts are linear in it. So (h0 | eta_init, v) ↦ (o, ht, eta_T) is
//    linear, and every other output (GKA's H, λ, κ, residual; KLA-K's Λ, o_var;
//    the preconditioner's A) does not depend on (h0, v) at all.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/gen/layer_inputs.hpp"
#include "properties/support/run.hpp"

namespace ttr::prop {
namespace {

// Index `index` of axis `axis` of t (the axis kept with extent 1).
Tensor<double> slice_axis(const Tensor<double>& t, std::size_t axis, std::int64_t index) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < axis; ++i) outer *= t.shape[i];
  for (std::size_t i = axis + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
  const std::int64_t n = t.shape[axis];
  Tensor<double> s = t;
  s.shape[axis] = 1;
  s.data.clear();
  for (std::int64_t o = 0; o < outer; ++o)
    s.data.insert(s.data.end(), t.data.begin() + (o * n + index) * inner, t.data.begin() + (o * n + index + 1) * inner);
  return s;
}

// Slices every tensor whose symbolic dims contain `dim` (inputs or outputs).
TensorMap<double> slice_map(const TensorMap<double>& m, const std::vector<TensorSpec>& specs, const std::string& dim,
                            std::int64_t index) {
  TensorMap<double> out;
  for (const auto& [name, t] : m) {
    const auto ts = std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == name; });
    RC_ASSERT(ts != specs.end());
    const auto ax = std::find(ts->dims.begin(), ts->dims.end(), dim);
    out[name] = ax == ts->dims.end() ? t : slice_axis(t, static_cast<std::size_t>(ax - ts->dims.begin()), index);
  }
  return out;
}

const std::vector<std::string>& layers() {
  static const std::vector<std::string> n = gen::layer_names();
  return n;
}

RC_GTEST_PROP(AllLayers, SameInputsGiveBitIdenticalOutputs, ()) {
  const std::string layer = *gen::choose_uniform(layers());
  const auto c = *gen::layer_case(layer);
  const std::vector<Form> forms = find_layer(layer).form_list();
  const Form form = *gen::choose_uniform(forms);
  const Arith a{*gen::choose_uniform<Tier>({Tier::fp64, Tier::fp32, Tier::bf16}), 0};
  RC_TAG(layer, form_name(form), arith_name(a));
  const auto r1 = run(c, form, a), r2 = run(c, form, a);
  RC_ASSERT(r1.values.size() == r2.values.size());
  for (const auto& [name, x] : r1.values) RC_ASSERT(bits_equal(x.data, r2.values.at(name).data));
}

void check_independence(const std::string& dim) {
  const std::string layer = *gen::choose_uniform(layers());
  gen::InputOptions opt;
  opt.max_B = opt.max_H = 3;
  const auto c = *gen::layer_case(layer, opt);
  const LayerSpec& spec = find_layer(layer).spec;
  const std::int64_t n = c.dims.at(dim);
  const std::int64_t idx = *gen::uniform_int(0, static_cast<int>(n) - 1);
  RC_TAG(layer);
  gen::LayerCase one = c;
  one.in = slice_map(c.in, spec.inputs, dim, idx);
  one.dims[dim] = 1;
  const auto full = run(c, kFp64), part = run(one, kFp64);
  const auto want = slice_map(full.values, spec.outputs, dim, idx);
  for (const auto& [name, x] : want) RC_ASSERT(bits_equal(x.data, part.values.at(name).data));
}

RC_GTEST_PROP(AllLayers, HeadsAreIndependent, ()) { check_independence("H"); }
RC_GTEST_PROP(AllLayers, BatchesAreIndependent, ()) { check_independence("B"); }

// The inputs that carry values linearly, and the outputs linear in them.
bool is_linear_input(const std::string& n) { return n == "v" || n == "h0" || n == "eta_init"; }
bool is_linear_output(const std::string& n) { return n == "o" || n == "ht" || n == "eta_T"; }

RC_GTEST_PROP(AllLayers, LinearInValuesAndInitialState, ()) {
  const std::string layer = *gen::choose_uniform(layers());
  const auto c1 = *gen::layer_case(layer);
  RC_TAG(layer);
  // A second (v, h0) and a = ±2^j: a·x1 + x2 is exact in double (bf16 inputs with
  // exponents in [−8, 2] span < 53 bits), so the three runs see exact inputs.
  const double a = std::ldexp(static_cast<double>(*gen::sign()), *gen::uniform_int(-4, 4));
  gen::LayerCase c2 = c1, c12 = c1;
  for (auto& [name, t] : c2.in)
    if (is_linear_input(name)) t.data = gen::draw_role(Role::value, t.numel());
  for (auto& [name, t] : c12.in)
    if (is_linear_input(name))
      for (std::size_t e = 0; e < t.data.size(); ++e) t.data[e] = a * c1.in.at(name).data[e] + c2.in.at(name).data[e];
  const auto r1 = run(c1, kMpfr128), r2 = run(c2, kMpfr128), r12 = run(c12, kMpfr128);
  for (const auto& [name, y12] : r12.values) {
    const auto &y1 = r1.values.at(name).data, &y2 = r2.values.at(name).data;
    if (!is_linear_output(name)) {  // independent of (h0, v): the same MPFR run, rounded
      RC_ASSERT(bits_equal(y12.data, y1) && bits_equal(y12.data, y2));
      continue;
    }
    // Each value is the MPFR-128 result rounded once (|δ| ≤ u), then a·y1 + y2 is
    // formed with one more rounding: |y12 − (a y1 + y2)| ≤ 4u(|a y1| + |y2| + |y12|)
    // elementwise; the MPFR-128 error itself (≤ 2^-100 of the terms summed) is
    // covered by the normwise 1e-25.
    double scale = 0;
    for (std::size_t e = 0; e < y1.size(); ++e)
      scale = std::max(scale, std::fabs(a * y1[e]) + std::fabs(y2[e]) + std::fabs(y12.data[e]));
    for (std::size_t e = 0; e < y1.size(); ++e) {
      // eta_T is Λη-scaled: with p̄ = 0 it grows like ā^{-2t} and passes double's
      // range (KLA-K notes); such elements cannot be compared after rounding.
      if (!std::isfinite(y1[e]) || !std::isfinite(y2[e]) || !std::isfinite(y12.data[e]) || !std::isfinite(scale)) {
        RC_ASSERT(name == std::string("eta_T"));
        continue;
      }
      const double lin = a * y1[e] + y2[e];
      const double tol = 4 * kU * (std::fabs(a * y1[e]) + std::fabs(y2[e]) + std::fabs(y12.data[e])) + 1e-25 * scale;
      RC_ASSERT(std::fabs(y12.data[e] - lin) <= tol);
    }
  }
}

}  // namespace
}  // namespace ttr::prop
