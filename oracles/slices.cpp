#include "oracles/slices.hpp"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/varlen.hpp"
#include "reference/core/thread_caches.hpp"

namespace ttr {
namespace {

// A tensor seen as [A0, A1, A2, R]: A0 the batch/sequence axis, A1 the token axis,
// A2 the head axis, R the rest (1 where the tensor lacks that axis).
struct Layout {
  std::int64_t a0 = 1, a1 = 1, a2 = 1, r = 1;
  int ax0 = -1, ax1 = -1, ax2 = -1;  // positions in the shape, -1 where absent
};

std::int64_t product(const Shape& s, std::size_t from) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

Layout layout_of(const TensorSpec& ts, const Shape& s, bool by_head) {
  Layout l;
  const int h = by_head ? head_axis(ts) : -1;
  switch (axis_kind(ts)) {
    case AxisKind::per_token:
      l.ax0 = 0, l.ax1 = 1, l.a0 = s.at(0), l.a1 = s.at(1);
      if (h == 2) l.ax2 = 2, l.a2 = s.at(2), l.r = product(s, 3);
      else l.r = product(s, 2);
      break;
    case AxisKind::per_sequence:
      l.ax0 = 0, l.a0 = s.at(0);
      if (h == 1) l.ax2 = 1, l.a2 = s.at(1), l.r = product(s, 2);
      else l.r = product(s, 1);
      break;
    case AxisKind::per_head:
      if (h == 0) l.ax2 = 0, l.a2 = s.at(0), l.r = product(s, 1);
      else l.r = product(s, 0);
      break;
    default: l.r = product(s, 0); break;
  }
  return l;
}

// The block [pick0 | all, lo1..hi1, pick2 | all, :] of x (pick -1: the whole axis).
Tensor<double> extract(const Tensor<double>& x, const Layout& l, std::int64_t pick0, std::int64_t lo1, std::int64_t hi1,
                       std::int64_t pick2) {
  const std::int64_t b0 = pick0 < 0 ? 0 : pick0, e0 = pick0 < 0 ? l.a0 : pick0 + 1;
  const std::int64_t b1 = l.ax1 < 0 ? 0 : lo1, e1 = l.ax1 < 0 ? 1 : hi1;
  const std::int64_t b2 = pick2 < 0 ? 0 : pick2, e2 = pick2 < 0 ? l.a2 : pick2 + 1;
  Tensor<double> y;
  y.shape = x.shape;
  if (l.ax0 >= 0) y.shape[static_cast<std::size_t>(l.ax0)] = e0 - b0;
  if (l.ax1 >= 0) y.shape[static_cast<std::size_t>(l.ax1)] = e1 - b1;
  if (l.ax2 >= 0) y.shape[static_cast<std::size_t>(l.ax2)] = e2 - b2;
  y.data.reserve(static_cast<std::size_t>((e0 - b0) * (e1 - b1) * (e2 - b2) * l.r));
  for (std::int64_t i0 = b0; i0 < e0; ++i0)
    for (std::int64_t i1 = b1; i1 < e1; ++i1)
      for (std::int64_t i2 = b2; i2 < e2; ++i2) {
        const auto at = x.data.begin() + ((i0 * l.a1 + i1) * l.a2 + i2) * l.r;
        y.data.insert(y.data.end(), at, at + l.r);
      }
  return y;
}

struct Plan {
  bool varlen = false, by_row = false, by_head = false;
  std::vector<std::int64_t> cu;  // varlen offsets
  std::int64_t B = 1, T = 0, H = 1, sequences = 1;
  std::vector<Slice> slices;
};

const TensorSpec* spec_of(const LayerSpec& spec, const std::string& name, bool output) {
  return output ? spec.output(name) : spec.input(name);
}

// Where a varlen slice's outputs go: tokens of row 0 from t0, per-sequence rows first..last.
void place(const TensorSpec& ts, const Tensor<double>& part, const Slice& s, const Plan& p, Tensor<double>& full,
           std::vector<char>& head_filled, bool lower_bound, bool upper_bound) {
  const Layout pl = layout_of(ts, part.shape, p.by_head);
  const Layout fl = layout_of(ts, full.shape, p.by_head);
  const std::int64_t h0 = s.head < 0 ? 0 : s.head;
  switch (axis_kind(ts)) {
    case AxisKind::per_token: {
      const std::int64_t row0 = s.row < 0 ? 0 : s.row;
      for (std::int64_t i0 = 0; i0 < pl.a0; ++i0)
        for (std::int64_t t = 0; t < pl.a1; ++t)
          for (std::int64_t h = 0; h < pl.a2; ++h)
            std::copy_n(part.data.begin() + ((i0 * pl.a1 + t) * pl.a2 + h) * pl.r, pl.r,
                        full.data.begin() + (((row0 + i0) * fl.a1 + s.t0 + t) * fl.a2 + h0 + h) * fl.r);
      break;
    }
    case AxisKind::per_sequence: {
      // One row per run, or every row of a run over all rows; a merged run (a
      // mutant) writes its one final row to each sequence it covered.
      for (std::int64_t n = s.first; n <= s.last; ++n) {
        const std::int64_t i0 = pl.a0 == 1 ? 0 : n - s.first;
        for (std::int64_t h = 0; h < pl.a2; ++h)
          std::copy_n(part.data.begin() + (i0 * pl.a2 + h) * pl.r, pl.r, full.data.begin() + (n * fl.a2 + h0 + h) * fl.r);
      }
      break;
    }
    case AxisKind::per_head:
      // Shared by every sequence: the gradient is the sum over sequences, in plan
      // (sequence) order; the first contribution is copied, not added to zero
      // (0 + (-0) would lose the sign). Interval bounds stay outward.
      for (std::int64_t h = 0; h < pl.a2; ++h) {
        double* dst = full.data.data() + (h0 + h) * fl.r;
        const double* src = part.data.data() + h * pl.r;
        if (!head_filled[static_cast<std::size_t>(h0 + h)]) {
          std::copy_n(src, pl.r, dst);
        } else {
          for (std::int64_t j = 0; j < pl.r; ++j) {
            double v = dst[j] + src[j];
            if (lower_bound) v = std::nextafter(v, -std::numeric_limits<double>::infinity());
            if (upper_bound) v = std::nextafter(v, std::numeric_limits<double>::infinity());
            dst[j] = v;
          }
        }
        head_filled[static_cast<std::size_t>(h0 + h)] = 1;
      }
      break;
    default: full = part; break;  // a single run over everything
  }
}

// The full shape of an output from one slice's: B (1 under varlen) and T back,
// N (or B) per-sequence rows, every head.
Shape full_shape(const TensorSpec& ts, Shape s, const Plan& p) {
  switch (axis_kind(ts)) {
    case AxisKind::per_token:
      s.at(0) = p.varlen ? 1 : p.B;
      s.at(1) = p.T;
      if (p.by_head) s.at(2) = p.H;
      break;
    case AxisKind::per_sequence:
      s.at(0) = p.sequences;
      if (p.by_head) s.at(1) = p.H;
      break;
    case AxisKind::per_head:
      if (p.by_head) s.at(0) = p.H;
      break;
    default: break;
  }
  return s;
}

// The slices' outputs put back in place. Per-token and per-sequence outputs of
// different slices cover disjoint blocks, so they are copied on `threads` threads
// (the copy is also the first touch of the full tensor's pages: the production
// case's o is 134 MB); per-head sums are added in plan order, on one thread.
TensorMap<double> assemble(const LayerSpec& spec, const std::vector<TensorMap<double>*>& parts, const Plan& p,
                           bool lower_bound, bool upper_bound, int threads) {
  TensorMap<double> out;
  if (parts.empty()) return out;
  for (const auto& [name, first] : *parts.front()) {
    const TensorSpec* ts = spec_of(spec, name, true);
    if (!ts || (axis_kind(*ts) == AxisKind::other && parts.size() > 1))
      throw std::logic_error(fmt::format("slicer: output '{}' of layer '{}' has no axis it can reassemble", name,
                                         spec.name));
    Tensor<double>& full = out[name];
    full.shape = full_shape(*ts, first.shape, p);
    full.data.assign(static_cast<std::size_t>(numel(full.shape)), 0.0);
    std::vector<char> filled(static_cast<std::size_t>(p.H), 0);
    const auto one = [&](std::size_t i) {
      place(*ts, parts[i]->at(name), p.slices[i], p, full, filled, lower_bound, upper_bound);
    };
    const AxisKind kind = axis_kind(*ts);
    if (threads > 1 && (kind == AxisKind::per_token || kind == AxisKind::per_sequence)) {
      const std::int64_t count = static_cast<std::int64_t>(parts.size());
#pragma omp parallel for num_threads(threads) schedule(static)
      for (std::int64_t i = 0; i < count; ++i) one(static_cast<std::size_t>(i));
    } else {
      for (std::size_t i = 0; i < parts.size(); ++i) one(i);
    }
  }
  return out;
}

Plan make_plan(const LayerSpec& spec, const TensorMap<double>& in, const SliceOptions& so, int chunk_size,
               bool straddle) {
  Plan p;
  p.cu = cu_seqlens_of(in);
  p.varlen = !p.cu.empty();
  const TensorSpec* token = nullptr;
  for (const TensorSpec& ts : spec.inputs)
    if (axis_kind(ts) == AxisKind::per_token && in.count(ts.name)) {
      token = &ts;
      break;
    }
  if (!token) {
    if (p.varlen) throw InputError(fmt::format("layer '{}': cu_seqlens given but no per-token input", spec.name));
    return p;  // nothing to slice along
  }
  const Shape& ts = in.at(token->name).shape;
  p.B = ts.at(0);
  p.T = ts.at(1);
  p.H = head_axis(*token) == 2 ? ts.at(2) : 1;
  // Every tensor must have axes the slicer understands; heads are split only
  // where every tensor has its H axis in the place its kind says.
  bool understood = true, heads = head_axis(*token) == 2 && p.H > 1, shared_gradient = false;
  for (const auto& [name, t] : in) {
    const TensorSpec* s = spec_of(spec, name, false);
    if (!s) continue;
    const AxisKind k = axis_kind(*s);
    if (k == AxisKind::other) understood = false;
    if (k != AxisKind::offsets && head_axis(*s) < 0) heads = false;
  }
  for (const TensorSpec& s : spec.outputs) {
    const AxisKind k = axis_kind(s);
    if (k == AxisKind::other) understood = false;
    if (head_axis(s) < 0) heads = false;
    if (k == AxisKind::per_head) shared_gradient = true;
  }
  if (p.varlen) {
    if (!understood)
      throw InputError(fmt::format("layer '{}': a tensor's dims fit neither [B,T,...], [B,H,...] nor [H,...]; "
                                   "cu_seqlens cannot be sliced for it",
                                   spec.name));
    if (p.B != 1)
      throw InputError(fmt::format("tensor '{}' has B = {}; with cu_seqlens the batch must be one row (B = 1)",
                                   token->name, p.B));
    if (p.cu.size() < 2 || p.cu.front() != 0 || p.cu.back() != p.T)
      throw InputError(fmt::format("cu_seqlens must run from 0 to T = {} (it has {} entries, {} .. {})", p.T,
                                   p.cu.size(), p.cu.empty() ? 0 : p.cu.front(), p.cu.empty() ? 0 : p.cu.back()));
    for (std::size_t i = 1; i < p.cu.size(); ++i)
      if (p.cu[i] < p.cu[i - 1]) throw InputError(fmt::format("cu_seqlens element [{}] decreases", i));
    p.sequences = static_cast<std::int64_t>(p.cu.size()) - 1;
    for (const auto& [name, t] : in)
      if (const TensorSpec* s = spec_of(spec, name, false); s && axis_kind(*s) == AxisKind::per_sequence &&
                                                             (t.shape.empty() || t.shape[0] != p.sequences))
        throw InputError(fmt::format("tensor '{}' must have N = {} rows (one per sequence of cu_seqlens)", name,
                                     p.sequences));
  } else {
    p.sequences = p.B;
  }
  if (!understood) return p;  // split-only request on tensors it cannot cut: one run
  p.by_head = so.split && heads;
  // Batch rows (not varlen) split unless a gradient is summed over them (their
  // sum is then left to the form, in its own arithmetic).
  p.by_row = !p.varlen && so.split && p.B > 1 && !shared_gradient;
  const std::int64_t H = p.by_head ? p.H : 1;
  if (p.varlen) {
    for (std::int64_t n = 0; n < p.sequences;) {
      std::int64_t last = n;
      // Mutant: a boundary off the packed row's chunk grid is not seen — the
      // sequences either side run as one (a kernel using global chunk indices).
      while (straddle && last + 1 < p.sequences && p.cu[last + 1] % chunk_size != 0) ++last;
      for (std::int64_t h = 0; h < H; ++h)
        p.slices.push_back({p.slices.size(), 0, n, last, p.cu[n], p.cu[last + 1], p.by_head ? h : -1});
      n = last + 1;
    }
  } else {
    const std::int64_t rows = p.by_row ? p.B : 1;
    for (std::int64_t b = 0; b < rows; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        p.slices.push_back({p.slices.size(), p.by_row ? b : -1, p.by_row ? b : 0, p.by_row ? b : p.B - 1, 0, p.T,
                            p.by_head ? h : -1});
  }
  return p;
}

}  // namespace

LayerResult run_sliced(const LayerSpec& spec, LayerRunner run, const TensorMap<double>& in, const Config& cfg,
                       const FormOptions& opt, const SliceOptions& so) {
  if (!so.split && !in.count(kCuSeqlens)) return run(in, cfg, opt);
  return run_sliced(
      spec, [run](const TensorMap<double>& part, const Config& c, const FormOptions& o, const Slice&) { return run(part, c, o); },
      in, cfg, opt, so);
}

LayerResult run_sliced(const LayerSpec& spec, const SliceRunner& run, const TensorMap<double>& in, const Config& cfg,
                       const FormOptions& opt, const SliceOptions& so) {
  Slice whole;  // a single run over everything
  whole.row = -1;
  whole.head = -1;
  if (!so.split && !in.count(kCuSeqlens)) return run(in, cfg, opt, whole);
  const Mutant mutant = so.kernel_form ? active_mutant() : Mutant::none;
  const bool leak = mutant == kVarlenStateLeaks && spec.input("h0") && spec.output("ht");
  const Plan p = make_plan(spec, in, so, opt.chunk_size, mutant == kVarlenChunkStraddles);
  if (p.slices.empty()) {  // nothing it could cut (no per-token input, or axes it does not know)
    TensorMap<double> rest = in;
    rest.erase(kCuSeqlens);
    return run(rest, cfg, opt, whole);
  }
  const std::size_t n = p.slices.size();
  std::vector<LayerResult> results(n);
  std::vector<std::exception_ptr> errors(n);
  // Mutant: the state is not reset at a sequence start — each run starts from
  // the final state of the run before it (per head), not from its own h0.
  std::vector<std::optional<Tensor<double>>> carried(static_cast<std::size_t>(p.H) + 1);
  const auto one = [&](std::size_t i) {
    const Slice& s = p.slices[i];
    TensorMap<double> part;
    for (const auto& [name, x] : in) {
      const TensorSpec* ts = spec_of(spec, name, false);
      if (!ts) {
        part.emplace(name, x);
        continue;
      }
      const Layout l = layout_of(*ts, x.shape, p.by_head);
      switch (axis_kind(*ts)) {
        case AxisKind::offsets: break;
        case AxisKind::per_token: part.emplace(name, extract(x, l, s.row, s.t0, s.t1, s.head)); break;
        case AxisKind::per_sequence:
          part.emplace(name, extract(x, l, s.row < 0 && !p.varlen ? -1 : s.first, 0, 1, s.head));
          break;
        case AxisKind::per_head: part.emplace(name, extract(x, l, -1, 0, 1, s.head)); break;
        case AxisKind::other: part.emplace(name, x); break;
      }
    }
    auto& carry = carried[static_cast<std::size_t>(s.head + 1)];
    if (leak && carry) part["h0"] = *carry;
    if (so.before) so.before(s);
    results[i] = run(part, cfg, opt, s);
    if (so.after) so.after(s);
    if (leak) carry = results[i].values.at("ht");
  };
  int threads = so.threads > 0 ? so.threads : slice_threads();
  if (leak) threads = 1;  // the mutant's carry runs in sequence order
  threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) one(i);
  } else {
    const std::int64_t count = static_cast<std::int64_t>(n);
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t i = 0; i < count; ++i) {
        try {
          const MutantScope scope(mutant);  // the caller's thread-local switch, on this worker too
          one(static_cast<std::size_t>(i));
        } catch (...) {
          errors[static_cast<std::size_t>(i)] = std::current_exception();
        }
      }
      // OpenMP's pool threads may exit before the process does (libgomp ends the
      // surplus when a later team is smaller) with MPFR's per-thread caches still
      // allocated: each worker frees its own here (reference/core/thread_caches.hpp).
      // The calling thread (number 0) keeps its caches; its owner frees them.
      if (omp_get_thread_num() != 0) release_thread_caches();
    }
    for (const auto& e : errors)  // the first failure in plan order, whatever the threads
      if (e) std::rethrow_exception(e);
  }
  LayerResult r;
  r.working_bits = results.front().working_bits;  // the fewest any slice used (the oracle tiers mix them)
  for (const LayerResult& x : results) r.working_bits = std::min(r.working_bits, x.working_bits);
  const auto collect = [&](TensorMap<double> LayerResult::*m, bool lo, bool hi) {
    std::vector<TensorMap<double>*> parts;
    for (LayerResult& x : results) parts.push_back(&(x.*m));
    if (!parts.front()->empty()) r.*m = assemble(spec, parts, p, lo, hi, threads);
  };
  collect(&LayerResult::values, false, false);
  collect(&LayerResult::lower, true, false);
  collect(&LayerResult::upper, false, true);
  collect(&LayerResult::own_error, false, false);
  // Mutant (backward): dh0 of sequence n is the one of sequence n-1.
  if (mutant == kVarlenDh0FromPrevious && p.varlen)
    for (TensorMap<double>* m : {&r.values, &r.lower, &r.upper})
      if (const auto it = m->find("dh0"); it != m->end() && p.sequences > 1) {
        Tensor<double>& d = it->second;
        const std::int64_t row = d.numel() / p.sequences;
        for (std::int64_t s = p.sequences - 1; s >= 1; --s)
          std::copy_n(d.data.begin() + (s - 1) * row, row, d.data.begin() + s * row);
      }
  return r;
}

}  // namespace ttr
