#include "cuda_gate/runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>

#include "oracles/error.hpp"

#ifdef TTR_WITH_CUDA
#include "gpu/api.hpp"
#endif

namespace ttr::cuda {

const char* kernel_name(Kernel k) { return k == Kernel::chunk ? "cuda-chunk" : "cuda-recurrent"; }

const std::vector<std::string>& layers() {
  static const std::vector<std::string> l = {"delta_rule", "gated_delta_rule", "kda", "kaczmarz_delta_rule",
                                             "precond_gated_delta_rule", "kla_kalman", "gka"};
  return l;
}
bool is_delta_family(const std::string& layer) {
  return has_layer(layer) && layer != "kla_kalman" && layer != "gka";
}
bool has_layer(const std::string& layer) {
  return std::find(layers().begin(), layers().end(), layer) != layers().end();
}

std::string Status::reason() const {
  if (!built) return "skipped: CUDA kernels not built (configure with TTR_CUDA=ON)";
  if (devices == 0) return "skipped: no CUDA device";
  return "";
}

#ifndef TTR_WITH_CUDA

Status status() { return {}; }

TensorMap<double> run(const std::string&, Kernel, Tier, const TensorMap<double>&, const Config&, const RunOptions&) {
  throw InputError("this ttrcheck was built without the CUDA kernels (configure with TTR_CUDA=ON)");
}

#else

Status status() {
  Status s;
  s.built = true;
  s.devices = gpu::device_count();
  if (s.devices > 0) s.device = gpu::device_name(0);
  return s;
}

namespace {

// float → bf16 bits, round to nearest even (as Mixed16Policy<BF16Format>::narrow).
std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

int pad16(std::int64_t x) { return static_cast<int>((x + 15) / 16 * 16); }

gpu::DType dtype_of(bool bf16) { return bf16 ? gpu::DType::bf16 : gpu::DType::fp32; }

// A [rows, F] fp32 tensor (rows = everything before the last axis) padded with
// zeros to [rows, Fp] and uploaded as the dtype. Zero padding is exact for the
// delta rule: zero key/query coordinates add exact zeros to every sum and are
// never written (w = 0); zero value columns stay zero (δ = β(0 − 0)).
gpu::DeviceBuffer upload(const std::vector<float>& x, std::int64_t rows, std::int64_t F, int Fp, bool bf16) {
  const std::size_t n = static_cast<std::size_t>(rows) * Fp;
  gpu::DeviceBuffer buf(n * (bf16 ? 2 : 4));
  if (bf16) {
    std::vector<std::uint16_t> h(n, 0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < F; ++f) h[r * Fp + f] = bf16_bits(x[r * F + f]);
    buf.upload(h.data(), n * 2);
  } else {
    std::vector<float> h(n, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t f = 0; f < F; ++f) h[r * Fp + f] = x[r * F + f];
    buf.upload(h.data(), n * 4);
  }
  return buf;
}

std::vector<float> to_float(const Tensor<double>& t) {
  std::vector<float> f(t.data.size());
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(t.data[i]);
  return f;
}

// A [BH, K, V] state padded to [BH, Kp, Vp] (fp32).
gpu::DeviceBuffer upload_state(const std::vector<float>& s, std::int64_t BH, int K, int V, int Kp, int Vp) {
  std::vector<float> h(static_cast<std::size_t>(BH) * Kp * Vp, 0.0f);
  for (std::int64_t b = 0; b < BH; ++b)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) h[(b * Kp + i) * Vp + j] = s[(b * K + i) * V + j];
  gpu::DeviceBuffer buf(h.size() * 4);
  buf.upload(h.data(), h.size() * 4);
  return buf;
}

// A [rows, F] tensor downloaded as double from the dtype (bf16) or fp32.
Tensor<double> download(const gpu::DeviceBuffer& buf, Shape shape, bool bf16) {
  Tensor<double> t(std::move(shape), 0.0);
  if (bf16) {
    std::vector<std::uint16_t> h(t.data.size());
    buf.download(h.data(), h.size() * 2);
    for (std::size_t i = 0; i < h.size(); ++i) t.data[i] = bf16_value(h[i]);
  } else {
    std::vector<float> h(t.data.size());
    buf.download(h.data(), h.size() * 4);
    for (std::size_t i = 0; i < h.size(); ++i) t.data[i] = h[i];
  }
  return t;
}

// kla_kalman: q, k, v in the dtype (rounded through fp32, as run_in_tier then
// policy_operand do for the CPU forms); λv, ā, p̄ and the states fp32 (the
// policy's acc quantities, reference/kla_kalman/scan.hpp). Any N ≤ 128 and D:
// no padding.
TensorMap<double> run_kla(Kernel kernel, bool bf16, const TensorMap<double>& in, const Config& cfg,
                          const RunOptions& opt) {
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), N = q.dim(3), D = in.at("v").dim(3);
  if (N > 128) throw InputError(fmt::format("the CUDA kla_kalman kernels take N ≤ 128 (got N = {})", N));
  const std::int64_t rows = B * T * H;
  auto act = [&](const char* name, std::int64_t F) { return upload(to_float(in.at(name)), rows, F, static_cast<int>(F), bf16); };
  auto fp32 = [&](const Tensor<double>& t) {
    const std::vector<float> f = to_float(t);
    gpu::DeviceBuffer b(f.size() * 4);
    b.upload(f.data(), f.size() * 4);
    return b;
  };
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
  if (kernel == Kernel::chunk) gpu::kla_kalman_chunk_forward(a);
  else gpu::kla_kalman_recurrent_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  out["o"] = download(dout, {B, T, H, D}, bf16);
  out["o_var"] = download(dvar, {B, T, H, D}, bf16);
  out["lambda_T"] = download(dlT, {B, H, N, D}, false);
  out["eta_T"] = download(deT, {B, H, N, D}, false);
  return out;
}

