// Structured fuzz harness: the fuzzer's bytes become a layer's inputs, the CPU
// chunk/scan form runs in bf16 and fp32 (the kernels' algorithms under their
// arithmetic policies), and the result is judged as `ttrcheck check` judges a
// candidate: against the sequential oracle (MPFR, 128 bits, as the gate) under
// the error model (gate/error_model.hpp, Monte Carlo arithmetic, 8 samples,
// ratio threshold 8). Findings:
//   - a NaN/Inf in the kernel's output where the oracle is finite and fits the
//     dtype (TensorVerdict::nonfinite_failures), and
//   - a failing verdict (some row's error ratio above the threshold).
// TTR_FUZZ_OBJECTIVE=nan keeps only the first (NaN/Inf hunts).
//
// Byte layout (ByteSource: exhausted input reads as zeros), sizes capped so an
// input runs in milliseconds:
//   target (layer_targets.def, modulo), T in [1, 24], H in [1, 2], K in [1, 8],
//   V in [1, 8], chunk size 2^[1, 4], the layer's boolean config keys, then per
//   input tensor in spec order: present? (optional ones), a tensor scale byte,
//   a per-row spread byte, then its elements (see draw() below).
// Each read is its own statement (the order of a call's arguments is unspecified:
// g++ and clang differ, and the same bytes must mean the same inputs in both
// builds). Every value is rounded to the bf16 grid, so the bf16 and fp32 kernels and the
// oracle see the same numbers; delta-rule steps are kept contractive
// (β‖k‖² <= 1, as `ttrcheck vectors` does); the inputs then pass validate_inputs
// (input the CLI would refuse is not a finding).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "fuzz/harness/fuzz_support.hpp"
#include "oracles/error.hpp"
#include "gate/judge.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/registry.hpp"
#include "oracles/validate.hpp"
#include "oracles/varlen.hpp"
#include "reference/core/float16.hpp"

namespace ttr {
namespace runners {  // defined in the generated runner TUs (oracles/CMakeLists.txt)
#define TTR_FUZZ_TARGET(layer, form)                                                                  \
  namespace layer##__sequential__forward {                                                            \
  LayerResult mpfr(const TensorMap<double>&, const Config&, const FormOptions&);                      \
  }                                                                                                   \
  namespace layer##__##form##__forward {                                                              \
  LayerResult bf16(const TensorMap<double>&, const Config&, const FormOptions&);                      \
  LayerResult fp32(const TensorMap<double>&, const Config&, const FormOptions&);                      \
  LayerResult mca(const TensorMap<double>&, const Config&, const FormOptions&);                       \
  }
#include "fuzz/harness/layer_targets.def"
#undef TTR_FUZZ_TARGET
}  // namespace runners
namespace layers {
#define TTR_FUZZ_TARGET(layer, form) LayerSpec spec_##layer();
#include "fuzz/harness/layer_targets.def"
#undef TTR_FUZZ_TARGET
}  // namespace layers
}  // namespace ttr

