// Properties of the CUDA kernels (issue 18, item 5): RapidCheck on the GPU, with the
// adversarial input generators of properties/gen/ (gate edges, near-duplicate and
// collinear keys, β ∈ {0, 1}, bf16-exact values, T across chunk edges), shrinking
// to a minimal failing input. Every kernel the registry declares for the CUDA
// backend (TTR_KERNEL lines of layers.def), forward and backward, bf16 and fp32:
//
//  * RepeatedRunsAreBitIdentical — determinism: no atomics or race decides a bit.
//  * BatchAndHeadOrderIsIrrelevant — permuting the batch and head axes of every
//    input (tokens [B,T,H,…], states [B,H,…], per-head parameters [H,…]) permutes
//    every output the same way, bit for bit, and one head run alone equals its slice
//    of the batch: no block reads another's data, whatever the grid. Gradients of
//    per-head parameters (KLA-K's da_bar, dp_bar) are sums over the batch rows in
//    row order, so they are held to that only where the row order is kept.
//  * LinearInStateAndValues — each output the kernel's recurrence makes linear
//    is (delta family and GKA: o, ht in (v, h0), S_t being linear in them; KLA-K:
//    o, eta_T in (v, eta_init), the information mean being linear): K(a + αb) =
//    K(a) + α K(b), α = ±2^s, inputs a and b sharing everything else; a backward
//    kernel is linear in its cotangents (the gradient of a sum is the sum of the
//    gradients). Judged under the kernel's error model: the three runs' errors are
//    independent, so the models of a + αb, a and b (scaled by |α|: the model is
//    homogeneous too) add in quadrature, as the judge's chunk-vs-recurrent check
//    adds two. The other outputs (KLA-K's o_var, lambda_T; GKA's hkk) do not see
//    (v, h0) at all: bit for bit the same in the three runs.
//  * ChunkAndRecurrentAgreeWithinTheModel — both kernels against the MPFR oracle
//    and against each other (check_kernels with cross: models in quadrature).
//    Here and in LinearInStateAndValues a case past a domain condition that
//    estimates the form's rounding noise is discarded (GKA's chunk-backward
//    `reversal`: a fixed λ far above ‖H_t‖_F, where Alg. 2's reversed iterates
//    overflow fp32 in the CPU form as in the kernel; docs/domains/gka.md).
//  * RecurrentFp32StateIsBounded — delta family (plain write) and GKA, unit keys,
//    β ∈ [0, 1], decays ≤ 1: ‖S_T‖_F ≤ ‖S_0‖_F + Σ_t β_t‖k_t‖‖v_t‖ exactly
//    (properties/state_bounds_props.cpp derives it). The fp32 fused-recurrent
//    kernel is that recurrence with each step rounded: the decay, the dot products
//    of length K, the residual, the β product and the rank-1 update perturb the
//    step by E_t with ‖E_t‖_F ≤ 3γ_{K+6}(‖S_{t−1}‖_F + β_t‖k_t‖‖v_t‖) (γ_n =
//    nu/(1 − nu), Higham §3.1, ‖|A|‖_F = ‖A‖_F), so the computed state obeys the
//    bound times (1 + 3γ_{K+6})^T. Only the recurrent kernels in fp32: the chunk
//    kernels' rounding passes through the UT inverse (not one step at a time, and
//    checked against the oracle above), and in bf16 (K + 6)·T·2⁻⁸ exceeds 1 at
//    these lengths, leaving no bound to state.
//
// Cases per property: RC_PARAMS (the CTest registration sets max_success;
// tests/CMakeLists.txt). Label `gpu`; skipped without a device.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "oracles/domain.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "oracles/varlen.hpp"
#include "properties/gen/layer_inputs.hpp"
#include "properties/support/run.hpp"
#include "reference/core/thread_caches.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

namespace gen = prop::gen;

