// Prefix scans over an associative, not necessarily commutative, composition:
// the parallel structure of KLA-K Cor. 1.1 (Möbius matrices) and Cor. 2.1
// (affine maps), and of the gated linear layers (affine pairs (Diag(d), k vᵀ)).
//
// Given x_0 … x_{n−1} and combine(earlier, later) = later ∘ earlier, both scans
// below replace x_i by the inclusive prefix x_0 ⊕ x_1 ⊕ … ⊕ x_i (⊕ = combine, the
// left operand earlier in the sequence). In exact arithmetic every bracketing
// gives the same prefix; in floating point the bracketing is part of the
// definition of a low-precision form, so both scans fix it:
//
//  * blelloch_inclusive_scan — Blelloch's work-efficient scan (G. E. Blelloch,
//    "Prefix sums and their applications", 1990): an up-sweep that builds the
//    aggregates of the blocks [j·2d, (j+1)·2d) of a tree over m = bit_ceil(n)
//    leaves, then a down-sweep that hands every node the exclusive prefix of its
//    block (root ← identity; left child ← parent's prefix P; right child ← P ⊕ L,
//    L the left child's aggregate). Positions ≥ n are padding that stands for the
//    identity: a composition with a block made only of padding is never formed
//    (the value is copied or moved instead), and neither is P ⊕ L for the
//    leftmost path (P = identity). The inclusive prefix of i is then the
//    exclusive prefix of i + 1, and the root's aggregate for i = n − 1.
//  * chunked_inclusive_scan — the two-level form of a chunked kernel: chunks of
//    C tokens (the last may be shorter) scanned sequentially left to right, the
//    chunk aggregates scanned by Blelloch, and each chunk's carry-in (the
//    inclusive prefix of the previous aggregates) composed onto its local
//    prefixes: x_i ← carry_c ⊕ (x_{c·C} ⊕ … ⊕ x_i).
//
// `store(e)` is called on every element the scan writes to memory between its
// levels: each composition of the Blelloch tree (every up- and down-sweep
// result) and, in the chunked scan, each chunk aggregate. An arithmetic policy
// narrows there what a kernel stores in 16 bits; it is a no-op by default.
//
// combine is called either as combine(earlier, later, out) — writing into an
// `out` that aliases neither operand (allocation-free for MPFR elements) — or,
// when that is not callable, as out = combine(earlier, later). Elements must be
// swappable (ADL swap or std::swap): moves and swaps never change a value.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/core/mutant.hpp"

