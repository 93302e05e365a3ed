// kla_kalman on its CUDA kernels (gpu/kla_kalman/scan.cu): the chunked scans
// scaled (`chunk`) and in the paper's representation (`chunk_unscaled`), and the
// sequential kernel; the chunked-scan backward (scan_backward.cu). q, k, v in the dtype
// (rounded through fp32, as run_in_tier then policy_operand do for the CPU forms);
// λv, ā, p̄ and the states fp32 (the policy's acc quantities,
// reference/kla_kalman/scan.hpp). Any N ≤ 128 and D: no padding.
// Declared in oracles/layers/layers.def (TTR_KERNEL lines).
#include <fmt/format.h>

#include "gpu/binding/device.hpp"
#include "oracles/config.hpp"
#include "oracles/error.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr::kernels {
namespace {

#ifndef TTR_WITH_CUDA
TensorMap<double> run(Form, const TensorMap<double>&, const Config&, Tier, const KernelOptions&) {
  device::throw_not_built();
}
TensorMap<double> run_backward(const TensorMap<double>&, const Config&, Tier, const KernelOptions&) {
  device::throw_not_built();
}
#else
using namespace device;

// The forward's inputs on the device, as both directions' kernels read them:
// q, k, v in the dtype, λv, ā, p̄ and the optional initial states fp32.
struct KlaInputsOnDevice {
  bool bf16;
  std::int64_t B, T, H, N, D, rows;  // rows: token rows on the layer's axes
  KernelBatch kb;                    // states per sequence (varlen: one per sequence)
  gpu::DeviceBuffer q, k, v, lv, a_bar, p_bar, lambda_init, eta_init;
  gpu::KlaArgs args;                 // pointing at the buffers above; outputs unset