struct Kernel {
  std::string layer;
  Form form;
  Direction dir;
};
void showValue(const Kernel& k, std::ostream& os) {
  os << k.layer << " cuda-" << form_name(k.form) << (k.dir == Direction::backward ? " backward" : "");
}

// Every CUDA kernel of the registry, or those of some forms only.
std::vector<Kernel> cuda_kernels(std::vector<Form> only = {}) {
  std::vector<Kernel> r;
  for (const LayerEntry& e : registry())
    for (Direction d : {Direction::forward, Direction::backward})
      for (const KernelImpl* k : e.kernel_list(Backend::cuda, d))
        if (only.empty() || std::find(only.begin(), only.end(), k->form) != only.end())
          r.push_back({e.spec.name, k->form, d});
  return r;
}

const LayerSpec& spec_of(const Kernel& k) {
  static std::map<std::string, LayerSpec> backward;
  const LayerSpec& fwd = find_layer(k.layer).spec;
  if (k.dir == Direction::forward) return fwd;
  auto it = backward.find(k.layer);
  if (it == backward.end()) it = backward.emplace(k.layer, backward_spec(fwd)).first;
  return it->second;
}

// The CUDA kernels take K, V ≤ 128 (padded to 16 by the bindings): sizes on
// both sides of 16 and of the padding; T across up to three 64-token chunks.
gen::InputOptions kernel_sizes(int max_T, int max_KV) {
  gen::InputOptions o;
  o.max_T = max_T;
  o.max_B = 2;
  o.max_H = 3;
  o.max_K = max_KV;
  o.max_V = max_KV;
  return o;
}

// A kernel's inputs: the layer's adversarial case, the config the CUDA kernels
// implement (gka: solver=chebyshev, its iterations drawn), and in the backward
// direction the cotangents of the outputs (role `value`: bf16-exact, signed).
struct Case {
  gen::LayerCase c;
  Config cfg;
};
void showValue(const Case& x, std::ostream& os) { gen::showValue(x.c, os); }

rc::Gen<Case> kernel_case(const Kernel& k, gen::InputOptions opt) {
  return rc::gen::exec([k, opt] {
    gen::LayerCase c = *gen::layer_case(k.layer, opt);
    if (k.layer == "gka") {
      std::erase_if(c.sets, [](const auto& s) { return s.first == "solver" || s.first == "iters"; });
      c.sets.emplace_back("solver", "chebyshev");
      c.sets.emplace_back("iters", std::to_string(*gen::uniform_int(1, 30)));
    }
    if (k.dir == Direction::backward) {
      // The cotangents only: a forward input layer_case left out (an optional h0,
      // hkk0, β, α) stays out. Drawn as a `value` it would leave the layer's input
      // ranges (a GKA hkk0 that is not PSD, β outside [0, 1]) and so the domain
      // whose error model the properties judge by.
      const LayerSpec& fwd = find_layer(k.layer).spec;
      for (const TensorSpec& ts : spec_of(k).inputs)
        if (!fwd.input(ts.name) && !c.in.count(ts.name) && (ts.required || *gen::choose<bool>({{1, false}, {1, true}}))) {
          Tensor<double> t(shape_of(ts, c.dims), 0.0);
          t.data = gen::draw_role(Role::value, t.numel());
          c.in.emplace(ts.name, std::move(t));
        }
    }
    Case x{c, Config::make(find_layer(k.layer).spec, c.sets)};
    return x;
  });
}

TensorMap<double> run(const Kernel& k, const TensorMap<double>& in, const Config& cfg, Tier dtype) {
  return find_layer(k.layer).kernel(Backend::cuda, k.form, k.dir)->run(in, cfg, dtype, {});
}

