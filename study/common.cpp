#include "study/common.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>

#include "gate/gate.hpp"

namespace ttr::study {

Dims dims_of(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

TensorMap<double> draw_inputs(const LayerSpec& spec, const Dims& dims, const Regime& regime, std::uint64_t seed,
                              const std::string& case_name) {
  return generate_inputs(spec, VectorCase{case_name, "", dims, regime, {}}, seed);
}

TensorMap<double> draw_backward_inputs(const LayerSpec& spec, const Dims& dims, const Regime& regime,
                                       std::uint64_t seed, const std::string& case_name) {
  return generate_backward_inputs(spec, VectorCase{case_name, "", dims, regime, {}}, seed);
}

std::vector<std::pair<std::string, std::string>> study_config(const LayerSpec& spec) {
  std::vector<std::pair<std::string, std::string>> c = gate_config(spec);
  for (const ConfigKey& key : spec.config)
    if (key.required && key.example) c.emplace_back(key.name, *key.example);
  return c;
}

Form kernel_form(const LayerEntry& layer) {
  if (layer.has_form(Form::chunk)) return Form::chunk;
  if (layer.has_form(Form::scan)) return Form::scan;
  return Form::sequential;
}

double rel_error(const Tensor<double>& c, const Tensor<double>& o) {
  double num2 = 0, den2 = 0;
  for (std::size_t i = 0; i < o.data.size(); ++i) {
    if (!std::isfinite(o.data[i])) continue;  // beyond float64: no error is formed there
    if (!std::isfinite(c.data[i])) return std::numeric_limits<double>::infinity();
    const double d = c.data[i] - o.data[i];
    num2 += d * d;
    den2 += o.data[i] * o.data[i];
  }
  if (num2 == 0) return 0.0;
  return den2 == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(num2 / den2);
}

std::pair<double, std::string> max_rel_error(const LayerSpec& spec, const TensorMap<double>& c,
                                             const TensorMap<double>& o) {
  std::pair<double, std::string> worst{0.0, ""};
  for (const TensorSpec& t : spec.outputs) {
    if (!t.certifiable || !c.count(t.name) || !o.count(t.name)) continue;
    const double e = rel_error(c.at(t.name), o.at(t.name));
    if (worst.second.empty() || e > worst.first || std::isnan(e)) worst = {e, t.name};
  }
  return worst;
}

double max_ratio(const CheckResult& r) {
  double m = 0.0;
  for (const TensorVerdict& t : r.tensors)
    if (t.present) m = std::max(m, t.nonfinite_failures ? std::numeric_limits<double>::infinity() : t.max_ratio);
  return m;
}

double ratio_of(const CheckResult& r, const std::string& tensor) {
  for (const TensorVerdict& t : r.tensors)
    if (t.present && t.name == tensor) return t.nonfinite_failures ? std::numeric_limits<double>::infinity() : t.max_ratio;
  return std::numeric_limits<double>::quiet_NaN();
}

CheckResult judge_candidate(Judge& judge, const TensorMap<double>& candidate, Form form, Tier dtype, int chunk,
                            Direction direction, std::uint64_t seed, int samples) {
  ModelSpec ms;
  ms.form = form;
  ms.direction = direction;
  ms.dtype = dtype;
  ms.chunk_size = chunk;
  ms.samples = samples;
  ms.seed = seed;
  return judge(candidate, ms);
}

Tier dtype_tier(const std::string& n) {
  if (n == "bf16") return Tier::bf16;
  if (n == "fp16") return Tier::fp16;
  if (n == "fp32") return Tier::fp32;
  if (n == "fp64") return Tier::fp64;
  throw std::invalid_argument("not a kernel dtype: " + n);
}

double quantile(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = p * (v.size() - 1);
  const std::size_t i = static_cast<std::size_t>(pos);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

std::string num(double x) { return fmt::format("{:.3g}", x); }

}  // namespace ttr::study
