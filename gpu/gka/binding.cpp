// gka (solver = chebyshev) on its CUDA kernels (gpu/gka/): q, k, v in the dtype,
// zero-padded to K, V multiples of 16 (a zero key coordinate adds exact zeros to
// H, S, ‖H‖_F and every product, and the padded block of H + λI is λI with a
// zero right-hand side, so the padded x coordinates stay 0); g, β, α and the
// states fp32 (the CPU chunk form's acc).
// The backward direction on the chunk backward kernel (gpu/gka/chunk_backward.cu,
// GKA Alg. 2) and the recurrent one (gpu/gka/sequential_backward.cu), the GPU's own
// reference for GKA's gradients.
// Declared in oracles/layers/layers.def (TTR_KERNEL lines).
#include <cmath>
#include <fmt/format.h>

#include "gpu/binding/device.hpp"
#include "oracles/config.hpp"
#include "oracles/error.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"
#include "reference/core/mutant.hpp"

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
TensorMap<double> run_backward(Form, const TensorMap<double>&, const Config& cfg, Tier, const KernelOptions&) {
  require_chebyshev(cfg);
  device::throw_not_built();
}
#else
using namespace device;

// scale (default K^−1/2 of the unpadded K), a, a fixed λ, iters, ω₀ from the config.
void set_options(gpu::GkaArgs& a, const Config& cfg, std::int64_t K) {
  a.scale = cfg.has("scale") ? static_cast<float>(cfg.number("scale")) : 1.0f / std::sqrt(static_cast<float>(K));
  a.a = static_cast<float>(cfg.number("a"));
  a.fixed_lambda = cfg.has("lambda");
  if (a.fixed_lambda) a.lambda_value = static_cast<float>(cfg.number("lambda"));
  a.iters = static_cast<int>(cfg.number("iters"));
  a.omega0 = static_cast<float>(cfg.number("omega0"));
}