// A [BH, R, C] fp32 block tensor (states) padded to [BH, Rp, Cp] and back.
std::vector<float> unpad_state(const std::vector<float>& p, std::int64_t BH, int R, int C, int Rp, int Cp) {
  std::vector<float> u(static_cast<std::size_t>(BH) * R * C);
  for (std::int64_t b = 0; b < BH; ++b)
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) u[(b * R + i) * C + j] = p[(b * Rp + i) * Cp + j];
  return u;
}

Tensor<double> as_double(const std::vector<float>& f, Shape shape) {
  Tensor<double> t(std::move(shape), 0.0);
  for (std::size_t i = 0; i < f.size(); ++i) t.data[i] = f[i];
  return t;
}

gpu::DeviceBuffer upload_fp32(const std::vector<float>& f) {
  gpu::DeviceBuffer b(f.size() * 4);
  b.upload(f.data(), f.size() * 4);
  return b;
}

// gka (solver = chebyshev): q, k, v in the dtype, zero-padded to K, V multiples
// of 16 (a zero key coordinate adds exact zeros to H, S, ‖H‖_F and every product,
// and the padded block of H + λI is λI with a zero right-hand side, so the padded
// x coordinates stay 0); g, β, α and the states fp32 (the CPU form's acc).
TensorMap<double> run_gka(Kernel kernel, bool bf16, const TensorMap<double>& in, const Config& cfg,
                          const RunOptions& opt) {
  if (cfg.text("solver") != "chebyshev")
    throw InputError(fmt::format("the CUDA gka kernels implement solver=chebyshev only (GKA §4.2's chunkwise "
                                 "solver); got solver={}",
                                 cfg.text("solver")));
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
  if (kernel == Kernel::chunk) gpu::gka_chunk_forward(a);
  else gpu::gka_recurrent_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  const Tensor<double> op = download(dout, {B, T, H, Vp}, bf16);
  Tensor<double>& o = out["o"];
  o = Tensor<double>({B, T, H, V}, 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < V; ++j) o.data[r * V + j] = op.data[r * Vp + j];
  auto state = [&](const gpu::DeviceBuffer& d, int R, int C, int Rp, int Cp) {
    std::vector<float> f(static_cast<std::size_t>(BH) * Rp * Cp);
    d.download(f.data(), f.size() * 4);
    return as_double(unpad_state(f, BH, R, C, Rp, Cp), {B, H, R, C});
  };
  out["ht"] = state(dht, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
  out["hkk"] = state(dhkk, static_cast<int>(K), static_cast<int>(K), Kp, Kp);
  out["lambda"] = download(dlam, {B, T, H}, false);
  out["fro"] = download(dfro, {B, T, H}, false);
  return out;
}

}  // namespace

