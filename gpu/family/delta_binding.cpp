#include "gpu/family/delta_binding.hpp"

#include <cmath>
#include <fmt/format.h>

#include "gpu/binding/device.hpp"
#include "oracles/error.hpp"
#include "reference/core/mutant.hpp"

namespace ttr::device {

#ifndef TTR_WITH_CUDA

TensorMap<double> run_delta(const DeltaBinding&, Form, const TensorMap<double>&, const Config&, Tier,
                            const KernelOptions&) {
  throw_not_built();
}

TensorMap<double> run_delta_backward(const DeltaBinding&, Form, const TensorMap<double>&, const Config&, Tier,
                                     const KernelOptions&) {
  throw_not_built();
}

#else

namespace {

// PGDN's preconditioner inputs on the device (PDN §3.3; gpu/family/atk_chunk.cu) and
// the buffer its write keys k̃ = B ⊙ k go to (in the dtype; atk_write_keys fills it).
// The preconditioner reads the key the delta core reads: normalised and stored in the
// dtype under use_qk_l2norm_in_kernel, as the chunk forms' qk_of_stored (FLA's chunk
// ops hand their l2norm_fwd output to both).
struct Precond {
  gpu::AtkArgs p;
  gpu::DeviceBuffer g_atk, beta_atk, A0, center, k_tilde;
};
void make_precond(Precond& pc, const TensorMap<double>& in, const Config& cfg, const KernelBatch& kb, std::int64_t rows,
                  std::int64_t H, std::int64_t K, int Kp, bool bf16, const void* key, bool poison) {
  gpu::AtkArgs& p = pc.p;
  p.B = static_cast<int>(kb.B), p.T = static_cast<int>(kb.T), p.H = static_cast<int>(H), p.K = Kp;
  p.cu_seqlens = kb.offsets();
  p.key_dtype = dtype_of(bf16);
  p.k = key;
  pc.g_atk = upload(to_float(in.at("g_atk")), rows, 1, 1, false);
  pc.beta_atk = upload(to_float(in.at("beta_atk")), rows, 1, 1, false);
  p.g_atk = static_cast<const float*>(pc.g_atk.get()), p.beta_atk = static_cast<const float*>(pc.beta_atk.get());
  if (const auto a0 = in.find("initial_A_state"); a0 != in.end()) {
    pc.A0 = upload(to_float(a0->second), kb.B * H, K, Kp, false);
    p.A0 = static_cast<const float*>(pc.A0.get());
  }
  const auto c = in.find("log_atk_scale");
  const std::vector<float> center =
      c != in.end() ? to_float(c->second)
                    : std::vector<float>(static_cast<std::size_t>(H), static_cast<float>(cfg.number("log_atk_scale")));
  pc.center = upload(center, H, 1, 1, false);
  p.center = static_cast<const float*>(pc.center.get());
  p.log_x = std::log(static_cast<float>(cfg.number("x")));
  p.eps = static_cast<float>(cfg.number("eps"));
  p.dtype = dtype_of(bf16);
  pc.k_tilde = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Kp * (bf16 ? 2 : 4));
  if (poison) pc.k_tilde.fill_bytes(0xFF);
  p.k_tilde = pc.k_tilde.get();
}

}  // namespace

