// The prefix scans of reference/scan/blelloch.hpp against the sequential left fold
// x_0 ⊕ x_1 ⊕ … ⊕ x_i, on elements whose composition is associative but not
// commutative, so that any reordering or misplaced operand shows:
//  * words of the free monoid (concatenation; identity the empty word): the
//    prefix of i is exactly the word 0 1 … i, whatever the bracketing;
//  * 2×2 matrices over Z/2^64 (wrapping unsigned arithmetic is an exact ring, so
//    every bracketing gives bit-identical products);
// for every n in 0 … 70 and chunk sizes {1, 2, 3, 16, 64, n, n + 5}. Also: the
// identity is never an operand (padding and the leftmost path are moved, not
// composed: an inf entry times the identity's 0 would give NaN); the work bound
// of Blelloch's scan (fewer than 2n compositions) and that every composition it
// forms passes through the store hook; and that the chunked scan with C ≥ n is
// the left fold itself, bit for bit, for a non-associative floating-point product.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/scan/blelloch.hpp"

namespace {

using Word = std::vector<int>;
using Mat = std::array<std::uint64_t, 4>;  // [[a, b], [c, d]] over Z/2^64

Word concat(const Word& earlier, const Word& later) {
  Word w = earlier;
  w.insert(w.end(), later.begin(), later.end());
  return w;
}

// later · earlier (the map `later ∘ earlier`): not commutative.
Mat mat_compose(const Mat& e, const Mat& l) {
  return {l[0] * e[0] + l[1] * e[2], l[0] * e[1] + l[1] * e[3], l[2] * e[0] + l[3] * e[2], l[2] * e[1] + l[3] * e[3]};
}
const Mat kMatIdentity = {1, 0, 0, 1};

std::vector<Mat> random_mats(std::size_t n, std::uint64_t seed) {
  std::vector<Mat> xs(n);
  for (auto& m : xs)
    for (auto& e : m) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      e = seed >> 7;
    }
  return xs;
}

template <class E, class Combine>
std::vector<E> left_fold_prefixes(const std::vector<E>& xs, Combine combine) {
  std::vector<E> out = xs;
  for (std::size_t i = 1; i < out.size(); ++i) out[i] = combine(out[i - 1], out[i]);
  return out;
}

std::vector<std::size_t> chunk_sizes(std::size_t n) {
  std::vector<std::size_t> cs = {1, 2, 3, 16, 64, n + 5};
  if (n > 0) cs.push_back(n);
  return cs;
}

std::vector<Word> letters(std::size_t n) {
  std::vector<Word> xs(n);
  for (std::size_t i = 0; i < n; ++i) xs[i] = {static_cast<int>(i)};
  return xs;
}

TEST(BlellochScan, WordPrefixesForEveryLengthUpTo70) {
  for (std::size_t n = 0; n <= 70; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<Word> want = left_fold_prefixes(letters(n), concat);
    std::vector<Word> xs = letters(n);
    ttr::blelloch_inclusive_scan(xs, Word{}, concat);
    EXPECT_EQ(xs, want);
    for (std::size_t c : chunk_sizes(n)) {
      std::vector<Word> ys = letters(n);
      ttr::chunked_inclusive_scan(ys, c, Word{}, concat);
      EXPECT_EQ(ys, want) << "chunk " << c;
    }
  }
}

TEST(BlellochScan, MatrixPrefixesForEveryLengthUpTo70) {
  for (std::size_t n = 0; n <= 70; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<Mat> leaves = random_mats(n, 1000 + n);
    const std::vector<Mat> want = left_fold_prefixes(leaves, mat_compose);
    std::vector<Mat> xs = leaves;
    ttr::blelloch_inclusive_scan(xs, kMatIdentity, mat_compose);
    EXPECT_EQ(xs, want);
    for (std::size_t c : chunk_sizes(n)) {
      std::vector<Mat> ys = leaves;
      ttr::chunked_inclusive_scan(ys, c, kMatIdentity, mat_compose);
      EXPECT_EQ(ys, want) << "chunk " << c;
    }
  }
}

// The three-argument (allocation-free) combine form gives the same prefixes.
TEST(BlellochScan, OutParameterCombineEqualsReturningCombine) {
  const auto into = [](const Mat& e, const Mat& l, Mat& out) { out = mat_compose(e, l); };
  for (std::size_t n : {1u, 5u, 33u, 64u}) {
    const std::vector<Mat> leaves = random_mats(n, 7 * n);
    const std::vector<Mat> want = left_fold_prefixes(leaves, mat_compose);
    ttr::ScanWorkspace<Mat> work;
    std::vector<Mat> xs = leaves;
    ttr::blelloch_inclusive_scan(std::span<Mat>(xs), kMatIdentity, into, ttr::NoStore{}, work);
    EXPECT_EQ(xs, want) << n;
    xs = leaves;
    ttr::chunked_inclusive_scan(std::span<Mat>(xs), 3, kMatIdentity, into, ttr::NoStore{}, work);
    EXPECT_EQ(xs, want) << n;
  }
}