void assert_bits_equal(const TensorMap<double>& want, const TensorMap<double>& got, const std::string& what) {
  RC_ASSERT(want.size() == got.size());
  for (const auto& [name, w] : want) {
    const auto it = got.find(name);
    RC_ASSERT(it != got.end());
    if (!prop::bits_equal(w.data, it->second.data)) {
      std::size_t i = 0;
      while (i < w.data.size() && std::memcmp(&w.data[i], &it->second.data[i], sizeof(double)) == 0) ++i;
      RC_FAIL(fmt::format("{}: {} differs first at flat index {} ({} vs {})", what, name, i, w.data[i],
                          it->second.data[i]));
    }
  }
}

// Whether the inputs violate a domain condition that estimates the form's rounding
// noise (DomainCondition::rounding: GKA's chunk-backward `reversal`, Alg. 2's reversed
// iterates, whose noise grows by R^{−r} past fp32's range with κ near 1 — NaN in the
// CPU form as in the kernel, docs/domains/gka.md). Such a case is discarded: the form
// itself cannot compute it, and no range finding excuses its NaN. A case past an
// ordinary condition stays: a NaN there is judged by the range rule like any other.
bool past_rounding_condition(const Kernel& k, const TensorMap<double>& in, const Config& cfg, Tier dtype) {
  const LayerDomain* d = layer_domain(k.layer);
  if (!d) return false;
  for (const DomainViolation& v : domain_violations(*d, {spec_of(k), in, cfg}, {k.form, k.dir, dtype, 64}))  // the kernels' C
    if (v.rounding) return true;
  return false;
}

Tier any_dtype() { return *gen::choose_uniform<Tier>({Tier::bf16, Tier::fp32}); }

// With TTR_PROP_PROGRESS set, a line on stderr for each evaluation of a property
// (cases and shrink steps alike): which kernel, dtype and sizes, and how long it
// took. RapidCheck says nothing until a property ends, and the MPFR-judged ones
// take seconds a case, so that a run cut short by a deadline still shows where
// it was. With TTR_PROP_DUMP=DIR, each failing evaluation's inputs are written to
// DIR as float64 safetensors with the config in the metadata (what `ttrcheck run
// --device cuda` and `check` replay): <property>.first.safetensors, the first
// failure, and <property>.last.safetensors, overwritten at each failing shrink step,
// so the smallest failure found when the run ends or is cut short (properties whose
// failing input is the drawn case itself: `replayable`).
class Progress {
 public:
  explicit Progress(const char* property, bool replayable = false)
      : property_(property), replayable_(replayable), t0_(std::chrono::steady_clock::now()) {
    static const bool on = std::getenv("TTR_PROP_PROGRESS") != nullptr;
    on_ = on;
  }
  void describe(const Kernel& k, const Case& x, const char* dtype) {
    kernel_ = &k;
    case_ = &x;
    dtype_ = dtype;
    if (!on_) return;
    std::string dims;
    for (const char* d : {"B", "T", "H", "K", "V"})
      if (const auto it = x.c.dims.find(d); it != x.c.dims.end()) dims += fmt::format(" {}={}", d, it->second);
    what_ = fmt::format("{} {} cuda-{}{} {}{}", property_, k.layer, form_name(k.form),
                        k.dir == Direction::backward ? " backward" : "", dtype, dims);
  }
  ~Progress() {
    const bool failed = std::uncaught_exceptions() > 0;
    if (failed) dump();
    if (!on_ || what_.empty()) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "prop %s: %.2f s%s\n", what_.c_str(), s, failed ? " (failed)" : "");
  }

 private:
  void dump() const noexcept {
    static const char* dir = std::getenv("TTR_PROP_DUMP");
    if (!dir || !replayable_ || !kernel_ || !case_) return;
    try {
      const LayerEntry& e = find_layer(kernel_->layer);
      auto meta = base_metadata("inputs", e.spec, case_->cfg);
      meta["kernel"] = fmt::format("cuda-{}", form_name(kernel_->form));
      meta["dtype"] = dtype_;
      if (kernel_->dir == Direction::backward) meta["direction"] = "backward";
      const io::TensorFile f = to_file(case_->c.in, io::DType::F64, meta);
      const std::filesystem::path d(dir);
      std::filesystem::create_directories(d);
      const auto first = d / fmt::format("{}.first.safetensors", property_);
      if (!std::filesystem::exists(first)) io::write_safetensors_atomic(first, f);
      io::write_safetensors_atomic(d / fmt::format("{}.last.safetensors", property_), f);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "TTR_PROP_DUMP: %s\n", ex.what());
    }
  }

  const char* property_;
  bool replayable_;
  std::chrono::steady_clock::time_point t0_;
  bool on_ = false;
  std::string what_;
  const Kernel* kernel_ = nullptr;
  const Case* case_ = nullptr;
  const char* dtype_ = "";
};

