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

TensorMap<double> run(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                      const KernelOptions& opt) {
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), N = q.dim(3), D = in.at("v").dim(3);
  if (N > 128) throw InputError(fmt::format("the CUDA kla_kalman kernels take N ≤ 128 (got N = {})", N));
  const std::int64_t rows = B * T * H;  // token rows on the layer's axes
  const KernelBatch kb = kernel_batch(in);  // states per sequence (varlen: N of them)
  auto act = [&](const char* name, std::int64_t F) {
    return upload(to_float(in.at(name)), rows, F, static_cast<int>(F), bf16);
  };
  auto fp32 = [&](const Tensor<double>& t) { return upload_fp32(to_float(t)); };
  gpu::DeviceBuffer dq = act("q", N), dk = act("k", N), dv = act("v", D);
  gpu::DeviceBuffer dlv = fp32(in.at("lambda_v")), da = fp32(in.at("a_bar")), dp = fp32(in.at("p_bar"));
  gpu::DeviceBuffer dl0, de0;
  gpu::KlaArgs a;
  a.cu_seqlens = kb.offsets();
  a.B = static_cast<int>(kb.B), a.T = static_cast<int>(kb.T), a.H = static_cast<int>(H), a.N = static_cast<int>(N),
  a.D = static_cast<int>(D);
  a.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
  if (const auto l0 = in.find("lambda_init"); l0 != in.end()) {
    dl0 = fp32(l0->second);
    a.lambda_init = static_cast<const float*>(dl0.get());
  }
  if (const auto e0 = in.find("eta_init"); e0 != in.end()) {
    de0 = fp32(e0->second);
    a.eta_init = static_cast<const float*>(de0.get());
  }
  a.lambda0 = static_cast<float>(cfg.number("lambda0"));
  a.scale = static_cast<float>(cfg.number("scale"));
  const std::size_t esize = bf16 ? 2 : 4, states = static_cast<std::size_t>(kb.B * H * N * D);
  gpu::DeviceBuffer dout(static_cast<std::size_t>(rows * D) * esize), dvar(static_cast<std::size_t>(rows * D) * esize);
  gpu::DeviceBuffer dlT(states * 4), deT(states * 4);
  a.q = dq.get(), a.k = dk.get(), a.v = dv.get();
  a.lambda_v = static_cast<const float*>(dlv.get()), a.a_bar = static_cast<const float*>(da.get()),
  a.p_bar = static_cast<const float*>(dp.get());
  a.o = dout.get(), a.o_var = dvar.get();
  a.lambda_T = static_cast<float*>(dlT.get()), a.eta_T = static_cast<float*>(deT.get());
  if (opt.poison)
    for (gpu::DeviceBuffer* b : {&dout, &dvar, &dlT, &deT}) b->fill_bytes(0xFF);  // NaN in bf16 and fp32
  if (form == Form::chunk) gpu::kla_kalman_chunk_forward(a);
  else if (form == Form::chunk_unscaled) gpu::kla_kalman_chunk_unscaled_forward(a);
  else gpu::kla_kalman_sequential_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["o"] = download(dout, {B, T, H, D}, bf16);
  out["o_var"] = download(dvar, {B, T, H, D}, bf16);
  out["lambda_T"] = download(dlT, {kb.B, H, N, D}, false);
  out["eta_T"] = download(deT, {kb.B, H, N, D}, false);
  return out;
}