// Counts compositions and stores; fails the test if the identity is ever an operand.
struct Counting {
  int combines = 0, stores = 0;
  auto combine() {
    return [this](const Word& e, const Word& l) {
      EXPECT_FALSE(e.empty() || l.empty()) << "the identity was composed";
      ++combines;
      return concat(e, l);
    };
  }
  auto store() {
    return [this](Word&) { ++stores; };
  }
};

TEST(BlellochScan, NeverComposesTheIdentityAndStoresEveryComposition) {
  for (std::size_t n = 1; n <= 70; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Counting k;
    ttr::ScanWorkspace<Word> work;
    std::vector<Word> xs = letters(n);
    ttr::blelloch_inclusive_scan(std::span<Word>(xs), Word{}, k.combine(), k.store(), work);
    EXPECT_LT(k.combines, static_cast<int>(2 * n));  // work-efficient: O(n), not O(n log n)
    EXPECT_EQ(k.stores, k.combines);
    EXPECT_EQ(xs.back().size(), n);
  }
}

// Chunked: n − #chunks compositions in level 1, then per chunk one aggregate store,
// the Blelloch scan over the aggregates (each composition stored), and the carries
// composed onto every token after the first chunk (registers: not stored).
TEST(BlellochScan, ChunkedScanStoresAggregatesAndCarriesOnly) {
  for (std::size_t n : {1u, 2u, 7u, 37u, 70u})
    for (std::size_t c : chunk_sizes(n)) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", chunk " + std::to_string(c));
      const std::size_t chunks = (n + c - 1) / c;
      Counting inner;  // the Blelloch scan of the aggregates alone
      {
        ttr::ScanWorkspace<Word> work;
        std::vector<Word> aggs = letters(chunks);
        ttr::blelloch_inclusive_scan(std::span<Word>(aggs), Word{}, inner.combine(), inner.store(), work);
      }
      Counting k;
      ttr::ScanWorkspace<Word> work;
      std::vector<Word> xs = letters(n);
      ttr::chunked_inclusive_scan(std::span<Word>(xs), c, Word{}, k.combine(), k.store(), work);
      const std::size_t carried = n - std::min(n, c);
      EXPECT_EQ(k.stores, static_cast<int>(chunks) + inner.stores);
      EXPECT_EQ(k.combines, static_cast<int>(n - chunks) + inner.combines + static_cast<int>(carried));
      EXPECT_EQ(xs, left_fold_prefixes(letters(n), concat));
    }
}

// In doubles the product is not associative; with one chunk (C ≥ n) the chunked
// scan is the left fold, so the results agree bit for bit.
TEST(BlellochScan, OneChunkIsTheLeftFoldBitForBit) {
  using DMat = std::array<double, 4>;
  const auto compose = [](const DMat& e, const DMat& l) {
    return DMat{l[0] * e[0] + l[1] * e[2], l[0] * e[1] + l[1] * e[3], l[2] * e[0] + l[3] * e[2],
                l[2] * e[1] + l[3] * e[3]};
  };
  std::vector<DMat> leaves(45);
  double x = 0.1;
  for (auto& m : leaves)
    for (auto& e : m) e = (x = std::fmod(x * 3.7 + 0.31, 1.0)) - 0.4;
  const std::vector<DMat> want = left_fold_prefixes(leaves, compose);
  for (std::size_t c : {45u, 46u, 1000u}) {
    std::vector<DMat> xs = leaves;
    ttr::chunked_inclusive_scan(xs, c, DMat{1, 0, 0, 1}, compose);
    EXPECT_EQ(xs, want) << "chunk " << c;
  }
}

TEST(BlellochScan, RejectsChunkSizeZero) {
  std::vector<Word> xs = letters(3);
  EXPECT_THROW(ttr::chunked_inclusive_scan(xs, 0, Word{}, concat), std::invalid_argument);
  EXPECT_THROW(ttr::ScanPlan::chunked(0), std::invalid_argument);
}

RC_GTEST_PROP(BlellochScanProperty, BothScansEqualTheLeftFold, ()) {
  const auto n = *rc::gen::inRange<std::size_t>(0, 300);
  const auto c = *rc::gen::inRange<std::size_t>(1, 320);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  const std::vector<Mat> leaves = random_mats(n, seed);
  const std::vector<Mat> want = left_fold_prefixes(leaves, mat_compose);
  std::vector<Mat> xs = leaves;
  ttr::blelloch_inclusive_scan(xs, kMatIdentity, mat_compose);
  RC_ASSERT(xs == want);
  xs = leaves;
  ttr::chunked_inclusive_scan(xs, c, kMatIdentity, mat_compose);
  RC_ASSERT(xs == want);
}

}  // namespace
