// kla_kalman on its CUDA kernels (gpu/kla_kalman/scan.cu): the chunked scans
// scaled (`chunk`) and in the paper's representation (`chunk_unscaled`), and the
// sequential kernel. q, k, v in the dtype
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
#else
using namespace device;

TensorMap<double> run(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                      const KernelOptions& opt) {
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), N = q.dim(3), D = in.at("v").dim(3);
  if (N > 128) throw InputError(fmt::format("the CUDA kla_kalman kernels take N ≤ 128 (got N = {})", N));
  const std::int64_t rows = B * T * H;
  auto act = [&](const char* name, std::int64_t F) {
    return upload(to_float(in.at(name)), rows, F, static_cast<int>(F), bf16);
  };
  auto fp32 = [&](const Tensor<double>& t) { return upload_fp32(to_float(t)); };
  gpu::DeviceBuffer dq = act("q", N), dk = act("k", N), dv = act("v", D);
  gpu::DeviceBuffer dlv = fp32(in.at("lambda_v")), da = fp32(in.at("a_bar")), dp = fp32(in.at("p_bar"));
  gpu::DeviceBuffer dl0, de0;
  gpu::KlaArgs a;
  a.B = static_cast<int>(B), a.T = static_cast<int>(T), a.H = static_cast<int>(H), a.N = static_cast<int>(N),
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
  const std::size_t esize = bf16 ? 2 : 4, states = static_cast<std::size_t>(B * H * N * D);
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
  out["lambda_T"] = download(dlT, {B, H, N, D}, false);
  out["eta_T"] = download(deT, {B, H, N, D}, false);
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

}  // namespace ttr::kernels
