#include "oracles/vectors.hpp"

#include <cmath>
#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/varlen.hpp"
#include "reference/core/float16.hpp"

namespace ttr {
namespace {

// splitmix64 (seeding) and xoshiro256** (streams): fixed algorithms, so a seed
// means the same numbers everywhere (std:: distributions are implementation-defined).
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0]; s_[3] ^= s_[1]; s_[1] ^= s_[2]; s_[0] ^= s_[3]; s_[2] ^= t; s_[3] = rotl(s_[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  // Box–Muller. libm's log/cos may differ in the last bit between platforms; the
  // bf16 rounding that follows absorbs that except on a measure-zero set.
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

// Rows of the last dimension scaled to unit norm.
void normalize_rows(Tensor<double>& t) {
  const std::int64_t F = t.shape.back();
  if (F == 0) return;
  for (std::int64_t r = 0; r < t.numel() / F; ++r) {
    double s = 0;
    for (std::int64_t i = 0; i < F; ++i) s += t.data[r * F + i] * t.data[r * F + i];
    s = std::sqrt(s);
    if (s > 0)
      for (std::int64_t i = 0; i < F; ++i) t.data[r * F + i] /= s;
  }
}

void draw(const TensorSpec& ts, const Regime& rg, Rng& rng, Tensor<double>& t) {
  const double log_tiny = std::log(1e-30);
  switch (ts.role) {
    case Role::query:
      for (auto& x : t.data) x = rng.normal();
      normalize_rows(t);
      break;
    case Role::key: {
      const std::int64_t F = t.shape.back(), rows = t.numel() / F;
      if (rg.near_duplicate_keys) {
        // One direction per (batch, head) plus a 1e-2 perturbation: large enough to
        // survive bf16 rounding (ulp 2^-8 near 1), small enough to make the Gram ill-conditioned.
        const std::int64_t H = t.shape.at(2), T_ = t.shape.at(1);
        std::vector<double> base(static_cast<std::size_t>(t.shape[0] * H * F));
        for (auto& x : base) x = rng.normal();
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t b = r / (T_ * H), h = r % H;
          for (std::int64_t i = 0; i < F; ++i)
            t.data[r * F + i] = base[(b * H + h) * F + i] + 1e-2 * rng.normal();
        }
      } else {
        for (auto& x : t.data) x = rng.normal();
      }
      normalize_rows(t);
      if (rg.key_log10_norm_hi > rg.key_log10_norm_lo)
        for (std::int64_t r = 0; r < rows; ++r) {
          const double s = std::pow(10.0, rng.uniform(rg.key_log10_norm_lo, rg.key_log10_norm_hi));
          for (std::int64_t i = 0; i < F; ++i) t.data[r * F + i] *= s;
        }
      break;
    }
    case Role::value:
      for (auto& x : t.data) {
        x = rng.normal();
        if (rg.value_edges) {
          const double u = rng.uniform();
          const double sign = rng.uniform() < 0.5 ? -1.0 : 1.0;
          if (u < 1.0 / 3) x = sign * std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.uniform(100, 126)));
          else if (u < 2.0 / 3) x = sign * std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.uniform(-133, -100)));
        }
      }
      break;
    case Role::log_decay:
      // Realistic GDN-style gates: g = −softplus(z), z ~ N(−3, 1): decays near 0.95.
      for (auto& x : t.data) {
        x = -softplus(rng.normal() - 3.0);
        if (rg.decay_edges) {
          const double u = rng.uniform();
          if (u < 0.4) x = 0.0;
          else if (u < 0.6) x = log_tiny;
        }
      }
      break;
    case Role::gate:
      for (auto& x : t.data) {
        x = sigmoid(rng.normal());
        if (rg.beta_edges) {
          const double u = rng.uniform();
          if (u < 0.3) x = 0.0;
          else if (u < 0.6) x = 1.0;
        }
        x = std::min(x, ts.range.hi);
      }
      break;
    case Role::state:
      for (auto& x : t.data) x = 0.1 * rng.normal();
      break;
    case Role::positive:
      for (auto& x : t.data) x = rng.uniform(0.05, 2.0);
      break;
    case Role::precision:
      for (auto& x : t.data)
        x = rg.precision_log10_hi > 0 ? std::pow(10.0, rng.uniform(0.0, rg.precision_log10_hi))
                                      : std::exp(0.5 * rng.normal());
      break;
    case Role::transition:
      for (auto& x : t.data) {
        if (rg.fixed_transition > 0) x = rg.fixed_transition;
        else if (rg.transition_log10_lo < 0) x = std::pow(10.0, rng.uniform(rg.transition_log10_lo, 0.0));
        else x = rng.uniform(0.9, 1.0);
      }
      break;
    case Role::psd_matrix: {
      const std::int64_t n = t.shape.back(), blocks = t.numel() / (n * n);
      std::vector<double> M(static_cast<std::size_t>(n * n));
      for (std::int64_t b = 0; b < blocks; ++b) {
        for (auto& x : M) x = BF16Format::round(0.3 * rng.normal());
        // M Mᵀ/n of bf16 values; rounding each entry once keeps the blocks exactly
        // symmetric (and PSD up to that rounding, far below the ridge λ).
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t l = 0; l < n; ++l) s += M[i * n + l] * M[j * n + l];
            t.data[(b * n + i) * n + j] = s / static_cast<double>(n);
          }
      }
      break;
    }
    case Role::noise:
      for (auto& x : t.data) x = rg.zero_noise ? 0.0 : rng.uniform(0.001, 0.1);
      break;
  }
  // Every value on the bf16 grid (a finite normal or subnormal bf16 number).
  for (auto& x : t.data) x = BF16Format::round(x);
}