// ---------------------------------------------------------------------------

TEST(CudaProperties, RepeatedRunsAreBitIdentical) {
  TTR_REQUIRE_DEVICE();
  EXPECT_TRUE(rc::check("a kernel run twice gives the same bits", [] {
    const Kernel k = *gen::choose_uniform(cuda_kernels());
    const Tier dtype = any_dtype();
    const Case x = *kernel_case(k, kernel_sizes(200, 48));
    RC_TAG(k.layer);
    assert_bits_equal(run(k, x.c.in, x.cfg, dtype), run(k, x.c.in, x.cfg, dtype), "second run");
  }));
}

// Tensor t (axes named `dims`) with its B and H axes re-indexed: out[.., b, .., h, ..]
// = t[.., pb[b], .., ph[h], ..]; pb, ph empty: the identity on that axis.
Tensor<double> permute_bh(const Tensor<double>& t, const std::vector<std::string>& dims,
                          const std::vector<std::int64_t>& pb, const std::vector<std::int64_t>& ph) {
  Tensor<double> out(t.shape, 0.0);
  std::vector<std::int64_t> idx(t.shape.size(), 0);
  for (double& e : out.data) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      std::int64_t i = idx[d];
      if (dims[d] == "B") i = pb[static_cast<std::size_t>(i)];
      if (dims[d] == "H") i = ph[static_cast<std::size_t>(i)];
      flat = flat * t.shape[d] + i;
    }
    e = t.data[static_cast<std::size_t>(flat)];
    for (std::size_t d = t.shape.size(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<std::int64_t> permutation(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  // Fisher–Yates with choices RapidCheck shrinks toward 0: toward no swap, the identity.
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(i - *gen::uniform_int(0, static_cast<int>(i)))]);
  return p;
}

