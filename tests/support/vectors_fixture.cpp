#include "tests/support/vectors_fixture.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "oracles/run_layer.hpp"  // forms::<form>::arg: the policy a form runs under
// Every layer adapter (generated from layers.def), instantiated for mpfr_real in this one TU.
#include "oracles/all_layers.hpp"

namespace ttr::test {
namespace {

using MpfrRun = void (*)(const TensorMap<mpfr_real>&, const Config&, const FormOptions&, TensorMap<mpfr_real>&);

// Every (layer, form, direction) of layers.def, instantiated for MPFR (the chunk
// and scan forms under the exact MPFR policy).
#define TTR_FORM(layer, form, direction)                                                                   \
  void run_##layer##__##form##__##direction(const TensorMap<mpfr_real>& in, const Config& cfg,             \
                                            const FormOptions& opt, TensorMap<mpfr_real>& out) {           \
    layers::layer::template TTR_ADAPTER_METHOD(form, direction)<forms::form::arg<mpfr_real>>(in, cfg, opt, out); \
  }
#include "oracles/layers/layers.def"

using AdapterMap = std::map<std::pair<std::string, std::string>, MpfrRun>;

const AdapterMap& adapters(Direction d) {
  static const AdapterMap forward = {
#define TTR_FORM(layer, form, direction) TTR_FORM_##direction(layer, form)
#define TTR_FORM_forward(layer, form) {{#layer, #form}, &run_##layer##__##form##__forward},
#define TTR_FORM_backward(layer, form)
#include "oracles/layers/layers.def"
#undef TTR_FORM_forward
#undef TTR_FORM_backward
  };
  static const AdapterMap backward = {
#define TTR_FORM(layer, form, direction) TTR_FORM_##direction(layer, form)
#define TTR_FORM_forward(layer, form)
#define TTR_FORM_backward(layer, form) {{#layer, #form}, &run_##layer##__##form##__backward},
#include "oracles/layers/layers.def"
#undef TTR_FORM_forward
#undef TTR_FORM_backward
  };
  return d == Direction::forward ? forward : backward;
}
const AdapterMap& adapters() { return adapters(Direction::forward); }

}  // namespace

VectorCase suite_case(const std::string& layer, const std::string& suite, const std::string& case_name) {
  for (VectorCase& c : suite_cases(find_layer(layer).spec, suite))
    if (c.name == case_name) return std::move(c);
  throw std::runtime_error("no case '" + case_name + "' in suite '" + suite + "' for layer " + layer);
}

CaseInputs case_inputs(const std::string& layer, const std::string& suite, const std::string& case_name,
                       std::uint64_t seed) {
  const LayerSpec& spec = find_layer(layer).spec;
  const VectorCase c = suite_case(layer, suite, case_name);
  return {generate_inputs(spec, c, seed), Config::make(spec, c.config)};
}

void write_tensors(const std::filesystem::path& path, const TensorMap<double>& tensors, io::DType dtype,
                   std::map<std::string, std::string> metadata) {
  io::write_safetensors_atomic(path, to_file(tensors, dtype, std::move(metadata)));
}

Config config_from_metadata(const std::string& layer, const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, std::string>> pairs;
  const nlohmann::json j = nlohmann::json::parse(metadata.at("config"));
  for (auto it = j.begin(); it != j.end(); ++it) pairs.emplace_back(it.key(), it.value().get<std::string>());
  return Config::make(find_layer(layer).spec, pairs);
}

const std::vector<std::string>& mpfr_layer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [key, _] : adapters())
      if (key.second == "sequential") n.push_back(key.first);
    return n;
  }();
  return names;
}

std::vector<NamedRegime> equivalence_regimes(const LayerSpec& spec) {
  std::vector<NamedRegime> r(4);
  r[0].name = "random";
  r[1].name = "near_duplicate_keys";
  r[1].regime.near_duplicate_keys = true;
  r[2].name = "decay_and_beta_edges";
  r[2].regime.decay_edges = r[2].regime.beta_edges = true;
  r[3].name = "initial_states";
  r[3].regime.optional_inputs = true;
  if (spec.input("a_bar")) {
    NamedRegime k{"kalman_no_noise", {}};
    k.regime.zero_noise = true;
    k.regime.fixed_transition = 0.5;
    k.regime.optional_inputs = true;
    r.push_back(k);
  }
  return r;
}

const std::vector<std::pair<std::string, std::string>>& mpfr_parallel_forms(Direction d) {
  static const auto list = [](Direction dir) {
    std::vector<std::pair<std::string, std::string>> f;
    for (const auto& [key, _] : adapters(dir))
      if (key.second != "sequential") f.push_back(key);
    return f;
  };
  static const std::vector<std::pair<std::string, std::string>> forward = list(Direction::forward),
                                                                 backward = list(Direction::backward);
  return d == Direction::forward ? forward : backward;
}

TensorMap<mpfr_real> mpfr_sequential(const std::string& layer, const TensorMap<double>& inputs, const Config& cfg,
                                     unsigned bits) {
  return mpfr_form(layer, "sequential", inputs, cfg, bits, 64);
}

TensorMap<mpfr_real> mpfr_form(const std::string& layer, const std::string& form, const TensorMap<double>& inputs,
                               const Config& cfg, unsigned bits, int chunk_size, Direction d) {
  const auto it = adapters(d).find({layer, form});
  if (it == adapters(d).end())
    throw std::runtime_error("no " + form + " " + direction_name(d) + " MPFR adapter for layer " + layer);
  // The thread's default precision is restored on return: other tests in this
  // binary may rely on it.
  struct Restore {
    unsigned digits10 = mpfr_real::default_precision();
    ~Restore() { mpfr_real::default_precision(digits10); }
  } restore;
  precision_control<mpfr_real>::set_bits(bits);
  TensorMap<mpfr_real> in, out;
  for (const auto& [name, x] : inputs) {
    Tensor<mpfr_real>& y = in[name];
    y.shape = x.shape;
    y.data.reserve(x.data.size());
    for (double d : x.data) y.data.emplace_back(d);  // exact: a double fits in >= 53 bits
  }
  FormOptions opt;
  opt.bits = bits;
  opt.chunk_size = chunk_size;
  it->second(in, cfg, opt, out);
  return out;
}

}  // namespace ttr::test