// K, V name the key and value widths; KLA-K's specs call them N and D.
Dims dims(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V) {
  return {{"B", B}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};
}

// Stress cases that only make sense for layers with these inputs or keys.
void add_layer_stress(const LayerSpec& spec, std::vector<VectorCase>& cs) {
  if (spec.key("a") && spec.key("solver")) {  // GKA's adaptive regulariser
    Regime dup;
    dup.near_duplicate_keys = true;
    cs.push_back({"small_a_collinear", "a = 1e-4 (κ up to 1e4) with nearly collinear keys", dims(1, 256, 2, 16, 16),
                  dup, {{"a", "1e-4"}}});
    cs.push_back({"chebyshev_small_a", "Chebyshev solver, 30 iterations, a = 1e-3", dims(1, 128, 2, 16, 16), dup,
                  {{"a", "1e-3"}, {"solver", "chebyshev"}}});
  }
  if (spec.input("a_bar") && spec.input("p_bar")) {  // KLA-K
    Regime ovf;
    ovf.zero_noise = true;
    ovf.fixed_transition = 0.5;
    cs.push_back({"precision_overflow", "p̄ = 0, ā = 0.5: precision grows like 4^t and overflows float64",
                  dims(1, 2048, 1, 4, 4), ovf, {}});
    Regime ext;
    ext.transition_log10_lo = -24;
    ext.zero_noise = true;
    ext.precision_log10_hi = 6;
    cs.push_back({"extreme_transition", "ā from 1e-24 to 1, p̄ = 0, λv up to 1e6", dims(1, 256, 2, 8, 8), ext, {}});
  }
}

// A varlen case: B = 1, T = the last offset, the initial states drawn (h0 is
// then [N, H, K, V]).
VectorCase varlen_case(const char* name, const char* doc, std::vector<std::int64_t> cu, std::int64_t H,
                       std::int64_t K) {
  Regime r;
  r.optional_inputs = true;
  r.cu_seqlens = std::move(cu);
  return {name, doc, dims(1, r.cu_seqlens.back(), H, K, K), r, {}};
}

// The boundaries where varlen kernels break (FLA #836, #837, PR #955).
void varlen_cases(std::vector<VectorCase>& cs) {
  cs.push_back(varlen_case("fla_boundaries", "FLA's test boundaries [0, 15, 100, 300, 1200, 2000], H=2 K=V=16",
                           {0, 15, 100, 300, 1200, 2000}, 2, 16));
  cs.push_back(varlen_case("single_tokens", "five one-token sequences, then one of 20 tokens",
                           {0, 1, 2, 3, 4, 5, 25}, 2, 8));
  cs.push_back(varlen_case("chunk_edges", "a boundary exactly at the chunk edge 64, one at 65 (one past), one at 192 "
                           "(3 chunks), T = 200 (not a multiple of 64)",
                           {0, 64, 65, 192, 200}, 2, 16));
  cs.push_back(varlen_case("empty_sequences", "empty sequences first, between two others and last: ht = h0 there",
                           {0, 0, 10, 10, 10, 40, 40}, 2, 8));
}

