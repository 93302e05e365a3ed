// gka (solver = chebyshev) on its CUDA kernels (gpu/gka/): q, k, v in the dtype,
// zero-padded to K, V multiples of 16 (a zero key coordinate adds exact zeros to
// H, S, ‖H‖_F and every product, and the padded block of H + λI is λI with a
// zero right-hand side, so the padded x coordinates stay 0); g, β, α and the
// states fp32 (the CPU chunk form's acc).
// Declared in oracles/layers/layers.def (TTR_KERNEL lines).
#include <cmath>
#include <fmt/format.h>

#include "gpu/binding/device.hpp"
#include "oracles/config.hpp"
#include "oracles/error.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr::kernels {
namespace {

void require_chebyshev(const Config& cfg) {
  if (cfg.text("solver") != "chebyshev")
    throw InputError(fmt::format("the CUDA gka kernels implement solver=chebyshev only (GKA §4.2's chunkwise "
                                 "solver); got solver={}",
                                 cfg.text("solver")));
}

#ifndef TTR_WITH_CUDA
TensorMap<double> run(Form, const TensorMap<double>&, const Config& cfg, Tier, const KernelOptions&) {
  require_chebyshev(cfg);
  device::throw_not_built();
}
#else
using namespace device;

TensorMap<double> run(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                      const KernelOptions& opt) {
  require_chebyshev(cfg);
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  const std::int64_t rows = B * T * H, BH = B * H;
  gpu::DeviceBuffer dq = upload(to_float(q), rows, K, Kp, bf16), dk = upload(to_float(in.at("k")), rows, K, Kp, bf16);
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel"))
    for (gpu::DeviceBuffer* x : {&dq, &dk}) gpu::l2norm_rows(dtype_of(bf16), x->get(), x->get(), nullptr, rows, Kp, 1e-6f);
  gpu::DeviceBuffer dv = upload(to_float(in.at("v")), rows, V, Vp, bf16);
  gpu::DeviceBuffer dg = upload_fp32(to_float(in.at("g"))), dbeta, dalpha, dh0, dhkk0;
  gpu::GkaArgs a;
  a.B = static_cast<int>(B), a.T = static_cast<int>(T), a.H = static_cast<int>(H), a.K = Kp, a.V = Vp;
  a.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
  a.g = static_cast<const float*>(dg.get());
  if (const auto it = in.find("beta"); it != in.end()) {
    dbeta = upload_fp32(to_float(it->second));
    a.beta = static_cast<const float*>(dbeta.get());
  }
  if (const auto it = in.find("alpha"); it != in.end()) {
    dalpha = upload_fp32(to_float(it->second));
    a.alpha = static_cast<const float*>(dalpha.get());
  }
  if (const auto it = in.find("h0"); it != in.end()) {
    dh0 = upload_state(to_float(it->second), BH, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
    a.h0 = static_cast<const float*>(dh0.get());
  }
  if (const auto it = in.find("hkk0"); it != in.end()) {
    dhkk0 = upload_state(to_float(it->second), BH, static_cast<int>(K), static_cast<int>(K), Kp, Kp);
    a.hkk0 = static_cast<const float*>(dhkk0.get());
  }
  a.scale = cfg.has("scale") ? static_cast<float>(cfg.number("scale")) : 1.0f / std::sqrt(static_cast<float>(K));
  a.a = static_cast<float>(cfg.number("a"));
  a.fixed_lambda = cfg.has("lambda");
  if (a.fixed_lambda) a.lambda_value = static_cast<float>(cfg.number("lambda"));
  a.iters = static_cast<int>(cfg.number("iters"));
  a.omega0 = static_cast<float>(cfg.number("omega0"));
  const std::size_t esize = bf16 ? 2 : 4;
  gpu::DeviceBuffer dout(static_cast<std::size_t>(rows) * Vp * esize), dht(static_cast<std::size_t>(BH) * Kp * Vp * 4),
      dhkk(static_cast<std::size_t>(BH) * Kp * Kp * 4), dlam(static_cast<std::size_t>(rows) * 4),
      dfro(static_cast<std::size_t>(rows) * 4);
  a.q = dq.get(), a.k = dk.get(), a.v = dv.get(), a.o = dout.get();
  a.ht = static_cast<float*>(dht.get()), a.hkk = static_cast<float*>(dhkk.get());
  a.lambda = static_cast<float*>(dlam.get()), a.fro = static_cast<float*>(dfro.get());
  if (opt.poison)
    for (gpu::DeviceBuffer* b : {&dout, &dht, &dhkk, &dlam, &dfro}) b->fill_bytes(0xFF);  // NaN in bf16 and fp32
  if (form == Form::chunk) gpu::gka_chunk_forward(a);
  else gpu::gka_sequential_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["o"] = download_unpadded(dout, {B, T, H, V}, Vp, bf16);
  out["ht"] = download_state(dht, B, H, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
  out["hkk"] = download_state(dhkk, B, H, static_cast<int>(K), static_cast<int>(K), Kp, Kp);
  out["lambda"] = download(dlam, {B, T, H}, false);
  out["fro"] = download(dfro, {B, T, H}, false);
  return out;
}
#endif

}  // namespace

TensorMap<double> gka__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                            const KernelOptions& opt) {
  return run(Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> gka__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                 const KernelOptions& opt) {
  return run(Form::sequential, in, cfg, dtype, opt);
}

}  // namespace ttr::kernels