namespace {

using namespace ttr;
using fuzz::ByteSource;

constexpr unsigned kOracleBits = 128;  // the gate's oracle precision (gate/gate.cpp)

struct Target {
  LayerEntry entry;  // holds only the runners this harness links
  Form form;
};

std::vector<Target> make_targets() {
  std::vector<Target> out;
  const auto idx = [](Tier t) { return static_cast<std::size_t>(t); };
#define TTR_FUZZ_TARGET(layer, form_)                                               \
  {                                                                                 \
    Target t{{layers::spec_##layer(), {}, {}}, Form::form_};                        \
    FormImpl seq{Form::sequential, Direction::forward, {}};                         \
    seq.runners[idx(Tier::mpfr)] = &runners::layer##__sequential__forward::mpfr;    \
    FormImpl f{Form::form_, Direction::forward, {}};                                \
    f.runners[idx(Tier::bf16)] = &runners::layer##__##form_##__forward::bf16;       \
    f.runners[idx(Tier::fp32)] = &runners::layer##__##form_##__forward::fp32;       \
    f.runners[idx(Tier::mca)] = &runners::layer##__##form_##__forward::mca;         \
    t.entry.forms = {seq, f};                                                       \
    out.push_back(std::move(t));                                                    \
  }
#include "fuzz/harness/layer_targets.def"
#undef TTR_FUZZ_TARGET
  return out;
}

// A value of magnitude up to 2^e from 16 bits: sign and a uniform mantissa.
double signed_value(ByteSource& src, int e) {
  const auto u = static_cast<std::int16_t>(src.u16());
  return std::ldexp(u / 32768.0, e);
}

// A value inside `r` when x is not (keeps the input valid).
double into(const Range& r, double x) {
  if (r.contains(x)) return x;
  if (std::isfinite(r.lo) && std::isfinite(r.hi)) return 0.5 * (r.lo + r.hi);
  if (std::isfinite(r.lo)) return r.lo + 1.0;
  if (std::isfinite(r.hi)) return r.hi - 1.0;
  return 0.0;
}

// The adversarial families of the property tests, chosen by the bytes: exact
// zeros and ones, decays of exactly 1 and 1e-30, magnitudes over many decades
// (a tensor scale 2^[-24, 24] and a per-row spread of up to 2^±12).
void draw(const TensorSpec& ts, ByteSource& src, Tensor<double>& t) {
  const int scale = src.pick(-24, 24);
  const int spread = src.pick(0, 12);
  const std::int64_t F = t.shape.empty() ? 1 : t.shape.back();
  const std::int64_t rows = F ? t.numel() / F : 0;
  const double log_tiny = std::log(1e-30);
  for (std::int64_t r = 0; r < rows; ++r) {
    const int row_e = scale + (spread ? src.pick(-spread, spread) : 0);
    for (std::int64_t i = 0; i < F; ++i) {
      double& x = t.data[static_cast<std::size_t>(r * F + i)];
      switch (ts.role) {
        case Role::query:
        case Role::key:
        case Role::value:
        case Role::state:
          x = signed_value(src, row_e);
          break;
        case Role::log_decay: {
          const std::uint8_t c = src.byte();
          if (c < 64) {
            x = 0.0;
          } else if (c < 96) {
            x = log_tiny;
          } else {
            const double m = src.unit();  // one statement each: arguments' order is unspecified
            x = -std::ldexp(m, src.pick(-12, 6));
          }
          break;
        }
        case Role::gate: {
          const std::uint8_t c = src.byte();
          x = c < 64 ? 0.0 : c < 128 ? 1.0 : src.unit();
          break;
        }
        case Role::positive:
        case Role::precision:
        {
          const double m = 0.5 + src.unit();
          x = std::ldexp(m, src.pick(-12, 12));
        }
          break;
        case Role::transition: {
          const std::uint8_t c = src.byte();
          if (c < 64) {
            x = 1.0;
          } else {
            const double m = 0.5 + 0.5 * src.unit();
            x = std::min(1.0, std::ldexp(m, -src.pick(0, 80)));
          }
          break;
        }
        case Role::noise: {
          const std::uint8_t c = src.byte();
          if (c < 96) {
            x = 0.0;
          } else {
            const double m = src.unit();
            x = std::ldexp(m, -src.pick(0, 30));
          }
          break;
        }
        case Role::psd_matrix:
          x = signed_value(src, 0);  // M; made M Mᵀ/n below
          break;
      }
    }
  }
  if (ts.role == Role::psd_matrix && F > 0) {
    const std::int64_t n = F, blocks = t.numel() / (n * n);
    std::vector<double> M(t.data.begin(), t.data.end());
    for (auto& m : M) m = BF16Format::round(m);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t l = 0; l < n; ++l) s += M[(b * n + i) * n + l] * M[(b * n + j) * n + l];
          t.data[(b * n + i) * n + j] = s / static_cast<double>(n);
        }
  }
  for (auto& x : t.data) x = BF16Format::round(into(ts.range, x));
  if (ts.symmetric && F > 0) {  // rounding once per entry keeps M Mᵀ symmetric; make it exact anyway
    const std::int64_t n = F;
    for (std::int64_t b = 0; b < t.numel() / (n * n); ++b)
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < i; ++j) t.data[(b * n + i) * n + j] = t.data[(b * n + j) * n + i];
  }
}

// β_t ‖k_t‖² <= 1 for delta-rule layers (LayerSpec::step_scales_with_key_energy),
// the same bf16 value `ttrcheck vectors` picks (oracles/vectors.cpp).
void contract_steps(TensorMap<double>& in) {
  if (!in.count("beta") || !in.count("k")) return;
  const Tensor<double>& k = in.at("k");
  Tensor<double>& beta = in.at("beta");
  const std::int64_t K = k.shape.back();
  for (std::int64_t r = 0; r < beta.numel(); ++r) {
    double e = 0;
    for (std::int64_t i = 0; i < K; ++i) e += k.data[r * K + i] * k.data[r * K + i];
    if (beta.data[r] * e <= 1.0) continue;
    double b = BF16Format::round(1.0 / e);
    for (int step = 0; step < 4 && b * e > 1.0; ++step) b = BF16Format::round(b - std::ldexp(1.0, std::ilogb(b) - 7));
    beta.data[r] = b * e <= 1.0 ? b : 0.0;
  }
}