TensorMap<double> run(const std::string& layer, Kernel kernel, Tier dtype, const TensorMap<double>& in,
                      const Config& cfg, const RunOptions& opt) {
  if (!has_layer(layer)) throw InputError(fmt::format("layer '{}' has no CUDA kernel", layer));
  if (dtype != Tier::bf16 && dtype != Tier::fp32)
    throw InputError(fmt::format("the CUDA kernels run in bf16 or fp32, not {}", tier_name(dtype)));
  const bool bf16 = dtype == Tier::bf16;
  if (layer == "kla_kalman") return run_kla(kernel, bf16, in, cfg, opt);
  if (layer == "gka") return run_gka(kernel, bf16, in, cfg, opt);
  const Tensor<double>& q = in.at("q");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = in.at("v").dim(3);
  const int Kp = pad16(K), Vp = pad16(V);
  if (Kp > 128 || Vp > 128) throw InputError(fmt::format("the CUDA kernels take K, V ≤ 128 (got K = {}, V = {})", K, V));
  const std::int64_t rows = B * T * H, BH = B * H;
  // What the kernel receives: activations rounded to the dtype (through fp32, as
  // run_in_tier then policy_inputs do for the CPU chunk forms).
  auto activation = [&](const char* name) {
    std::vector<float> x = to_float(in.at(name));
    if (bf16)
      for (float& e : x) e = bf16_value(bf16_bits(e));
    return x;
  };
  const std::vector<float> qf = activation("q"), kf = activation("k"), vf = activation("v"), bf = activation("beta");
  const bool precond = layer == "precond_gated_delta_rule";
  gpu::DeviceBuffer dq = upload(qf, rows, K, Kp, bf16), dk = upload(kf, rows, K, Kp, bf16);
  gpu::DeviceBuffer dv = upload(vf, rows, V, Vp, bf16), dbeta = upload(bf, rows, 1, 1, bf16);
  // use_qk_l2norm_in_kernel on the device (the CPU chunk form's order: narrow,
  // normalise in fp32, narrow); PGDN's preconditioner reads the fp32 key.
  gpu::DeviceBuffer dk32;
  const bool l2 = cfg.has("use_qk_l2norm_in_kernel") && cfg.flag("use_qk_l2norm_in_kernel");
  if (l2) {
    if (precond) dk32 = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Kp * 4);
    gpu::l2norm_rows(dtype_of(bf16), dq.get(), dq.get(), nullptr, rows, Kp, 1e-6f);
    gpu::l2norm_rows(dtype_of(bf16), dk.get(), dk.get(), static_cast<float*>(dk32.get()), rows, Kp, 1e-6f);
  }
  gpu::DeviceBuffer dw, dg, dh0, dA, datk_g, datk_b, dA0, dcenter;
  if (precond) {
    // The diagonal preconditioner (PDN §3.3) on the device, in fp32 (gpu/family/atk_chunk.cu).
    gpu::AtkArgs p;
    p.B = static_cast<int>(B), p.T = static_cast<int>(T), p.H = static_cast<int>(H), p.K = Kp;
    p.key_dtype = l2 ? gpu::DType::fp32 : dtype_of(bf16);
    p.k = l2 ? dk32.get() : dk.get();
    datk_g = upload(to_float(in.at("g_atk")), rows, 1, 1, false);
    datk_b = upload(to_float(in.at("beta_atk")), rows, 1, 1, false);
    p.g_atk = static_cast<const float*>(datk_g.get()), p.beta_atk = static_cast<const float*>(datk_b.get());
    if (const auto a0 = in.find("initial_A_state"); a0 != in.end()) {
      dA0 = upload(to_float(a0->second), BH, K, Kp, false);
      p.A0 = static_cast<const float*>(dA0.get());
    }
    const auto c = in.find("log_atk_scale");
    const std::vector<float> center =
        c != in.end() ? to_float(c->second)
                      : std::vector<float>(static_cast<std::size_t>(H), static_cast<float>(cfg.number("log_atk_scale")));
    dcenter = upload(center, H, 1, 1, false);
    p.center = static_cast<const float*>(dcenter.get());
    p.log_x = std::log(static_cast<float>(cfg.number("x")));
    p.eps = static_cast<float>(cfg.number("eps"));
    p.dtype = dtype_of(bf16);
    dw = gpu::DeviceBuffer(static_cast<std::size_t>(rows) * Kp * (bf16 ? 2 : 4));
    dA = gpu::DeviceBuffer(static_cast<std::size_t>(BH) * Kp * 4);
    if (opt.poison) dw.fill_bytes(0xFF), dA.fill_bytes(0xFF);
    p.k_tilde = dw.get(), p.A_final = static_cast<float*>(dA.get());
    gpu::atk_write_keys(p);
  }
  gpu::DeviceBuffer dout(static_cast<std::size_t>(rows) * Vp * (bf16 ? 2 : 4));
  gpu::DeviceBuffer dht(static_cast<std::size_t>(BH) * Kp * Vp * 4);
  gpu::DeltaArgs a;
  a.B = static_cast<int>(B), a.T = static_cast<int>(T), a.H = static_cast<int>(H), a.K = Kp, a.V = Vp;
  a.dtype = bf16 ? gpu::DType::bf16 : gpu::DType::fp32;
  a.decay = layer == "delta_rule" ? gpu::Decay::none : (layer == "kda" ? gpu::Decay::per_key : gpu::Decay::scalar);
  if (a.decay != gpu::Decay::none) {
    const Tensor<double>& g = in.at("g");
    const bool per_key = a.decay == gpu::Decay::per_key;
    dg = upload(to_float(g), rows, per_key ? K : 1, per_key ? Kp : 1, false);  // gates stay fp32
    a.g = static_cast<const float*>(dg.get());
  }
  if (const auto h0 = in.find("h0"); h0 != in.end()) {
    dh0 = upload_state(to_float(h0->second), BH, static_cast<int>(K), static_cast<int>(V), Kp, Vp);
    a.h0 = static_cast<const float*>(dh0.get());
  }
  a.q = dq.get(), a.k = dk.get(), a.v = dv.get(), a.beta = dbeta.get(), a.w = precond ? dw.get() : nullptr;
  a.o = dout.get(), a.ht = static_cast<float*>(dht.get());
  // scale: the config's, else K^-1/2 in fp32 of the unpadded K (scale_of in acc).
  a.scale = cfg.has("scale") ? static_cast<float>(cfg.number("scale"))
                             : 1.0f / std::sqrt(static_cast<float>(K));
  if (layer == "kaczmarz_delta_rule") a.kaczmarz = true, a.kaczmarz_eps = static_cast<float>(cfg.number("eps"));
  if (opt.poison) dout.fill_bytes(0xFF), dht.fill_bytes(0xFF);  // NaN in bf16 and fp32
  if (kernel == Kernel::chunk) gpu::delta_chunk_forward(a);
  else gpu::delta_recurrent_forward(a);
  gpu::synchronize();
  TensorMap<double> out;
  Tensor<double>& o = out["o"];
  o = Tensor<double>({B, T, H, V}, 0.0);
  if (bf16) {
    std::vector<std::uint16_t> h(static_cast<std::size_t>(rows) * Vp);
    dout.download(h.data(), h.size() * 2);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < V; ++j) o.data[r * V + j] = bf16_value(h[r * Vp + j]);
  } else {
    std::vector<float> h(static_cast<std::size_t>(rows) * Vp);
    dout.download(h.data(), h.size() * 4);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < V; ++j) o.data[r * V + j] = h[r * Vp + j];
  }
  std::vector<float> hs(static_cast<std::size_t>(BH) * Kp * Vp);
  dht.download(hs.data(), hs.size() * 4);
  Tensor<double>& ht = out["ht"];
  ht = Tensor<double>({B, H, K, V}, 0.0);
  for (std::int64_t b = 0; b < BH; ++b)
    for (std::int64_t i = 0; i < K; ++i)
      for (std::int64_t j = 0; j < V; ++j) ht.data[(b * K + i) * V + j] = hs[(b * Kp + i) * Vp + j];
  if (precond) {
    std::vector<float> af(static_cast<std::size_t>(BH) * Kp);
    dA.download(af.data(), af.size() * 4);
    out["final_A_state"] = as_double(unpad_state(af, BH, 1, static_cast<int>(K), 1, Kp), {B, H, K});
  }
  return out;
}

#endif

}  // namespace ttr::cuda