// The chunked-scan backward (gpu/kla_kalman/scan_backward.cu): the forward inputs
// plus `do` and the optional cotangents do_var, dlambda_T, deta_T in; dq, dk, dv,
// dlambda_v, da_bar, dp_bar, and dlambda_init / deta_init where the initial
// states are given (as the CPU forms emit them). do and do_var in the dtype.
TensorMap<double> run_backward(const TensorMap<double>& in, const Config& cfg, Tier dtype, const KernelOptions& opt) {
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), N = q.dim(3), D = in.at("v").dim(3);
  if (N > 128) throw InputError(fmt::format("the CUDA kla_kalman kernels take N ≤ 128 (got N = {})", N));
  const std::int64_t rows = B * T * H;  // token rows on the layer's axes
  const KernelBatch kb = kernel_batch(in);  // states per sequence (varlen: N of them)
  auto act = [&](const Tensor<double>& t, std::int64_t F) {
    return upload(to_float(t), rows, F, static_cast<int>(F), bf16);
  };
  auto fp32 = [&](const Tensor<double>& t) { return upload_fp32(to_float(t)); };
  gpu::DeviceBuffer dq = act(q, N), dk = act(in.at("k"), N), dv = act(in.at("v"), D), ddo = act(in.at("do"), D);
  gpu::DeviceBuffer dlv = fp32(in.at("lambda_v")), da = fp32(in.at("a_bar")), dp = fp32(in.at("p_bar"));
  gpu::DeviceBuffer dl0, de0, ddvar, ddlT, ddeT;
  gpu::KlaBackwardArgs a;
  gpu::KlaArgs& f = a.fwd;
  f.cu_seqlens = kb.offsets();
  f.B = static_cast<int>(kb.B), f.T = static_cast<int>(kb.T), f.H = static_cast<int>(H), f.N = static_cast<int>(N),
  f.D = static_cast<int>(D);
  f.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
  const auto l0 = in.find("lambda_init"), e0 = in.find("eta_init");
  if (l0 != in.end()) dl0 = fp32(l0->second), f.lambda_init = static_cast<const float*>(dl0.get());
  if (e0 != in.end()) de0 = fp32(e0->second), f.eta_init = static_cast<const float*>(de0.get());
  if (const auto x = in.find("do_var"); x != in.end()) ddvar = act(x->second, D), a.do_var = ddvar.get();
  if (const auto x = in.find("dlambda_T"); x != in.end())
    ddlT = fp32(x->second), a.dlambda_T = static_cast<const float*>(ddlT.get());
  if (const auto x = in.find("deta_T"); x != in.end()) ddeT = fp32(x->second), a.deta_T = static_cast<const float*>(ddeT.get());
  f.lambda0 = static_cast<float>(cfg.number("lambda0"));
  f.scale = static_cast<float>(cfg.number("scale"));
  f.q = dq.get(), f.k = dk.get(), f.v = dv.get();
  f.lambda_v = static_cast<const float*>(dlv.get()), f.a_bar = static_cast<const float*>(da.get()),
  f.p_bar = static_cast<const float*>(dp.get());
  a.do_ = ddo.get();
  const std::size_t esize = bf16 ? 2 : 4, states = static_cast<std::size_t>(kb.B * H * N * D),
                    params = static_cast<std::size_t>(H * N * D);
  gpu::DeviceBuffer gq(static_cast<std::size_t>(rows * N) * esize), gk(static_cast<std::size_t>(rows * N) * esize),
      gv(static_cast<std::size_t>(rows * D) * esize), glv(static_cast<std::size_t>(rows * D) * 4), ga(params * 4),
      gp(params * 4), gl0, ge0;
  if (l0 != in.end()) gl0 = gpu::DeviceBuffer(states * 4), a.dlambda_init = static_cast<float*>(gl0.get());
  if (e0 != in.end()) ge0 = gpu::DeviceBuffer(states * 4), a.deta_init = static_cast<float*>(ge0.get());
  if (opt.poison)  // NaN in bf16 and fp32: every gradient element must be written
    for (gpu::DeviceBuffer* b : {&gq, &gk, &gv, &glv, &ga, &gp, &gl0, &ge0})
      if (b->get()) b->fill_bytes(0xFF);
  a.dq = gq.get(), a.dk = gk.get(), a.dv = gv.get();
  a.dlambda_v = static_cast<float*>(glv.get()), a.da_bar = static_cast<float*>(ga.get()),
  a.dp_bar = static_cast<float*>(gp.get());
  gpu::kla_kalman_chunk_backward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["dq"] = download(gq, {B, T, H, N}, bf16);
  out["dk"] = download(gk, {B, T, H, N}, bf16);
  out["dv"] = download(gv, {B, T, H, D}, bf16);
  out["dlambda_v"] = download(glv, {B, T, H, D}, false);
  out["da_bar"] = download(ga, {H, N, D}, false);
  out["dp_bar"] = download(gp, {H, N, D}, false);
  if (l0 != in.end()) out["dlambda_init"] = download(gl0, {kb.B, H, N, D}, false);
  if (e0 != in.end()) out["deta_init"] = download(ge0, {kb.B, H, N, D}, false);
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