std::string describe(const std::string& layer, Form form, Tier dtype, const Dims& d, int chunk) {
  return fmt::format("{}/{}/{} T={} H={} K={} V={} chunk={}", layer, form_name(form), tier_name(dtype), d.at("T"),
                     d.at("H"), d.at("K"), d.at("V"), chunk);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<Target> targets = make_targets();
  static const bool nan_only = [] {
    const char* o = std::getenv("TTR_FUZZ_OBJECTIVE");
    return o && std::string(o) == "nan";
  }();
  // TTR_FUZZ_VERBOSE=1: one line per check (ratios); TTR_FUZZ_DUMP=FILE: the
  // inputs as a safetensors file with the metadata `ttrcheck check` reads, so a
  // finding replays through the CLI (docs/fuzzing-harnesses.md).
  static const bool verbose = std::getenv("TTR_FUZZ_VERBOSE") != nullptr;
  static const char* dump = std::getenv("TTR_FUZZ_DUMP");
  ByteSource src(data, size);
  const Target& target = targets[src.byte() % targets.size()];
  const LayerSpec& spec = target.entry.spec;
  const std::int64_t T = src.pick(1, 24), H = src.pick(1, 2), K = src.pick(1, 8), V = src.pick(1, 8);
  const int chunk = 1 << src.pick(1, 4);
  const Dims dims = {{"B", 1}, {"T", T}, {"H", H}, {"K", K}, {"V", V}, {"N", K}, {"D", V}};

  std::vector<std::pair<std::string, std::string>> sets;
  for (const ConfigKey& key : spec.config) {
    if (key.type == KeyType::boolean) sets.push_back({key.name, src.flag() ? "true" : "false"});
    else if (key.required && key.example) sets.push_back({key.name, *key.example});
  }
  io::TensorFile file;
  TensorMap<double> raw;
  for (const TensorSpec& ts : spec.inputs) {
    if (ts.name == kCuSeqlens) continue;  // fixed-length batches here
    if (!ts.required && !src.flag()) continue;
    Tensor<double> t(shape_of(ts, dims), 0.0);
    draw(ts, src, t);
    raw.emplace(ts.name, std::move(t));
  }
  if (spec.step_scales_with_key_energy) contract_steps(raw);
  for (const auto& [name, t] : raw) file.tensors[name] = io::from_f64(t.data, t.shape, io::DType::F32);

  LayerInputs in;
  Config cfg;
  try {
    in = validate_inputs(spec, file, "fuzz");
    cfg = Config::make(spec, sets);
  } catch (const InputError&) {
    return 0;  // not an input the CLI accepts
  }

  if (dump) {
    io::TensorFile out = file;
    out.metadata = {{"kind", "inputs"}, {"layer", spec.name}, {"config", cfg.json()}};
    io::write_safetensors_atomic(dump, out);
  }
  Judge judge(target.entry, in.tensors, cfg, {Tier::mpfr, kOracleBits});
  for (const Tier dtype : {Tier::bf16, Tier::fp32}) {
    const TensorMap<double> cand = run_layer(target.entry, target.form, {dtype, 0}, in.tensors, cfg, chunk).values;
    ModelSpec ms;
    ms.form = target.form;
    ms.dtype = dtype;
    ms.chunk_size = chunk;
    const CheckResult r = judge(cand, ms);
    const std::string what = describe(spec.name, target.form, dtype, in.dims, chunk);
    if (verbose)
      for (const TensorVerdict& v : r.tensors)
        std::fprintf(stderr, "%s: %s max ratio %.4g at b=%lld t=%lld h=%lld, max abs error %.3e, NaN %lld, Inf %lld\n",
                     what.c_str(), v.name.c_str(), v.max_ratio, static_cast<long long>(v.worst.b),
                     static_cast<long long>(v.worst.t), static_cast<long long>(v.worst.h), v.max_abs_error,
                     static_cast<long long>(v.nan_count), static_cast<long long>(v.inf_count));
    for (const TensorVerdict& v : r.tensors) {
      TTR_FUZZ_REQUIRE(v.nonfinite_failures == 0,
                       fmt::format("{}: '{}' has {} NaN/Inf where the oracle is finite (first at b={} t={} h={})",
                                   what, v.name, v.nonfinite_failures, v.first_nonfinite.b, v.first_nonfinite.t,
                                   v.first_nonfinite.h));
      if (!nan_only)
        TTR_FUZZ_REQUIRE(v.pass, fmt::format("{}: '{}' fails the gate: error ratio {:.3g} > {} at b={} t={} h={}",
                                             what, v.name, v.max_ratio, r.threshold, v.worst.b, v.worst.t, v.worst.h));
    }
  }
  return 0;
}