// Production shapes, for the CUDA kernels and outside candidates (`check`):
// generation only in tests (an MPFR oracle takes hours at these sizes).
void production_cases(std::vector<VectorCase>& cs) {
  cs.push_back({"batch4_t4096", "B=4 T=4096 H=8 K=V=128 (a training step's shape)", dims(4, 4096, 8, 128, 128), {}, {}});
  cs.push_back({"long_t16384", "B=1 T=16384 H=8 K=V=128 (FLA PR #769's illegal access shape)",
                dims(1, 16384, 8, 128, 128), {}, {}});
  // 16 sequences totalling 32768 tokens: lengths over two decades, boundaries
  // on and off the 64-token chunk grid, one single-token sequence.
  const std::vector<std::int64_t> lengths = {4096, 1, 63, 64, 65, 1000, 2048, 3000,
                                             5000, 129, 7, 2500, 4000, 1920, 4600, 4275};
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t l : lengths) cu.push_back(cu.back() + l);
  cs.push_back(varlen_case("varlen_16x_32k", "16 sequences, 32768 tokens in all, H=8 K=V=128", cu, 8, 128));
}

}  // namespace

const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> n = {"tiny",   "demo",       "standard",      "stress",
                                             "varlen", "production", "int32_overflow"};
  return n;
}

std::vector<VectorCase> suite_cases(const LayerSpec& spec, const std::string& suite) {
  std::vector<VectorCase> cs;
  if (suite == "tiny") {
    cs.push_back({"basic", "smallest shapes, T not a power of two", dims(1, 7, 2, 4, 3), {}, {}});
    Regime r;
    r.optional_inputs = true;
    cs.push_back({"with_state", "optional inputs (initial state) present", dims(2, 5, 1, 3, 2), r, {}});
  } else if (suite == "demo") {
    cs.push_back({"realistic_small", "B=1 T=128 H=2 K=V=16, normalised keys, realistic gates (bundled in examples/demo)",
                  dims(1, 128, 2, 16, 16), {}, {}});
  } else if (suite == "standard") {
    cs.push_back({"realistic", "B=2 T=1024 H=4 K=V=64, normalised keys, realistic gates", dims(2, 1024, 4, 64, 64),
                  {}, {}});
  } else if (suite == "stress") {
    cs.push_back({"long", "long sequence", dims(1, 4096, 1, 16, 16), {}, {}});
    Regime edges;
    edges.decay_edges = edges.beta_edges = true;
    cs.push_back({"decay_beta_edges", "decays exactly 1 and 1e-30, β exactly 0 and 1", dims(1, 256, 2, 16, 16), edges,
                  {}});
    Regime dup;
    dup.near_duplicate_keys = true;
    VectorCase d{"near_duplicate_keys", "keys within 1e-2 of one direction per head", dims(1, 256, 2, 16, 16), dup, {}};
    if (const ConfigKey* l = spec.key("lambda"); l && l->required) {  // ridge layers, not GKA's optional fixed λ
      d.doc += "; ridge lambda = 1e-10 (ill-conditioned)";
      d.config.push_back({"lambda", "1e-10"});
    }
    cs.push_back(d);
    Regime norms;
    norms.key_log10_norm_lo = -3;
    norms.key_log10_norm_hi = 3;
    cs.push_back({"key_norms", "key norms from 1e-3 to 1e3", dims(1, 256, 2, 16, 16), norms, {}});
    Regime vals;
    vals.value_edges = true;
    cs.push_back({"value_edges", "values near bf16's largest and smallest magnitudes", dims(1, 128, 2, 16, 16), vals,
                  {}});
    cs.push_back({"chunk_boundary", "T = 65, one past a chunk of 64", dims(1, 65, 1, 8, 8), {}, {}});
    add_layer_stress(spec, cs);
  } else if (suite == "varlen") {
    varlen_cases(cs);
  } else if (suite == "production") {
    production_cases(cs);
  } else if (suite == "int32_overflow") {
    // B·T·H·K = 4·65600·64·128 = 2 149 580 800 > 2^31 = 2 147 483 648: an int32
    // element offset into q overflows (FLA #1080). Inputs only (an oracle would
    // take days); about 17 GB per [B,T,H,K] tensor in memory as float64 and
    // 8.6 GB per tensor on disk as F32 (docs/varlen.md, "Production shapes").
    cs.push_back({"offsets_past_int32", "B=4 T=65600 H=64 K=V=128: B·T·H·K > 2^31 (int32 offsets overflow)",
                  dims(4, 65600, 64, 128, 128), {}, {}});
  } else {
    throw InputError(
        fmt::format("unknown suite '{}' (tiny|demo|standard|stress|varlen|production|int32_overflow)", suite));
  }
  for (auto& c : cs)
    for (const auto& key : spec.config)
      if (key.required && key.example) {
        bool set = false;
        for (const auto& [k, _] : c.config) set |= k == key.name;
        if (!set) c.config.push_back({key.name, *key.example});
      }
  return cs;
}