  KlaInputsOnDevice(const TensorMap<double>& in, const Config& cfg, Tier dtype)
      : bf16(kernel_dtype_is_bf16(dtype)), kb(kernel_batch(in)) {
    const Tensor<double>& x = in.at("q");
    B = x.dim(0), T = x.dim(1), H = x.dim(2), N = x.dim(3), D = in.at("v").dim(3), rows = B * T * H;
    if (N > 128) throw InputError(fmt::format("the CUDA kla_kalman kernels take N ≤ 128 (got N = {})", N));
    q = activation(in.at("q"), N), k = activation(in.at("k"), N), v = activation(in.at("v"), D);
    lv = fp32(in.at("lambda_v")), a_bar = fp32(in.at("a_bar")), p_bar = fp32(in.at("p_bar"));
    gpu::KlaArgs& a = args;
    a.cu_seqlens = kb.offsets();
    a.B = static_cast<int>(kb.B), a.T = static_cast<int>(kb.T), a.H = static_cast<int>(H),
    a.N = static_cast<int>(N), a.D = static_cast<int>(D);
    a.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
    if (const auto l0 = in.find("lambda_init"); l0 != in.end())
      lambda_init = fp32(l0->second), a.lambda_init = static_cast<const float*>(lambda_init.get());
    if (const auto e0 = in.find("eta_init"); e0 != in.end())
      eta_init = fp32(e0->second), a.eta_init = static_cast<const float*>(eta_init.get());
    a.lambda0 = static_cast<float>(cfg.number("lambda0"));
    a.scale = static_cast<float>(cfg.number("scale"));
    a.q = q.get(), a.k = k.get(), a.v = v.get();
    a.lambda_v = static_cast<const float*>(lv.get()), a.a_bar = static_cast<const float*>(a_bar.get()),
    a.p_bar = static_cast<const float*>(p_bar.get());
  }
  // A per-token tensor of F features in the dtype (rounded through fp32, as the CPU forms read it).
  gpu::DeviceBuffer activation(const Tensor<double>& t, std::int64_t F) const {
    return upload(to_float(t), rows, F, static_cast<int>(F), bf16);
  }
  static gpu::DeviceBuffer fp32(const Tensor<double>& t) { return upload_fp32(to_float(t)); }
  std::size_t states() const { return static_cast<std::size_t>(kb.B * H * N * D); }
  std::size_t element() const { return bf16 ? 2 : 4; }
};

TensorMap<double> run(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                      const KernelOptions& opt) {
  KlaInputsOnDevice x(in, cfg, dtype);
  const std::int64_t B = x.B, T = x.T, H = x.H, N = x.N, D = x.D;
  gpu::DeviceBuffer dout(static_cast<std::size_t>(x.rows * D) * x.element()),
      dvar(static_cast<std::size_t>(x.rows * D) * x.element()), dlT(x.states() * 4), deT(x.states() * 4);
  gpu::KlaArgs a = x.args;
  a.o = dout.get(), a.o_var = dvar.get();
  a.lambda_T = static_cast<float*>(dlT.get()), a.eta_T = static_cast<float*>(deT.get());
  if (opt.poison)
    for (gpu::DeviceBuffer* b : {&dout, &dvar, &dlT, &deT}) b->fill_bytes(0xFF);  // NaN in bf16 and fp32
  if (form == Form::chunk) gpu::kla_kalman_chunk_forward(a);
  else if (form == Form::chunk_unscaled) gpu::kla_kalman_chunk_unscaled_forward(a);
  else gpu::kla_kalman_sequential_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["o"] = download(dout, {B, T, H, D}, x.bf16);
  out["o_var"] = download(dvar, {B, T, H, D}, x.bf16);
  out["lambda_T"] = download(dlT, {x.kb.B, H, N, D}, false);
  out["eta_T"] = download(deT, {x.kb.B, H, N, D}, false);
  return out;
}

// The chunked-scan backward (gpu/kla_kalman/scan_backward.cu): the forward inputs
// plus `do` and the optional cotangents do_var, dlambda_T, deta_T in; dq, dk, dv,
// dlambda_v, da_bar, dp_bar, and dlambda_init / deta_init where the initial
// states are given (as the CPU forms emit them). do and do_var in the dtype.
TensorMap<double> run_backward(const TensorMap<double>& in, const Config& cfg, Tier dtype, const KernelOptions& opt) {
  KlaInputsOnDevice x(in, cfg, dtype);
  const std::int64_t B = x.B, T = x.T, H = x.H, N = x.N, D = x.D;
  gpu::KlaBackwardArgs a;
  a.fwd = x.args;
  gpu::DeviceBuffer ddo = x.activation(in.at("do"), D), ddvar, ddlT, ddeT;
  a.do_ = ddo.get();
  if (const auto c = in.find("do_var"); c != in.end()) ddvar = x.activation(c->second, D), a.do_var = ddvar.get();
  if (const auto c = in.find("dlambda_T"); c != in.end())
    ddlT = x.fp32(c->second), a.dlambda_T = static_cast<const float*>(ddlT.get());
  if (const auto c = in.find("deta_T"); c != in.end())
    ddeT = x.fp32(c->second), a.deta_T = static_cast<const float*>(ddeT.get());
  const bool l0 = in.count("lambda_init") > 0, e0 = in.count("eta_init") > 0;
  const std::size_t params = static_cast<std::size_t>(H * N * D);
  gpu::DeviceBuffer gq(static_cast<std::size_t>(x.rows * N) * x.element()),
      gk(static_cast<std::size_t>(x.rows * N) * x.element()), gv(static_cast<std::size_t>(x.rows * D) * x.element()),
      glv(static_cast<std::size_t>(x.rows * D) * 4), ga(params * 4), gp(params * 4), gl0, ge0;
  if (l0) gl0 = gpu::DeviceBuffer(x.states() * 4), a.dlambda_init = static_cast<float*>(gl0.get());
  if (e0) ge0 = gpu::DeviceBuffer(x.states() * 4), a.deta_init = static_cast<float*>(ge0.get());
  if (opt.poison)  // NaN in bf16 and fp32: every gradient element must be written
    for (gpu::DeviceBuffer* b : {&gq, &gk, &gv, &glv, &ga, &gp, &gl0, &ge0})
      if (b->get()) b->fill_bytes(0xFF);
  a.dq = gq.get(), a.dk = gk.get(), a.dv = gv.get();
  a.dlambda_v = static_cast<float*>(glv.get()), a.da_bar = static_cast<float*>(ga.get()),
  a.dp_bar = static_cast<float*>(gp.get());
  gpu::kla_kalman_chunk_backward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["dq"] = download(gq, {B, T, H, N}, x.bf16);
  out["dk"] = download(gk, {B, T, H, N}, x.bf16);
  out["dv"] = download(gv, {B, T, H, D}, x.bf16);
  out["dlambda_v"] = download(glv, {B, T, H, D}, false);
  out["da_bar"] = download(ga, {H, N, D}, false);
  out["dp_bar"] = download(gp, {H, N, D}, false);
  if (l0) out["dlambda_init"] = download(gl0, {x.kb.B, H, N, D}, false);
  if (e0) out["deta_init"] = download(ge0, {x.kb.B, H, N, D}, false);
  return out;
}
#endif

}  // namespace

TensorMap<double> kla_kalman__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                   const KernelOptions& opt) {
  return run(Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> kla_kalman__cuda__chunk_unscaled__forward(const TensorMap<double>& in, const Config& cfg,
                                                            Tier dtype, const KernelOptions& opt) {
  return run(Form::chunk_unscaled, in, cfg, dtype, opt);
}

TensorMap<double> kla_kalman__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                        const KernelOptions& opt) {
  return run(Form::sequential, in, cfg, dtype, opt);
}

TensorMap<double> kla_kalman__cuda__chunk__backward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                    const KernelOptions& opt) {
  return run_backward(in, cfg, dtype, opt);
}

}  // namespace ttr::kernels