TEST(CudaProperties, BatchAndHeadOrderIsIrrelevant) {
  TTR_REQUIRE_DEVICE();
  EXPECT_TRUE(rc::check("permuted batch and heads give permuted outputs; a head alone its slice", [] {
    const Kernel k = *gen::choose_uniform(cuda_kernels());
    const Tier dtype = any_dtype();
    const Case x = *kernel_case(k, kernel_sizes(160, 48));
    RC_TAG(k.layer);
    const LayerSpec& spec = spec_of(k);
    const std::int64_t B = x.c.dims.at("B"), H = x.c.dims.at("H");
    const auto pb = permutation(B), ph = permutation(H);
    TensorMap<double> in;
    for (const auto& [name, t] : x.c.in) in[name] = permute_bh(t, spec.input(name)->dims, pb, ph);
    const TensorMap<double> base = run(k, x.c.in, x.cfg, dtype), moved = run(k, in, x.cfg, dtype);
    // Gradients of a per-head parameter (KLA-K's da_bar, dp_bar: dims start H) are
    // sums over the batch rows, added in row order (gpu/kla_kalman/scan_backward.cu,
    // stage 14): a permuted batch adds the same terms in another order, and a row
    // alone holds one term of the sum. Bit equality holds for them only where the
    // batch order is kept (heads permuted) and for a head alone of a batch of one.
    const bool rows_kept = std::is_sorted(pb.begin(), pb.end());
    const auto batch_summed = [&](const std::string& name) {
      return axis_kind(*spec.output(name)) == AxisKind::per_head;
    };
    TensorMap<double> want, got = moved;
    for (const auto& [name, t] : base) want[name] = permute_bh(t, spec.output(name)->dims, pb, ph);
    if (!rows_kept) std::erase_if(want, [&](const auto& kv) { return batch_summed(kv.first); });
    if (!rows_kept) std::erase_if(got, [&](const auto& kv) { return batch_summed(kv.first); });
    assert_bits_equal(want, got, "permuted run");
    const std::int64_t b = *gen::uniform_int(0, static_cast<int>(B - 1)), h = *gen::uniform_int(0, static_cast<int>(H - 1));
    TensorMap<double> one, slice;
    for (const auto& [name, t] : x.c.in) one[name] = test::slice_bh(t, spec.input(name)->dims, b, h);
    for (const auto& [name, t] : base)
      if (B == 1 || !batch_summed(name)) slice[name] = test::slice_bh(t, spec.output(name)->dims, b, h);
    TensorMap<double> alone = run(k, one, x.cfg, dtype);
    std::erase_if(alone, [&](const auto& kv) { return !slice.count(kv.first); });
    assert_bits_equal(slice, alone, fmt::format("head ({}, {}) alone", b, h));
  }));
}

// What a kernel is linear in, and which outputs: see the file comment.
struct Linearity {
  std::set<std::string> inputs, outputs;
};
Linearity linearity(const Kernel& k) {
  const LayerSpec& fwd = find_layer(k.layer).spec;
  Linearity l;
  if (k.dir == Direction::backward) {  // every cotangent in, every gradient out
    for (const TensorSpec& ts : spec_of(k).inputs)
      if (!fwd.input(ts.name)) l.inputs.insert(ts.name);
    for (const TensorSpec& ts : spec_of(k).outputs) l.outputs.insert(ts.name);
    return l;
  }
  if (fwd.input("eta_init")) return {{"v", "eta_init"}, {"o", "eta_T"}};  // kla_kalman
  return {{"v", "h0"}, {"o", "ht"}};  // the delta family and gka: S_t is linear in (v, h0)
}