TensorMap<double> generate_inputs(const LayerSpec& spec, const VectorCase& c, std::uint64_t seed) {
  TensorMap<double> out;
  const std::vector<std::int64_t>& cu = c.regime.cu_seqlens;
  for (const auto& ts : spec.inputs) {
    if (ts.name == kCuSeqlens) {  // set from the case, never drawn
      if (cu.empty()) continue;
      Tensor<double> t({static_cast<std::int64_t>(cu.size())}, 0.0);
      for (std::size_t i = 0; i < cu.size(); ++i) t.data[i] = static_cast<double>(cu[i]);
      out.emplace(ts.name, std::move(t));
      continue;
    }
    if (!ts.required && !c.regime.optional_inputs) continue;
    Dims dims = c.dims;
    if (!cu.empty() && axis_kind(ts) == AxisKind::per_sequence)  // one row per packed sequence
      dims["B"] = static_cast<std::int64_t>(cu.size()) - 1;
    Tensor<double> t(shape_of(ts, dims), 0.0);
    // One stream per tensor: adding a tensor to a spec leaves the others unchanged.
    Rng rng(seed ^ fnv1a(spec.name + "/" + c.name + "/" + ts.name));
    draw(ts, c.regime, rng, t);
    out.emplace(ts.name, std::move(t));
  }
  keep_writes_contractive(spec, out);
  return out;
}

void keep_writes_contractive(const LayerSpec& spec, TensorMap<double>& out) {
  // Keep delta-rule writes contractive: β_t ‖k_t‖² <= 1 (see LayerSpec).
  if (spec.step_scales_with_key_energy && out.count("beta") && out.count("k")) {
    const Tensor<double>& k = out.at("k");
    Tensor<double>& beta = out.at("beta");
    const std::int64_t K = k.shape.back();
    for (std::int64_t r = 0; r < beta.numel(); ++r) {
      double e = 0;
      for (std::int64_t i = 0; i < K; ++i) e += k.data[r * K + i] * k.data[r * K + i];
      if (beta.data[r] * e <= 1.0) continue;
      // The bf16 value nearest 1/e, stepped down one bf16 ulp at a time until
      // β e <= 1 (β >= 1e-6 here, a normal bf16 number, so a step always moves).
      double b = BF16Format::round(1.0 / e);
      for (int step = 0; step < 4 && b * e > 1.0; ++step) b = BF16Format::round(b - std::ldexp(1.0, std::ilogb(b) - 7));
      beta.data[r] = b;
    }
  }
}

TensorMap<double> generate_backward_inputs(const LayerSpec& spec, const VectorCase& c, std::uint64_t seed) {
  LayerSpec cot = backward_spec(spec);
  cot.inputs.clear();
  for (const TensorSpec& t : backward_spec(spec).inputs)
    if (!spec.input(t.name)) {
      cot.inputs.push_back(t);
      cot.inputs.back().required = true;
    }
  TensorMap<double> in = generate_inputs(spec, c, seed);
  for (auto& [name, t] : generate_inputs(cot, c, seed)) in[name] = std::move(t);
  return in;
}

}  // namespace ttr