TensorMap<double> run_delta(const DeltaBinding& bind, Form form, const TensorMap<double>& in, const Config& cfg,
                            Tier dtype, const KernelOptions& opt) {
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  // Token rows on the layer's axes; states per sequence (varlen: N of them, kernel_batch).
  const KernelBatch kb = kernel_batch(in);
  const std::int64_t rows = B * T * H, BH = kb.B * H;
  // What the kernel receives: activations rounded to the dtype (through fp32, as
  // run_in_tier then policy_inputs do for the CPU chunk forms).
  auto activation = [&](const char* name) {
    std::vector<float> x = to_float(in.at(name));
    if (bf16)
      for (float& e : x) e = round_bf16(e);
    return x;
  };
  const std::vector<float> qf = activation("q"), kf = activation("k"), vf = activation("v"), bf = activation("beta");
  gpu::DeviceBuffer dq = upload(qf, rows, K, Kp, bf16), dk = upload(kf, rows, K, Kp, bf16);
  gpu::DeviceBuffer dv = upload(vf, rows, V, Vp, bf16), dbeta = upload(bf, rows, 1, 1, bf16);
  // use_qk_l2norm_in_kernel on the device (the CPU chunk form's order: narrow,
  // normalise in fp32, narrow).
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    gpu::l2norm_rows(dtype_of(bf16), dq.get(), dq.get(), nullptr, rows, Kp, 1e-6f);
    gpu::l2norm_rows(dtype_of(bf16), dk.get(), dk.get(), nullptr, rows, Kp, 1e-6f);
  }
  gpu::DeviceBuffer dg, dh0, dA;
  Precond pc;
  if (bind.precond) {
    // The diagonal preconditioner (PDN §3.3) on the device, in fp32 (gpu/family/atk_chunk.cu).
    make_precond(pc, in, cfg, kb, rows, H, K, Kp, bf16, dk.get(), opt.poison);
    dA = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * 4);
    if (opt.poison) dA.fill_bytes(0xFF);
    pc.p.A_final = static_cast<float*>(dA.get());
    gpu::atk_write_keys(pc.p);
  }
  gpu::DeviceBuffer dout(static_cast<std::size_t>(rows) * Vp * (bf16 ? 2 : 4));
  gpu::DeviceBuffer dht(static_cast<std::size_t>(BH) * Kp * Vp * 4);
  gpu::DeltaArgs a;
  a.B = static_cast<int>(kb.B), a.T = static_cast<int>(kb.T), a.H = static_cast<int>(H), a.K = Kp, a.V = Vp;
  a.cu_seqlens = kb.offsets(), a.packed_tokens = kb.packed;
  a.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
  using D = DeltaBinding::Decay;
  a.decay = bind.decay == D::none ? gpu::Decay::none : (bind.decay == D::per_key ? gpu::Decay::per_key : gpu::Decay::scalar);
  if (bind.decay != D::none) {
    const bool per_key = bind.decay == D::per_key;
    dg = upload(to_float(in.at("g")), rows, per_key ? K : 1, per_key ? Kp : 1, false);  // gates stay fp32
    a.g = static_cast<const float*>(dg.get());
  }
  if (const auto h0 = in.find("h0"); h0 != in.end()) {
    dh0 = upload_state(to_float(h0->second), BH, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
    a.h0 = static_cast<const float*>(dh0.get());
  }
  a.q = dq.get(), a.k = dk.get(), a.v = dv.get(), a.beta = dbeta.get(), a.w = bind.precond ? pc.k_tilde.get() : nullptr;
  a.o = dout.get(), a.ht = static_cast<float*>(dht.get());
  // scale: the config's, else K^-1/2 in fp32 of the unpadded K (scale_of in acc).
  a.scale = cfg.has("scale") ? static_cast<float>(cfg.number("scale")) : 1.0f / std::sqrt(static_cast<float>(K));
  if (bind.kaczmarz) a.kaczmarz = true, a.kaczmarz_eps = static_cast<float>(cfg.number("eps"));
  if (opt.poison) dout.fill_bytes(0xFF), dht.fill_bytes(0xFF);  // NaN in bf16 and fp32
  if (form == Form::chunk) gpu::delta_chunk_forward(a);
  else gpu::delta_sequential_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["o"] = download_unpadded(dout, {B, T, H, V}, Vp, bf16);
  out["ht"] = download_state(dht, kb.B, H, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
  if (bind.precond) {
    Tensor<double> A = download_state(dA, kb.B, H, 1, static_cast<int>(K), 1, Kp);
    A.shape = {kb.B, H, K};
    out["final_A_state"] = std::move(A);
  }
  return out;
}

TensorMap<double> run_delta_backward(const DeltaBinding& bind, Form form, const TensorMap<double>& in,
                                     const Config& cfg, Tier dtype, const KernelOptions& opt) {
  const bool bf16 = kernel_dtype_is_bf16(dtype);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  // Token rows on the layer's axes; states per sequence (varlen: N of them, kernel_batch).
  const KernelBatch kb = kernel_batch(in);
  const std::int64_t rows = B * T * H, BH = kb.B * H;
  // As run_delta: activations and the cotangent `do` rounded to the dtype (the
  // chunk backward form's policy_inputs and its narrowed cotangents).
  auto activation = [&](const char* name) {
    std::vector<float> x = to_float(in.at(name));
    if (bf16)
      for (float& e : x) e = round_bf16(e);
    return x;
  };
  const std::vector<float> qf = activation("q"), kf = activation("k"), vf = activation("v"), bf = activation("beta");
  const std::vector<float> dof = activation("do");
  gpu::DeviceBuffer dq = upload(qf, rows, K, Kp, bf16), dk = upload(kf, rows, K, Kp, bf16);
  gpu::DeviceBuffer dv = upload(vf, rows, V, Vp, bf16), dbeta = upload(bf, rows, 1, 1, bf16);
  gpu::DeviceBuffer ddo = upload(dof, rows, V, Vp, bf16);
  gpu::DeltaBackwardArgs a;
  gpu::DeltaArgs& f = a.fwd;
  // use_qk_l2norm_in_kernel: the kernels read the normalised rows (as the forward),
  // the chain rule reads the rows as given.
  gpu::DeviceBuffer dq_raw, dk_raw;
  if (cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel")) {
    dq_raw = upload(qf, rows, K, Kp, bf16), dk_raw = upload(kf, rows, K, Kp, bf16);
    gpu::l2norm_rows(dtype_of(bf16), dq.get(), dq.get(), nullptr, rows, Kp, 1e-6f);
    gpu::l2norm_rows(dtype_of(bf16), dk.get(), dk.get(), nullptr, rows, Kp, 1e-6f);
    a.q_raw = dq_raw.get(), a.k_raw = dk_raw.get(), a.l2_eps = 1e-6f;
  }
  f.B = static_cast<int>(kb.B), f.T = static_cast<int>(kb.T), f.H = static_cast<int>(H), f.K = Kp, f.V = Vp;
  f.cu_seqlens = kb.offsets(), f.packed_tokens = kb.packed;
  f.dtype = dtype_of(bf16);
  using D = DeltaBinding::Decay;
  f.decay = bind.decay == D::none ? gpu::Decay::none : (bind.decay == D::per_key ? gpu::Decay::per_key : gpu::Decay::scalar);
  const bool per_key = bind.decay == D::per_key;
  gpu::DeviceBuffer dg, dh0, ddht, gdq, gdk, gdv, gdbeta, gdg, gdh0, ddA, gdg_atk, gdbeta_atk, gdA0, gdcenter;
  if (bind.decay != D::none) {
    dg = upload(to_float(in.at("g")), rows, per_key ? K : 1, per_key ? Kp : 1, false);
    f.g = static_cast<const float*>(dg.get());
  }
  const auto h0 = in.find("h0");
  if (h0 != in.end()) {
    dh0 = upload_state(to_float(h0->second), BH, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
    f.h0 = static_cast<const float*>(dh0.get());
  }
  if (const auto dht = in.find("dht"); dht != in.end()) {
    ddht = upload_state(to_float(dht->second), BH, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
    a.dht = static_cast<const float*>(ddht.get());
  }
  f.q = dq.get(), f.k = dk.get(), f.v = dv.get(), f.beta = dbeta.get();
  f.scale = cfg.has("scale") ? static_cast<float>(cfg.number("scale")) : 1.0f / std::sqrt(static_cast<float>(K));
  if (bind.kaczmarz) f.kaczmarz = true, f.kaczmarz_eps = static_cast<float>(cfg.number("eps"));
  a.do_ = ddo.get();
  const std::size_t es = bf16 ? 2 : 4;
  gdq = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Kp * es);
  gdk = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Kp * es);
  gdv = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Vp * es);
  gdbeta = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * es);
  if (bind.decay != D::none) gdg = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * (per_key ? Kp : 1) * 4);
  if (h0 != in.end()) gdh0 = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * Vp * 4);
  if (opt.poison)  // NaN in bf16 and fp32: every gradient element must be written
    for (gpu::DeviceBuffer* b : {&gdq, &gdk, &gdv, &gdbeta, &gdg, &gdh0})
      if (b->get()) b->fill_bytes(0xFF);
  a.dq = gdq.get(), a.dk = gdk.get(), a.dv = gdv.get(), a.dbeta = gdbeta.get();
  a.dg = static_cast<float*>(gdg.get()), a.dh0 = static_cast<float*>(gdh0.get());
  // The caller's mutant switch reaches the chunk kernel (its CUDA counterparts of
  // the catalogue's bugs); the sequential kernel, the GPU's reference, never reads it.
  if (form == Form::chunk) a.mutant = active_mutant();
  // The preconditioned layers: k̃ made as the forward makes it, and the
  // preconditioner's adjoint (gpu/family/atk_backward.cu) after the core's.
  Precond pc;
  gpu::AtkBackwardArgs ab;
  const auto A0 = in.find("initial_A_state");
  const auto center = in.find("log_atk_scale");
  if (bind.precond) {
    make_precond(pc, in, cfg, kb, rows, H, K, Kp, bf16, dk.get(), opt.poison);
    gpu::atk_write_keys(pc.p);
    f.w = pc.k_tilde.get();
    ab.fwd = pc.p;
    if (const auto dA = in.find("dfinal_A_state"); dA != in.end()) {
      ddA = upload(to_float(dA->second), BH, K, Kp, false);
      ab.dA_final = static_cast<const float*>(ddA.get());
    }
    gdg_atk = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * 4);
    gdbeta_atk = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * 4);
    if (A0 != in.end()) gdA0 = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * 4);
    if (center != in.end()) gdcenter = gpu::DeviceBuffer(static_cast<std::size_t>(H) * 4);
    if (opt.poison)
      for (gpu::DeviceBuffer* b : {&gdg_atk, &gdbeta_atk, &gdA0, &gdcenter})
        if (b->get()) b->fill_bytes(0xFF);
    ab.dg_atk = static_cast<float*>(gdg_atk.get()), ab.dbeta_atk = static_cast<float*>(gdbeta_atk.get());
    ab.dA0 = static_cast<float*>(gdA0.get()), ab.dcenter = static_cast<float*>(gdcenter.get());
    a.atk = &ab;
  }
  gpu::DeviceBuffer fwd_o, ut_inverse;
  if (form == Form::chunk && opt.keep_ut_inverse) {  // the forward first, its inverses kept
    fwd_o = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Vp * es);
    ut_inverse = gpu::DeviceBuffer(gpu::delta_ut_inverse_bytes(f));
    gpu::DeltaArgs fw = f;
    fw.o = fwd_o.get(), fw.ut_inverse_out = ut_inverse.get();
    gpu::delta_chunk_forward(fw);
    a.ut_inverse = ut_inverse.get();
  }
  if (form == Form::chunk) gpu::delta_chunk_backward(a);
  else gpu::delta_sequential_backward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["dq"] = download_unpadded(gdq, {B, T, H, K}, Kp, bf16);
  out["dk"] = download_unpadded(gdk, {B, T, H, K}, Kp, bf16);
  out["dv"] = download_unpadded(gdv, {B, T, H, V}, Vp, bf16);
  out["dbeta"] = download(gdbeta, {B, T, H}, bf16);
  if (bind.decay != D::none)
    out["dg"] = per_key ? download_unpadded(gdg, {B, T, H, K}, Kp, false) : download(gdg, {B, T, H}, false);
  if (h0 != in.end()) out["dh0"] = download_state(gdh0, kb.B, H, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
  if (bind.precond) {
    out["dg_atk"] = download(gdg_atk, {B, T, H}, false);
    out["dbeta_atk"] = download(gdbeta_atk, {B, T, H}, false);
    if (A0 != in.end()) {
      Tensor<double> dA0 = download_state(gdA0, kb.B, H, 1, static_cast<int>(K), 1, Kp);
      dA0.shape = {kb.B, H, K};
      out["dinitial_A_state"] = std::move(dA0);
    }
    if (center != in.end()) out["dlog_atk_scale"] = download(gdcenter, {H}, false);
  }
  return out;
}

#endif

}  // namespace ttr::device