TEST(CudaProperties, LinearInStateAndValues) {
  TTR_REQUIRE_DEVICE();
  EXPECT_TRUE(rc::check("K(a + αb) = K(a) + αK(b) within the models; the rest unchanged", [] {
    const ThreadCaches caches;
    // The kernels that are finite wherever the outputs are (not kla_kalman's
    // chunk_unscaled, the paper's representation kept for comparison).
    const Kernel k = *gen::choose_uniform(cuda_kernels({Form::chunk, Form::sequential}));
    const Tier dtype = any_dtype();
    const Case x = *kernel_case(k, kernel_sizes(100, 20));
    RC_TAG(k.layer);
    const Linearity lin = linearity(k);
    RC_ASSERT(!lin.inputs.empty());
    const int s = *gen::uniform_int(-3, 3);
    const double alpha = std::ldexp(*gen::choose_uniform<double>({1.0, -1.0}), s);
    // The linear inputs of a and b on the grid m·2⁻⁴, |m| ≤ 15 (signed, 0 included),
    // so that a + αb is what the kernel receives: 2⁻⁴(m_a ± 2^s m_b) has at most 8
    // significant bits for |s| ≤ 3, exact in bf16 as in fp32 (a bf16 `v` or `do`
    // that rounded would make the a + αb run another input's output).
    const auto grid = [](std::int64_t n) {
      std::vector<double> x(static_cast<std::size_t>(n));
      for (double& e : x) e = *gen::uniform_int(-15, 15) / 16.0;
      return x;
    };
    TensorMap<double> a = x.c.in, b = x.c.in, sum = x.c.in;
    for (const std::string& name : lin.inputs) {
      if (!a.count(name)) continue;  // an optional one not drawn: absent in all three
      a[name].data = grid(a[name].numel());
      b[name].data = grid(a[name].numel());
      for (std::size_t i = 0; i < sum[name].data.size(); ++i) sum[name].data[i] = a[name].data[i] + alpha * b[name].data[i];
    }
    for (const TensorMap<double>* in : {&a, &b, &sum}) RC_PRE(!past_rounding_condition(k, *in, x.cfg, dtype));
    Progress progress("linear");
    progress.describe(k, x, tier_name(dtype));
    const TensorMap<double> ka = run(k, a, x.cfg, dtype), kb = run(k, b, x.cfg, dtype), ksum = run(k, sum, x.cfg, dtype);
    const LayerEntry& e = find_layer(k.layer);
    const ModelSpec ms = kernel_model(e, k.form, dtype, 8, 1, k.dir);
    Judge ja(e, a, x.cfg, {Tier::mpfr, 128}, k.dir), jb(e, b, x.cfg, {Tier::mpfr, 128}, k.dir),
        js(e, sum, x.cfg, {Tier::mpfr, 128}, k.dir);
    ErrorModel m = js.model(ms);
    const ErrorModel &ma = ja.model(ms), &mb = jb.model(ms);
    TensorMap<double> reference, candidate;
    for (const auto& [name, t] : ksum) {
      if (!lin.outputs.count(name)) {
        RC_ASSERT(prop::bits_equal(t.data, ka.at(name).data));  // (v, h0) do not reach it
        continue;
      }
      reference[name] = t;
      Tensor<double> c = ka.at(name);
      for (std::size_t i = 0; i < c.data.size(); ++i) c.data[i] += alpha * kb.at(name).data[i];
      // An element whose exact value at a, b or a + αb is beyond the dtype's range
      // has no linear relation left in floating point (KLA-K's eta_T ~ ā^{−T} with
      // p̄ = 0 and ā = 1e-24 is ±inf in every run): not compared.
      const double top = max_finite(dtype);
      for (std::size_t i = 0; i < c.data.size(); ++i)
        if (!(std::abs(ja.oracle().at(name).data[i]) <= top && std::abs(jb.oracle().at(name).data[i]) <= top &&
              std::abs(js.oracle().at(name).data[i]) <= top))
          c.data[i] = reference[name].data[i] = 0.0;
      candidate[name] = std::move(c);
      Tensor<double>& r = m.rms.at(name);
      for (std::size_t i = 0; i < r.data.size(); ++i)
        r.data[i] = std::sqrt(r.data[i] * r.data[i] + ma.rms.at(name).data[i] * ma.rms.at(name).data[i] +
                              alpha * alpha * mb.rms.at(name).data[i] * mb.rms.at(name).data[i]);
    }
    LayerSpec linear_only = spec_of(k);
    std::erase_if(linear_only.outputs, [&](const TensorSpec& ts) { return !lin.outputs.count(ts.name); });
    const CheckResult r = compare(linear_only, reference, m, candidate);
    for (const TensorVerdict& v : r.tensors) RC_LOG() << v.name << " ratio " << v.max_ratio << "\n";
    RC_ASSERT(r.pass);
  }));
}

