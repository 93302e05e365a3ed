// A whole input set of any layer of layers.def, drawn from the layer's spec:
// every tensor by its Role (oracles/spec.hpp) with the adversarial generators of
// gen/scalars.hpp and gen/keys.hpp, shapes from the spec's symbolic dims, the
// required config keys at their documented examples plus layer-specific config
// draws (GKA's solver, a and fixed λ; the ridge λ of pdn_exact/kalman_filter).
//
// The result is the repo's own input structure, TensorMap<double> + --set pairs,
// as ttr::run_layer and tests/support/vectors_fixture.hpp's mpfr_form take them.
#pragma once

#include <cmath>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "oracles/registry.hpp"
#include "oracles/spec.hpp"
#include "oracles/validate.hpp"
#include "oracles/varlen.hpp"
#include "properties/gen/keys.hpp"
#include "properties/gen/scalars.hpp"
#include "properties/gen/shapes.hpp"

namespace ttr::prop::gen {

struct InputOptions {
  int max_T = 24, max_B = 2, max_H = 2, max_K = 4, max_V = 3;
  bool optional_inputs = true;  // draw each optional tensor with probability 1/2
  bool with_config = true;      // draw layer-specific config (else defaults + examples)
};

struct LayerCase {
  std::string layer;
  Dims dims;
  int C = 64;  // chunk size for the chunk forms
  TensorMap<double> in;
  std::vector<std::pair<std::string, std::string>> sets;
  std::vector<KeyKind> key_kinds;  // one per (b, h) key block
};

inline void showValue(const LayerCase& c, std::ostream& os) {
  os << "layer=" << c.layer << " C=" << c.C << " dims={";
  for (const auto& [k, v] : c.dims) os << k << "=" << v << " ";
  os << "} sets={";
  for (const auto& [k, v] : c.sets) os << k << "=" << v << " ";
  os << "} keys={";
  for (KeyKind k : c.key_kinds) os << key_kind_name(k) << " ";
  os << "}\n";
  for (const auto& [name, t] : c.in) {
    os << "  " << name << shape_str(t.shape) << " = ";
    rc::show(t.data, os);
    os << "\n";
  }
}

// ā ∈ (0, 1]: exactly 1, exactly 1e-24, else 10^{-i/8}.
inline rc::Gen<double> transition() {
  const auto interior = rc::gen::map(uniform_int(1, 191), [](int i) { return std::pow(10.0, -i / 8.0); });
  return one_of<double>({{2, rc::gen::just(1.0)}, {2, rc::gen::just(1e-24)}, {6, interior}});
}
// p̄ ≥ 0: exactly 0 (precision grows without bound), else 10^{i/8} ∈ [1e-3, 10].
inline rc::Gen<double> noise() {
  return one_of<double>({{4, rc::gen::just(0.0)}, {6, log_uniform(-24, 8)}});
}

// Values of one tensor by role (keys are drawn per block by layer_case).
inline std::vector<double> draw_role(Role role, std::int64_t n) {
  std::vector<double> x(static_cast<std::size_t>(n));
  for (double& e : x) {
    switch (role) {
      case Role::query: e = *bf16_value(-8, 0); break;
      case Role::value: e = *bf16_value(-8, 2); break;
      case Role::state: e = *bf16_value(-8, 0); break;
      case Role::log_decay: e = *log_decay(); break;
      case Role::gate: e = *beta(); break;
      case Role::positive: e = *log_uniform(-16, 16); break;
      case Role::precision: e = *log_uniform(-16, 16); break;
      case Role::transition: e = *transition(); break;
      case Role::noise: e = *noise(); break;
      case Role::key: case Role::psd_matrix: e = *bf16_value(-8, 0); break;
    }
  }
  return x;
}

// Symmetric PSD blocks M Mᵀ/n of bf16 matrices M (the same summation order for
// (i, j) and (j, i), so exactly symmetric).
inline void psd_blocks(Tensor<double>& t) {
  const std::int64_t n = t.shape.back(), blocks = t.numel() / (n * n);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const auto M = *rc::gen::container<std::vector<double>>(static_cast<std::size_t>(n * n), bf16_value(-4, 0));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t l = 0; l < n; ++l) s += M[i * n + l] * M[j * n + l];
        t.data[(b * n + i) * n + j] = s / static_cast<double>(n);
      }
  }
}

