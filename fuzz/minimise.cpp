// The reproducer minimiser (campaign.hpp: minimise): greedy delta debugging
// (Zeller & Hildebrandt, "Simplifying and isolating failure-inducing input",
// TSE 2002) over the structure of a layer's inputs — the token axis, the
// (batch, head) sequences, whole optional tensors and rows of values — instead
// of over bytes, so every candidate is a valid input set of the layer.
#include <algorithm>
#include <cmath>

#include "fuzz/campaign.hpp"
#include "oracles/varlen.hpp"
#include "reference/core/float16.hpp"

namespace ttr::fuzz {
namespace {

// The sub-case of tokens [t0, t1) and, when b >= 0, the single sequence (b, h):
// every input tensor cut along its axes named T, B and H.
Case slice(const LayerSpec& spec, const Case& c, std::int64_t t0, std::int64_t t1, std::int64_t b, std::int64_t h) {
  Case out = c;
  out.dims["T"] = t1 - t0;
  if (b >= 0) out.dims["B"] = out.dims["H"] = 1;
  for (auto& [name, t] : out.inputs) {
    const TensorSpec* ts = spec.input(name);
    if (!ts) continue;
    const Tensor<double>& src = c.inputs.at(name);
    std::vector<std::int64_t> lo(src.shape.size(), 0), len(src.shape);
    for (std::size_t a = 0; a < ts->dims.size() && a < src.shape.size(); ++a) {
      if (ts->dims[a] == "T") lo[a] = t0, len[a] = t1 - t0;
      if (b >= 0 && ts->dims[a] == "B") lo[a] = b, len[a] = 1;
      if (b >= 0 && ts->dims[a] == "H") lo[a] = h, len[a] = 1;
    }
    Tensor<double> dst(len, 0.0);
    std::vector<std::int64_t> idx(len.size(), 0);
    for (std::int64_t i = 0; i < dst.numel(); ++i) {
      std::int64_t off = 0;
      for (std::size_t a = 0; a < len.size(); ++a) off = off * src.shape[a] + lo[a] + idx[a];
      dst.data[static_cast<std::size_t>(i)] = src.data[static_cast<std::size_t>(off)];
      for (std::size_t a = len.size(); a-- > 0;) {
        if (++idx[a] < len[a]) break;
        idx[a] = 0;
      }
    }
    t = std::move(dst);
  }
  return out;
}

// Candidate lengths below T, shortest first: 1, 2, 3, 4, 6, 8, 12, 16, … and T − 1.
std::vector<std::int64_t> shorter_lengths(std::int64_t T) {
  std::vector<std::int64_t> l;
  for (std::int64_t p = 1; p < T; p *= 2) {
    l.push_back(p);
    if (p >= 2 && p + p / 2 < T) l.push_back(p + p / 2);
  }
  if (T > 1) l.push_back(T - 1);
  std::sort(l.begin(), l.end());
  l.erase(std::unique(l.begin(), l.end()), l.end());
  return l;
}

}  // namespace

Case minimise(const LayerEntry& layer, const Target& target, FindingKind kind, const Case& c, int max_trials) {
  const LayerSpec spec = case_spec(layer, target);  // backward: the cotangents shrink with the inputs
  Case cur = c;
  int trials = 0;
  const auto attempt = [&](const Case& next) {
    if (trials >= max_trials) return false;
    ++trials;
    if (!still_fails(layer, target, kind, next)) return false;
    cur = next;
    return true;
  };
  for (bool progress = true; progress && trials < max_trials;) {
    progress = false;
    // A varlen case keeps its tokens and offsets (cutting T would break them);
    // its values are minimised below.
    const bool varlen = cur.inputs.count(kCuSeqlens) > 0;
    // 1. Shorter: the shortest failing prefix, then drop leading tokens.
    const std::int64_t T = varlen ? 0 : cur.dims.at("T");
    for (std::int64_t L : shorter_lengths(T))
      if (attempt(slice(spec, cur, 0, L, -1, -1))) {
        progress = true;
        break;
      }
    for (std::int64_t s = varlen ? 0 : cur.dims.at("T") / 2; s >= 1; s /= 2)
      if (attempt(slice(spec, cur, s, cur.dims.at("T"), -1, -1))) {
        progress = true;
        break;
      }
    // 2. One (batch, head) sequence.
    const std::int64_t B = cur.dims.at("B"), H = cur.dims.at("H");
    if (B * H > 1 && !varlen) {
      bool done = false;
      for (std::int64_t b = 0; b < B && !done; ++b)
        for (std::int64_t h = 0; h < H && !done; ++h) done = attempt(slice(spec, cur, 0, cur.dims.at("T"), b, h));
      progress |= done;
    }
    // 3. Optional tensors removed; rows zeroed, ddmin-style; tensors halved.
    std::vector<std::string> names;
    for (const auto& [name, _] : cur.inputs) names.push_back(name);
    for (const std::string& name : names) {
      const TensorSpec* ts = spec.input(name);
      if (!ts || !cur.inputs.count(name) || name == kCuSeqlens) continue;
      if (!ts->required) {
        Case next = cur;
        next.inputs.erase(name);
        if (attempt(next)) {
          progress = true;
          continue;
        }
      }
      if (!ts->range.contains(0.0)) continue;
      const std::int64_t F = cur.inputs.at(name).shape.empty() ? 1 : cur.inputs.at(name).shape.back();
      // Zero sets of nonzero rows: the whole tensor, then halves, quarters, … (ddmin's complements).
      for (std::int64_t parts = 1; trials < max_trials;) {
        const Tensor<double>& t = cur.inputs.at(name);
        std::vector<std::int64_t> live;
        for (std::int64_t r = 0; r < t.numel() / F; ++r)
          if (std::any_of(t.data.begin() + r * F, t.data.begin() + (r + 1) * F, [](double x) { return x != 0; }))
            live.push_back(r);
        const std::int64_t n = static_cast<std::int64_t>(live.size());
        if (n == 0 || parts > n) break;
        bool zeroed = false;
        for (std::int64_t p = 0; p < parts && !zeroed; ++p) {
          Case next = cur;
          Tensor<double>& nt = next.inputs.at(name);
          for (std::int64_t i = p * n / parts; i < (p + 1) * n / parts; ++i)
            std::fill_n(nt.data.begin() + live[i] * F, F, 0.0);
          zeroed = attempt(next);
        }
        if (zeroed) {
          progress = true;
          parts = std::max<std::int64_t>(1, parts / 2);  // back to the coarser level
        } else {
          parts *= 2;
        }
      }
      // Smaller magnitudes: the whole tensor halved (exact on the bf16 grid down to subnormals).
      Case next = cur;
      bool nonzero = false, in_range = true;
      for (double& x : next.inputs.at(name).data) {
        x = BF16Format::round(0.5 * x);
        nonzero |= x != 0;
        in_range &= ts->range.contains(x);
      }
      if (nonzero && in_range && attempt(next)) progress = true;
    }
  }
  return cur;
}

}  // namespace ttr::fuzz
