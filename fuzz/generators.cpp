#include "fuzz/generators.hpp"

#include "oracles/varlen.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "oracles/error.hpp"
#include "gate/gate.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/float16.hpp"

namespace ttr::fuzz {

std::uint64_t Stream::next() {
  std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double Stream::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
std::int64_t Stream::below(std::int64_t n) { return n <= 1 ? 0 : static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
double Stream::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  Stream s(a ^ (b * 0xD1B54A32D192ED03ull));
  s.next();
  return s.next();
}

namespace {

// log(1e-30) on the bf16 grid: the decay_edges value of the stress vectors.
constexpr double kStrongLogDecay = -69.0;

const TensorSpec* with_role(const LayerSpec& spec, Role role) {
  for (const TensorSpec& t : spec.inputs)
    if (t.role == role) return &t;
  return nullptr;
}

bool has_beta(const LayerSpec& spec) {
  const TensorSpec* b = spec.input("beta");
  return b && b->role == Role::gate;
}

// Row r of a [B, T, H, F] tensor sits at token (r / H) % T.
std::int64_t token_of(std::int64_t row, const Shape& s) { return (row / s.at(2)) % s.at(1); }

Dims draw_dims(const LayerSpec& spec, const GeneratorOptions& opt, Stream& rng) {
  const std::int64_t C = opt.chunk;
  std::int64_t T = opt.length;
  if (T <= 0) {
    // Around chunk boundaries: m·C − 1, m·C, m·C + 1 for m = 0..3, or anywhere up to 3C.
    const std::int64_t m = rng.below(4), pick = rng.below(4);
    T = pick == 3 ? 1 + rng.below(3 * C) : m * C + (pick - 1);
    T = std::max<std::int64_t>(1, T);
  }
  const std::int64_t widths[] = {4, 8, 16};
  const std::int64_t B = 1 + rng.below(2), H = 1 + rng.below(2), K = widths[rng.below(3)];
  const std::int64_t V = rng.uniform() < 0.5 ? K : widths[rng.below(3)];
  (void)spec;
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

double clamp_to(const Range& r, double x) {
  if (r.contains(x)) return x;
  if (std::isfinite(r.lo) && x <= r.lo) x = r.lo_open ? r.lo + std::max(std::fabs(r.lo) * 0x1p-7, 0x1p-126) : r.lo;
  if (std::isfinite(r.hi) && x >= r.hi) x = r.hi_open ? r.hi - std::max(std::fabs(r.hi) * 0x1p-7, 0x1p-126) : r.hi;
  x = BF16Format::round(x);
  if (!r.contains(x)) x = std::isfinite(r.lo) && std::isfinite(r.hi) ? BF16Format::round(0.5 * (r.lo + r.hi)) : 0.0;
  return x;
}

// Family edits applied after generate_inputs has drawn the Regime's inputs.
void edit(const LayerSpec& spec, const std::string& family, Case& c, Stream& rng) {
  auto& in = c.inputs;
  const TensorSpec* gs = with_role(spec, Role::log_decay);
  const TensorSpec* ks = with_role(spec, Role::key);
  Tensor<double>* g = gs && in.count(gs->name) ? &in.at(gs->name) : nullptr;
  Tensor<double>* k = ks && in.count(ks->name) ? &in.at(ks->name) : nullptr;
  const std::int64_t T = c.dims.at("T");
  if (family == "gate_edges" && g) {
    // On top of decay_edges (0 and log 1e-30): a few gates far beyond (−100 … −10⁴).
    for (double& x : g->data)
      if (rng.uniform() < 0.05) x = -std::pow(10.0, rng.uniform(2.0, 4.0));
  } else if (family == "strong_decay" && g) {
    // One window of up to C tokens whose gates sum far below −88.7 (exp's fp32 range).
    const std::int64_t len = 2 + rng.below(std::max<std::int64_t>(1, std::min<std::int64_t>(T, 16) - 1));
    const std::int64_t start = rng.below(std::max<std::int64_t>(1, T - len + 1));
    const double level = kStrongLogDecay * rng.uniform(0.7, 3.0);
    const std::int64_t row_t = g->shape.size() >= 2 ? g->shape[1] : 1;
    const std::int64_t per_t = g->numel() / (g->shape.at(0) * row_t);
    for (std::int64_t i = 0; i < g->numel(); ++i) {
      const std::int64_t t = (i / per_t) % row_t;
      if (t >= start && t < start + len) g->data[i] = level;
    }
  } else if (family == "zero_write_prefix") {
    // H_t = 0 up to a token: β = 0 (and no initial state) from the start.
    const std::int64_t n = 1 + rng.below(T);
    if (has_beta(spec)) {
      const Tensor<double>& q = in.at("q");
      Tensor<double> b({q.shape.at(0), q.shape.at(1), q.shape.at(2)}, 1.0);
      if (const auto it = in.find("beta"); it != in.end()) b = it->second;
      for (std::int64_t r = 0; r < b.numel(); ++r)
        if ((r / b.shape[2]) % T < n) b.data[r] = 0.0;
      in["beta"] = std::move(b);
    } else if (k) {
      for (std::int64_t r = 0; r < k->numel() / k->shape.back(); ++r)
        if (token_of(r, k->shape) < n) std::fill_n(k->data.begin() + r * k->shape.back(), k->shape.back(), 0.0);
    }
    for (const TensorSpec& t : spec.inputs)
      if (!t.required && (t.role == Role::state || t.role == Role::psd_matrix)) in.erase(t.name);
  } else if (family == "zero_keys" && k) {
    // Rows exactly 0, and rows so small (|k_i| ~ 1e-25) that ‖k‖² underflows fp32.
    const std::int64_t F = k->shape.back();
    for (std::int64_t r = 0; r < k->numel() / F; ++r) {
      const double u = rng.uniform();
      if (u < 0.15) std::fill_n(k->data.begin() + r * F, F, 0.0);
      else if (u < 0.25)
        for (std::int64_t i = 0; i < F; ++i) k->data[r * F + i] *= 1e-25;
    }
  } else if (family == "collinear" && k) {
    // Keys of a (b, h) exactly ± a multiple of one direction: a rank-one Gram.
    const std::int64_t F = k->shape.back(), H = k->shape.at(2), TT = k->shape.at(1);
    for (std::int64_t r = 0; r < k->numel() / F; ++r) {
      const std::int64_t b = r / (TT * H), h = r % H, first = (b * TT) * H + h;
      if (r == first) continue;
      const double s = (rng.uniform() < 0.5 ? -1.0 : 1.0) * rng.uniform(0.5, 1.0);
      for (std::int64_t i = 0; i < F; ++i) k->data[r * F + i] = s * k->data[first * F + i];
    }
  } else if (family == "initial_states") {
    // Initial states up to 1e4 times the usual 0.1 N(0, 1).
    const double s = std::pow(10.0, rng.uniform(0.0, 4.0));
    for (const TensorSpec& t : spec.inputs)
      if (t.role == Role::state && in.count(t.name))
        for (double& x : in.at(t.name).data) x *= s;
  }
}

// Varlen boundaries where kernels break (FLA #836, #837, PR #955): offsets on a
// chunk edge, one token either side of it, one-token and empty sequences, and
// some anywhere; B = 1, T unchanged (the last offset).
std::vector<std::int64_t> adversarial_offsets(std::int64_t T, std::int64_t C, Stream& rng) {
  std::vector<std::int64_t> cu = {0};
  while (cu.back() < T) {
    const std::int64_t at = cu.back();
    const std::int64_t edge = (at / C + 1 + rng.below(2)) * C;  // the next chunk edge or the one after
    std::int64_t next = at;
    switch (rng.below(6)) {
      case 0: next = at; break;                          // an empty sequence
      case 1: next = at + 1; break;                      // a one-token sequence
      case 2: next = edge; break;                        // exactly on a chunk edge
      case 3: next = edge - 1; break;                    // one token before it
      case 4: next = edge + 1; break;                    // one token past it
      default: next = at + 1 + rng.below(2 * C); break;  // anywhere
    }
    if (cu.size() >= 24) next = T;  // a bounded number of sequences
    cu.push_back(std::clamp<std::int64_t>(next, at, T));
  }
  return cu;
}

}  // namespace

const std::vector<std::string>& all_families() {
  static const std::vector<std::string> f = {
      "plain",    "gate_edges", "strong_decay", "beta_edges",   "zero_write_prefix", "key_norms",   "zero_keys",
      "near_duplicate_keys", "collinear", "value_edges", "initial_states", "gka_small_a", "kla_zero_noise",
      "varlen_boundaries"};
  return f;
}

std::vector<std::string> families_for(const LayerSpec& spec) {
  std::vector<std::string> out;
  const bool decay = with_role(spec, Role::log_decay), key = with_role(spec, Role::key);
  const bool gate = with_role(spec, Role::gate), state = with_role(spec, Role::state);
  for (const std::string& f : all_families()) {
    if ((f == "gate_edges" || f == "strong_decay") && !decay) continue;
    if (f == "beta_edges" && !gate) continue;
    if (f == "zero_write_prefix" && !has_beta(spec) && !key) continue;
    if ((f == "key_norms" || f == "zero_keys" || f == "near_duplicate_keys" || f == "collinear") && !key) continue;
    if (f == "initial_states" && !state) continue;
    if (f == "gka_small_a" && !(spec.key("a") && spec.key("solver"))) continue;
    if (f == "kla_zero_noise" && !(spec.input("a_bar") && spec.input("p_bar"))) continue;
    if (f == "varlen_boundaries" && !spec.input(kCuSeqlens)) continue;
    out.push_back(f);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> base_config(const LayerSpec& spec) {
  auto cfg = gate_config(spec);
  for (const auto& key : spec.config)
    if (key.required && key.example) cfg.push_back({key.name, *key.example});
  return cfg;
}

Case generate_case(const LayerSpec& spec, const std::string& family, const GeneratorOptions& opt, std::uint64_t seed) {
  Stream rng(mix(seed, 1));
  Case c;
  c.family = family;
  c.dims = draw_dims(spec, opt, rng);
  c.config = base_config(spec);
  Regime rg;
  if (family == "gate_edges") rg.decay_edges = true;
  if (family == "gate_edges" || family == "beta_edges") rg.beta_edges = true;
  // A layer whose β is optional (GKA) gets one drawn, else beta_edges would be plain.
  if (family == "beta_edges" && spec.input("beta") && !spec.input("beta")->required) rg.optional_inputs = true;
  if (family == "key_norms") {
    rg.key_log10_norm_lo = rng.uniform(-12.0, -1.0);
    rg.key_log10_norm_hi = rng.uniform(1.0, 5.0);
  }
  if (family == "near_duplicate_keys" || family == "gka_small_a") rg.near_duplicate_keys = true;
  if (family == "value_edges") rg.value_edges = true;
  if (family == "initial_states") rg.optional_inputs = true;
  if (family == "kla_zero_noise") {
    rg.zero_noise = true;
    rg.transition_log10_lo = -rng.uniform(1.0, 24.0);
    rg.precision_log10_hi = rng.uniform(0.0, 6.0);
  }
  if (family == "gka_small_a") {
    // a = 10^U(-6, -2) on a 3-digit grid: κ of H_t + λI up to ~1/a.
    const double a = std::pow(10.0, rng.uniform(-6.0, -2.0));
    std::erase_if(c.config, [](const auto& kv) { return kv.first == "a"; });
    c.config.push_back({"a", fmt::format("{:.3g}", a)});
  }
  if (family == "varlen_boundaries") {
    c.dims["B"] = 1;
    rg.cu_seqlens = adversarial_offsets(c.dims.at("T"), opt.chunk, rng);
    rg.optional_inputs = true;  // initial states [N, H, K, V]: what a leaking state shows
  }
  const VectorCase vc{"fuzz", "", c.dims, rg, c.config};
  c.inputs = generate_inputs(spec, vc, rng.next());
  edit(spec, family, c, rng);
  finish_inputs(spec, c.inputs);
  return c;
}

Case mutate_case(const LayerSpec& spec, const Case& from, std::uint64_t seed) {
  Stream rng(mix(seed, 2));
  Case c = from;
  std::vector<std::string> names;
  for (const auto& [name, t] : c.inputs)
    if (t.numel() > 0 && name != kCuSeqlens) names.push_back(name);  // offsets stay valid
  if (names.empty()) return c;
  const std::string name = names[rng.below(static_cast<std::int64_t>(names.size()))];
  const TensorSpec* ts = spec.input(name);
  Tensor<double>& t = c.inputs.at(name);
  const std::int64_t n = t.numel(), F = t.shape.back(), rows = n / F;
  const std::int64_t e = rng.below(n), r = rng.below(rows);
  const int op = static_cast<int>(rng.below(4));
  const Role role = ts ? ts->role : Role::value;
  if (op == 0) {
    t.data[e] *= std::exp2(rng.uniform(-4.0, 4.0));
  } else if (op == 1) {  // an edge value of the tensor's role
    double& x = t.data[e];
    switch (role) {
      case Role::log_decay: x = rng.uniform() < 0.5 ? 0.0 : kStrongLogDecay * rng.uniform(0.5, 3.0); break;
      case Role::gate: x = rng.uniform() < 0.5 ? 0.0 : 1.0; break;
      case Role::key: std::fill_n(t.data.begin() + r * F, F, rng.uniform() < 0.5 ? 0.0 : 1.0); break;
      default: x *= std::exp2(rng.uniform(-20.0, 20.0));
    }
  } else if (op == 2 && role == Role::key && rows > 1) {  // pull row r towards another row: near-collinear
    const std::int64_t o = rng.below(rows);
    const double w = rng.uniform(0.9, 1.0);
    for (std::int64_t i = 0; i < F; ++i) t.data[r * F + i] = w * t.data[o * F + i] + (1 - w) * t.data[r * F + i];
  } else {
    const double s = std::exp2(rng.uniform(-2.0, 2.0));
    for (std::int64_t i = 0; i < F; ++i) t.data[r * F + i] *= s;
  }
  finish_inputs(spec, c.inputs);
  return c;
}

void finish_inputs(const LayerSpec& spec, TensorMap<double>& inputs) {
  for (auto& [name, t] : inputs) {
    const TensorSpec* ts = spec.input(name);
    if (name == kCuSeqlens) continue;  // integer offsets, not values on the bf16 grid
    for (double& x : t.data) {
      x = BF16Format::round(x);
      if (!std::isfinite(x)) x = std::copysign(BF16Format::max_finite(), x);
      if (ts) x = clamp_to(ts->range, x);
    }
  }
  // Symmetric blocks (GKA's hkk0) stay exactly symmetric: the mean of the pair.
  for (const TensorSpec& ts : spec.inputs)
    if (ts.symmetric && inputs.count(ts.name)) {
      Tensor<double>& t = inputs.at(ts.name);
      const std::int64_t m = t.shape.back();
      for (std::int64_t b = 0; b < t.numel() / (m * m); ++b)
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < i; ++j) t.data[(b * m + j) * m + i] = t.data[(b * m + i) * m + j];
    }
  keep_writes_contractive(spec, inputs);
}

}  // namespace ttr::fuzz