TensorMap<double> run(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                      const KernelOptions& opt) {
  require_chebyshev(cfg);
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  // Token rows on the layer's axes; states per sequence (varlen: N of them, kernel_batch).
  const KernelBatch kb = kernel_batch(in);
  const std::int64_t rows = B * T * H, BH = kb.B * H;
  gpu::DeviceBuffer dq = upload(to_float(q), rows, K, Kp, bf16), dk = upload(to_float(in.at("k")), rows, K, Kp, bf16);
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel"))
    for (gpu::DeviceBuffer* x : {&dq, &dk}) gpu::l2norm_rows(dtype_of(bf16), x->get(), x->get(), nullptr, rows, Kp, 1e-6f);
  gpu::DeviceBuffer dv = upload(to_float(in.at("v")), rows, V, Vp, bf16);
  gpu::DeviceBuffer dg = upload_fp32(to_float(in.at("g"))), dbeta, dalpha, dh0, dhkk0;
  gpu::GkaArgs a;
  a.B = static_cast<int>(kb.B), a.T = static_cast<int>(kb.T), a.H = static_cast<int>(H), a.K = Kp, a.V = Vp;
  a.cu_seqlens = kb.offsets(), a.packed_tokens = kb.packed;
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
  set_options(a, cfg, K);
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
  out["ht"] = download_state(dht, kb.B, H, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
  out["hkk"] = download_state(dhkk, kb.B, H, static_cast<int>(K), static_cast<int>(K), Kp, Kp);
  out["lambda"] = download(dlam, {B, T, H}, false);
  out["fro"] = download(dfro, {B, T, H}, false);
  return out;
}

// A backward kernel (the chunk one, or the recurrent one): the forward's
// inputs (q, k, v and the cotangent do in the dtype, the rest fp32, padded as the
// forward) and the cotangents dht, dhkk; under use_qk_l2norm_in_kernel the kernel
// reads the rows normalised on the device (as the forward) and the chain rule the
// rows as given. The gradients of the inputs given, by their names.
TensorMap<double> run_backward(Form form, const TensorMap<double>& in, const Config& cfg, Tier dtype,
                               const KernelOptions& opt) {
  require_chebyshev(cfg);
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  // Token rows on the layer's axes; states per sequence (varlen: N of them, kernel_batch).
  const KernelBatch kb = kernel_batch(in);
  const std::int64_t rows = B * T * H, BH = kb.B * H;
  const std::vector<float> qf = to_float(q), kf = to_float(in.at("k"));
  gpu::DeviceBuffer dq = upload(qf, rows, K, Kp, bf16), dk = upload(kf, rows, K, Kp, bf16), dq_raw, dk_raw;
  gpu::GkaBackwardArgs a;
  gpu::GkaArgs& f = a.fwd;
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    dq_raw = upload(qf, rows, K, Kp, bf16), dk_raw = upload(kf, rows, K, Kp, bf16);
    for (gpu::DeviceBuffer* x : {&dq, &dk}) gpu::l2norm_rows(dtype_of(bf16), x->get(), x->get(), nullptr, rows, Kp, 1e-6f);
    a.q_raw = dq_raw.get(), a.k_raw = dk_raw.get(), a.l2_eps = 1e-6f;
  }
  gpu::DeviceBuffer dv = upload(to_float(in.at("v")), rows, V, Vp, bf16), ddo = upload(to_float(in.at("do")), rows, V, Vp, bf16);
  gpu::DeviceBuffer dg = upload_fp32(to_float(in.at("g"))), dbeta, dalpha, dh0, dhkk0, ddht, ddhkk;
  f.B = static_cast<int>(kb.B), f.T = static_cast<int>(kb.T), f.H = static_cast<int>(H), f.K = Kp, f.V = Vp;
  f.cu_seqlens = kb.offsets(), f.packed_tokens = kb.packed;
  f.dtype = dtype_of(bf16);
  f.q = dq.get(), f.k = dk.get(), f.v = dv.get(), f.g = static_cast<const float*>(dg.get());
  const bool has_beta = in.count("beta") > 0, has_alpha = in.count("alpha") > 0, has_h0 = in.count("h0") > 0,
             has_hkk0 = in.count("hkk0") > 0;
  if (has_beta) dbeta = upload_fp32(to_float(in.at("beta"))), f.beta = static_cast<const float*>(dbeta.get());
  if (has_alpha) dalpha = upload_fp32(to_float(in.at("alpha"))), f.alpha = static_cast<const float*>(dalpha.get());
  const int k = static_cast<int>(K), vdim = static_cast<int>(V);
  if (has_h0) dh0 = upload_state(to_float(in.at("h0")), BH, k, vdim, Kp, Vp), f.h0 = static_cast<const float*>(dh0.get());
  if (has_hkk0)
    dhkk0 = upload_state(to_float(in.at("hkk0")), BH, k, k, Kp, Kp), f.hkk0 = static_cast<const float*>(dhkk0.get());
  if (const auto it = in.find("dht"); it != in.end())
    ddht = upload_state(to_float(it->second), BH, k, vdim, Kp, Vp), a.dht = static_cast<const float*>(ddht.get());
  if (const auto it = in.find("dhkk"); it != in.end())
    ddhkk = upload_state(to_float(it->second), BH, k, k, Kp, Kp), a.dhkk = static_cast<const float*>(ddhkk.get());
  set_options(f, cfg, K);
  a.do_ = ddo.get();
  const std::size_t es = bf16 ? 2 : 4;
  gpu::DeviceBuffer gdq(static_cast<std::size_t>(rows) * Kp * es), gdk(static_cast<std::size_t>(rows) * Kp * es),
      gdv(static_cast<std::size_t>(rows) * Vp * es), gdg(static_cast<std::size_t>(rows) * 4), gdbeta, gdalpha, gdh0,
      gdhkk0;
  if (has_beta) gdbeta = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * 4);
  if (has_alpha) gdalpha = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * 4);
  if (has_h0) gdh0 = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * Vp * 4);
  if (has_hkk0) gdhkk0 = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * Kp * 4);
  if (opt.poison)  // NaN in bf16 and fp32: every gradient element must be written
    for (gpu::DeviceBuffer* x : {&gdq, &gdk, &gdv, &gdg, &gdbeta, &gdalpha, &gdh0, &gdhkk0})
      if (x->get()) x->fill_bytes(0xFF);
  a.dq = gdq.get(), a.dk = gdk.get(), a.dv = gdv.get(), a.dg = static_cast<float*>(gdg.get());
  a.dbeta = static_cast<float*>(gdbeta.get()), a.dalpha = static_cast<float*>(gdalpha.get());
  a.dh0 = static_cast<float*>(gdh0.get()), a.dhkk0 = static_cast<float*>(gdhkk0.get());
  if (form == Form::chunk) {
    a.mutant = active_mutant();  // the caller's switch reaches the chunk kernel's CUDA mutants
    gpu::gka_chunk_backward(a);
  } else {
    gpu::gka_sequential_backward(a);
  }
  gpu::synchronize();
  TensorMap<double> out;
  out["dq"] = download_unpadded(gdq, {B, T, H, K}, Kp, bf16);
  out["dk"] = download_unpadded(gdk, {B, T, H, K}, Kp, bf16);
  out["dv"] = download_unpadded(gdv, {B, T, H, V}, Vp, bf16);
  out["dg"] = download(gdg, {B, T, H}, false);
  if (has_beta) out["dbeta"] = download(gdbeta, {B, T, H}, false);
  if (has_alpha) out["dalpha"] = download(gdalpha, {B, T, H}, false);
  if (has_h0) out["dh0"] = download_state(gdh0, kb.B, H, k, vdim, Kp, Vp);
  if (has_hkk0) out["dhkk0"] = download_state(gdhkk0, kb.B, H, k, k, Kp, Kp);
  return out;
}
#endif

}  // namespace

TensorMap<double> gka__cuda__sequential__backward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                  const KernelOptions& opt) {
  return run_backward(Form::sequential, in, cfg, dtype, opt);
}

TensorMap<double> gka__cuda__chunk__backward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                             const KernelOptions& opt) {
  return run_backward(Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> gka__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                            const KernelOptions& opt) {
  return run(Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> gka__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                 const KernelOptions& opt) {
  return run(Form::sequential, in, cfg, dtype, opt);
}

}  // namespace ttr::kernels