TEST(CudaProperties, ChunkAndRecurrentAgreeWithinTheModel) {
  TTR_REQUIRE_DEVICE();
  EXPECT_TRUE(rc::check("chunk and recurrent kernels pass the oracle and each other", [] {
    const ThreadCaches caches;
    const Kernel k = *gen::choose_uniform(cuda_kernels({Form::chunk}));
    const Case x = *kernel_case(k, kernel_sizes(150, 24));
    RC_TAG(k.layer);
    KernelCheckOptions opt;
    opt.cross = true;
    opt.direction = k.dir;
    opt.dtypes = {any_dtype()};
    RC_PRE(!past_rounding_condition(k, x.c.in, x.cfg, opt.dtypes[0]));
    Progress progress("chunk-recurrent", /*replayable=*/true);
    progress.describe(k, x, tier_name(opt.dtypes[0]));
    const auto checks = check_kernels(find_layer(k.layer), x.c.in, x.cfg, "prop", 1, opt);
    for (const GateCheck& g : checks) {
      RC_LOG() << g.id << " ratio " << test::worst_ratio(g.result) << "\n";
      RC_ASSERT(g.result.pass);
    }
  }));
}

TEST(CudaProperties, RecurrentFp32StateIsBounded) {
  TTR_REQUIRE_DEVICE();
  std::vector<Kernel> kernels;
  for (const Kernel& k : cuda_kernels({Form::sequential}))
    if (k.dir == Direction::forward && (k.layer == "gka" || (find_layer(k.layer).spec.family == "delta" &&
                                                              !find_layer(k.layer).spec.input("beta_atk"))))
      kernels.push_back(k);
  ASSERT_GE(kernels.size(), 5u);  // delta_rule, gated_delta_rule, kda, kaczmarz_delta_rule, gka
  EXPECT_TRUE(rc::check("‖S_T‖ ≤ (‖S_0‖ + Σ β‖k‖‖v‖)(1 + 3γ_{K+6})^T", [&] {
    const Kernel k = *gen::choose_uniform(kernels);
    gen::InputOptions opt = kernel_sizes(200, 48);
    opt.optional_inputs = false;
    Case x = *kernel_case(k, opt);
    RC_TAG(k.layer);
    auto& in = x.c.in;
    const std::int64_t B = x.c.dims.at("B"), T = x.c.dims.at("T"), H = x.c.dims.at("H"), K = x.c.dims.at("K"),
                       V = x.c.dims.at("V");
    // Unit keys as the kernel stores them (fp32), β ∈ [0, 1], h0 drawn.
    Tensor<double>& key = in.at("k");
    for (std::int64_t r = 0; r < key.numel() / K; ++r) {
      double* p = &key.data[static_cast<std::size_t>(r * K)];
      const double n = gen::norm2(p, static_cast<int>(K));
      for (std::int64_t i = 0; i < K; ++i) p[i] = n > 0 ? static_cast<double>(static_cast<float>(p[i] / n)) : 0.0;
    }
    if (in.count("beta"))
      for (double& b : in.at("beta").data) b = *gen::beta();
    Tensor<double> h0({B, H, K, V}, 0.0);
    h0.data = gen::draw_role(Role::state, h0.numel());
    in["h0"] = h0;
    const TensorMap<double> out = run(k, in, x.cfg, Tier::fp32);
    const double u = 0x1p-24, n = static_cast<double>(K + 6), gamma = n * u / (1 - n * u);
    const double growth = std::pow(1 + 3 * gamma, static_cast<double>(T));
    const bool kaczmarz = k.layer == "kaczmarz_delta_rule";
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        double bound = prop::block_fro(h0, b, h);
        for (std::int64_t t = 0; t < T; ++t) {
          const double kn = prop::row_norm(key, b, t, h), vn = prop::row_norm(in.at("v"), b, t, h);
          double beta = in.count("beta") ? prop::at3(in.at("beta"), b, t, h) : 1.0;
          if (kaczmarz) beta /= kn * kn + x.cfg.number("eps");  // KLA-Z eq. (3): β/(‖k‖² + eps)
          bound += beta * kn * vn;
        }
        const double got = prop::block_fro(out.at("ht"), b, h);
        RC_LOG() << "head (" << b << ", " << h << "): ‖S_T‖ " << got << ", bound " << bound << " × " << growth << "\n";
        RC_ASSERT(got <= bound * growth);
      }
  }));
}

}  // namespace
}  // namespace ttr