namespace ttr {

// Buffers a scan needs besides the sequence, kept between calls so that
// repeated scans (one per batch and head) reuse their allocations.
template <class E>
struct ScanWorkspace {
  E tmp, total;              // one composition result; the Blelloch root
  std::vector<E> padding;    // tree nodes n … bit_ceil(n)−1
  std::vector<E> aggregates; // chunk aggregates, then their prefixes (carries)
};

struct NoStore {
  template <class E>
  void operator()(E&) const {}
};

// How a form organises its scan: one Blelloch tree over the whole sequence
// (chunk == 0) or the two-level chunked scan with chunks of `chunk` tokens.
struct ScanPlan {
  int chunk = 0;
  static ScanPlan whole_sequence() { return {0}; }
  static ScanPlan chunked(int c) {
    if (c < 1) throw std::invalid_argument("chunk size must be >= 1");
    return {c};
  }
};

namespace scan_detail {

template <class E, class Combine>
void compose_into(Combine& combine, const E& earlier, const E& later, E& out) {
  if constexpr (std::is_invocable_v<Combine&, const E&, const E&, E&>)
    combine(earlier, later, out);
  else
    out = combine(earlier, later);
}

// later ← earlier ⊕ later, through the scratch element.
template <class E, class Combine, class Store>
void compose_onto(Combine& combine, Store& store, const E& earlier, E& later, E& tmp) {
  using std::swap;
  compose_into(combine, earlier, later, tmp);
  store(tmp);
  swap(later, tmp);
}

// Tree node i: a sequence element for i < n, a padding slot above.
template <class E>
struct Tree {
  std::span<E> xs;
  std::vector<E>& padding;
  E& operator[](std::size_t i) { return i < xs.size() ? xs[i] : padding[i - xs.size()]; }
};

}  // namespace scan_detail

// Inclusive prefix compositions of xs, in place (see the file comment).
template <class E, class Combine, class Store = NoStore>
void blelloch_inclusive_scan(std::span<E> xs, const E& identity, Combine&& combine, Store&& store,
                             ScanWorkspace<E>& work) {
  using std::swap;
  const std::size_t n = xs.size();
  if (n == 0) return;
  const std::size_t m = std::bit_ceil(n);
  work.tmp = identity;
  work.total = identity;
  if (work.padding.size() < m - n) work.padding.resize(m - n, identity);
  scan_detail::Tree<E> node{xs, work.padding};
  // A block [first, …) holds a sequence element iff first < n.
  const auto real = [n](std::size_t first) { return first < n; };

  // Up-sweep: node r becomes the aggregate of its block [r − 2d + 1, r].
  for (std::size_t d = 1; d < m; d *= 2)
    for (std::size_t r = 2 * d - 1; r < m; r += 2 * d) {
      const std::size_t l = r - d;
      if (!real(r + 1 - 2 * d)) continue;  // padding only: never read
      if (!real(l + 1))
        node[r] = node[l];  // right half is padding: L ⊕ identity = L
      else
        scan_detail::compose_onto(combine, store, node[l], node[r], work.tmp);
    }

  // Down-sweep: node r receives the exclusive prefix P of its block.
  // mutant scan-operands-swapped: the down-sweep composes L ⊕ P (the block's own
  // aggregate taken as the earlier operand), the textbook scan written for a
  // commutative + and reused for a non-commutative composition. Invisible where
  // the composition commutes (affine maps with all-one factors: linear_attn).
  const bool swapped = mutated(Mutant::scan_operands_swapped);
  swap(work.total, node[m - 1]);  // root ← identity, its aggregate kept
  for (std::size_t d = m / 2; d >= 1; d /= 2)
    for (std::size_t r = 2 * d - 1; r < m; r += 2 * d) {
      const std::size_t l = r - d, first = r + 1 - 2 * d;
      if (!real(first)) continue;
      swap(node[l], node[r]);                   // left ← P, right ← L
      if (!real(l + 1) || first == 0) continue;  // right is padding, or P = identity: right = L
      if (swapped)
        scan_detail::compose_into(combine, node[r], node[l], work.tmp);  // L ⊕ P
      else
        scan_detail::compose_into(combine, node[l], node[r], work.tmp);  // P ⊕ L
      store(work.tmp);
      swap(node[r], work.tmp);
    }

  // Inclusive prefix of i = exclusive prefix of i + 1; of n − 1 = the root aggregate.
  for (std::size_t i = 0; i + 1 < n; ++i) swap(xs[i], xs[i + 1]);
  swap(xs[n - 1], work.total);
}

// Two-level chunked inclusive scan, in place (see the file comment).
template <class E, class Combine, class Store = NoStore>
void chunked_inclusive_scan(std::span<E> xs, std::size_t chunk, const E& identity, Combine&& combine, Store&& store,
                            ScanWorkspace<E>& work) {
  if (chunk < 1) throw std::invalid_argument("chunked_inclusive_scan: chunk size must be >= 1");
  const std::size_t n = xs.size();
  if (n == 0) return;
  const std::size_t chunks = (n + chunk - 1) / chunk;
  const auto first = [chunk](std::size_t c) { return c * chunk; };
  const auto end = [&](std::size_t c) { return std::min(n, (c + 1) * chunk); };
  const NoStore in_registers;
  work.tmp = identity;

  // Level 1: sequential prefixes inside each chunk (registers, nothing stored).
  for (std::size_t c = 0; c < chunks; ++c)
    for (std::size_t i = first(c) + 1; i < end(c); ++i)
      scan_detail::compose_onto(combine, in_registers, xs[i - 1], xs[i], work.tmp);

  // Level 2: the chunk aggregates, written to memory, scanned by Blelloch.
  if (work.aggregates.size() < chunks) work.aggregates.resize(chunks, identity);
  for (std::size_t c = 0; c < chunks; ++c) {
    work.aggregates[c] = xs[end(c) - 1];
    store(work.aggregates[c]);
  }
  const std::span<E> carries(work.aggregates.data(), chunks);
  blelloch_inclusive_scan(carries, identity, combine, store, work);

  // Level 3: chunk c's carry-in (prefix of the aggregates before it) onto its local prefixes.
  // mutant scan-carry-inclusive: chunk c takes the inclusive prefix of the
  // aggregates (carries[c], its own aggregate included) as its carry-in instead of
  // the exclusive one (carries[c − 1]): the chunk's own tokens are applied twice.
  const std::size_t own = mutated(Mutant::scan_carry_inclusive) ? 1 : 0;
  for (std::size_t c = 1; c < chunks; ++c)
    for (std::size_t i = first(c); i < end(c); ++i)
      scan_detail::compose_onto(combine, in_registers, carries[c - 1 + own], xs[i], work.tmp);
}

// The scan `plan` names.
template <class E, class Combine, class Store = NoStore>
void prefix_scan(std::span<E> xs, const ScanPlan& plan, const E& identity, Combine&& combine, Store&& store,
                 ScanWorkspace<E>& work) {
  if (plan.chunk == 0)
    blelloch_inclusive_scan(xs, identity, combine, store, work);
  else
    chunked_inclusive_scan(xs, static_cast<std::size_t>(plan.chunk), identity, combine, store, work);
}

// Conveniences for a whole vector with a one-off workspace and nothing stored.
template <class E, class Combine>
void blelloch_inclusive_scan(std::vector<E>& xs, const E& identity, Combine&& combine) {
  ScanWorkspace<E> work;
  blelloch_inclusive_scan(std::span<E>(xs), identity, combine, NoStore{}, work);
}

template <class E, class Combine>
void chunked_inclusive_scan(std::vector<E>& xs, std::size_t chunk, const E& identity, Combine&& combine) {
  ScanWorkspace<E> work;
  chunked_inclusive_scan(std::span<E>(xs), chunk, identity, combine, NoStore{}, work);
}

}  // namespace ttr