// Layer-specific config draws.
inline std::vector<std::pair<std::string, std::string>> config_for(const LayerSpec& spec, bool draw) {
  std::vector<std::pair<std::string, std::string>> sets;
  for (const ConfigKey& k : spec.config)
    if (k.required && k.example) sets.emplace_back(k.name, *k.example);
  if (!draw) return sets;
  const auto text = [](double x) {
    std::ostringstream os;
    os.precision(17);
    os << x;
    return os.str();
  };
  if (spec.name == "pdn_exact" || spec.name == "kalman_filter") {
    sets.clear();  // ridge λ from 1e-3 to 1e3
    sets.emplace_back("lambda", text(*one_of<double>(
                                    {{2, rc::gen::just(1.0)}, {1, rc::gen::just(1e-3)}, {6, log_uniform(-24, 24)}})));
  }
  if (spec.name == "gka") {
    // GKA's regularisation a: the default 0.02, and small values down to 1e-3
    // (κ ≤ (a+1)/a up to ~1e3, GKA eq. (4)); solver and a fixed λ.
    sets.emplace_back("a", text(*one_of<double>(
                               {{3, rc::gen::just(0.02)}, {2, rc::gen::just(1e-3)}, {5, log_uniform(-24, -4)}})));
    const std::string solver = *choose_uniform<std::string>({"exact", "chebyshev", "cg"});
    sets.emplace_back("solver", solver);
    if (solver != "exact") sets.emplace_back("iters", std::to_string(*uniform_int(0, 40)));
    if (*choose<bool>({{4, false}, {1, true}}))
      sets.emplace_back("lambda", text(*log_uniform(-16, 8)));
  }
  return sets;
}

inline rc::Gen<LayerCase> layer_case(const std::string& layer, InputOptions opt = {}) {
  return rc::gen::exec([layer, opt] {
    const LayerSpec& spec = find_layer(layer).spec;
    LayerCase c;
    c.layer = layer;
    const TC tc = *length_and_chunk(opt.max_T);
    c.C = tc.C;
    const std::int64_t B = *uniform_int(1, opt.max_B), H = *uniform_int(1, opt.max_H), K = *uniform_int(1, opt.max_K),
                       V = *uniform_int(1, opt.max_V);
    c.dims = {{"B", B}, {"T", tc.T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
    for (const TensorSpec& ts : spec.inputs) {
      if (ts.name == kCuSeqlens) continue;  // fixed-length cases here (varlen: tests/varlen)
      if (!ts.required && (!opt.optional_inputs || !*choose<bool>({{1, false}, {1, true}}))) continue;
      Tensor<double> t(shape_of(ts, c.dims), 0.0);
      if (ts.role == Role::key) {  // [B, T, H, K]: one block of T keys per (b, h)
        for (std::int64_t b = 0; b < B; ++b)
          for (std::int64_t h = 0; h < H; ++h) {
            const KeyBlock kb = *key_block(tc.T, static_cast<int>(K));
            c.key_kinds.push_back(kb.kind);
            for (std::int64_t s = 0; s < tc.T; ++s)
              for (std::int64_t i = 0; i < K; ++i) t.data[((b * tc.T + s) * H + h) * K + i] = kb.k[s * K + i];
          }
      } else if (ts.role == Role::psd_matrix) {
        psd_blocks(t);
      } else {
        t.data = draw_role(ts.role, t.numel());
      }
      c.in.emplace(ts.name, std::move(t));
    }
    // Delta-rule writes contract only while β‖k‖² ≤ 2 (LayerSpec::step_scales_with_key_energy);
    // large keys get β/‖k‖², which keeps β = 0 and maps β = 1 to the full write β‖k‖² = 1.
    if (spec.step_scales_with_key_energy && c.in.count("beta") && c.in.count("k")) {
      const auto& k = c.in.at("k");
      auto& beta = c.in.at("beta");
      for (std::int64_t r = 0; r < beta.numel(); ++r) {
        const double e = std::pow(norm2(&k.data[r * K], static_cast<int>(K)), 2);
        if (e > 1) beta.data[r] /= e;
      }
    }
    c.sets = config_for(spec, opt.with_config);
    return c;
  });
}

// The layers of a family of the declaration (layers.def order); `decayed`: only
// those with a log-decay input g; `plain_write`: only those writing along the key
// itself (no preconditioner input beta_atk).
inline std::vector<std::string> family_layers(const std::string& family, bool decayed = false,
                                              bool plain_write = false) {
  std::vector<std::string> n;
  for (const auto& e : registry())
    if (e.spec.family == family && (!decayed || e.spec.input("g")) && (!plain_write || !e.spec.input("beta_atk")))
      n.push_back(e.spec.name);
  return n;
}

// Names of every layer of the registry (= layers.def).
inline std::vector<std::string> layer_names() {
  std::vector<std::string> n;
  for (const auto& e : registry()) n.push_back(e.spec.name);
  return n;
}

}  // namespace ttr::prop::gen
