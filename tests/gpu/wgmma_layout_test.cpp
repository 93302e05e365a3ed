// The Hopper state passes' shared-memory operands (gpu/family/delta_state_wgmma_layout.hpp)
// against the PTX ISA's canonical layouts, on the CPU: for every wgmma step of the
// passes, the address the tensor cores read for operand element (m, k), computed from
// the 64-bit descriptor alone as the ISA defines it, must be where the kernels stored
// that element. The model (PTX ISA 9.7.15.5.1.2, "Canonical Layouts", T = 8 bf16 per
// 16 bytes, S the swizzle's bytes, strides in elements):
//   K-major   ((8, m), (T, 2k)) : ((S/2, SBO), (1, T))
//   MN-major  ((T, S/16, m), (8, k)) : ((1, T, LBO), (S/2, SBO))
// then CuTe's Swizzle<log2(S/16), 4, 3> on the byte address. Written here from the ISA,
// apart from the kernels' own swizzle; a wrong stride, swizzle mode, start or
// orientation moves elements and fails (the last test shows that it does).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "gpu/family/delta_state_wgmma_layout.hpp"
#include "gpu/family/delta_wy_wgmma_layout.hpp"

namespace ttr {
namespace {

using namespace gpu::state_wgmma;
using gpu::wgmma::encode;

constexpr unsigned kBase = 0x6000;  // some 1024-aligned shared address of the tiles

// The byte address of element (mn, k) (mn < 64, or < 32 for a B of N = 32; k < 16) of
// the operand a descriptor describes, read in the orientation of `mn_major` (the tnsp bit).
unsigned model_address(std::uint64_t desc, bool mn_major, int mn, int k) {
  const unsigned start = static_cast<unsigned>(desc & 0x3FFF) << 4;
  const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3FFF) << 4;
  const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  const unsigned S = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  EXPECT_NE(S, 0u) << "swizzle mode " << mode;
  const unsigned T = 8, half = S / 2;  // elements of 16 bytes; of a swizzle row
  unsigned e;
  if (!mn_major) {
    e = (mn % 8) * half + (mn / 8) * (sbo / 2) + (k % T) + T * (k / T);
  } else {
    const unsigned i0 = mn % T, i1 = (mn / T) % (S / 16), i2 = mn / half;
    e = i0 + T * i1 + i2 * (lbo / 2) + (k % 8) * half + (k / 8) * (sbo / 2);
  }
  const unsigned x = start + 2 * e;
  unsigned bits = 0;
  for (unsigned s = S / 16; s > 1; s /= 2) ++bits;  // log2(S/16)
  const unsigned mask = ((1u << bits) - 1) << 7;   // Swizzle<bits, 4, 3>: bits [7, 7+bits) onto [4, 4+bits)
  return x ^ ((x & mask) >> 3);
}

// Every (m, k) of the step lands where `placed(m, k)` says the kernels put it; returns
// the number of elements that do not (reported, at most 3 of them, unless `quiet`).
template <class Placed>
int mismatches(const Operand& op, int mn_extent, Placed placed, const std::string& what, bool quiet = false) {
  const std::uint64_t d = encode(kBase + op.start, op);
  int bad = 0;
  for (int mn = 0; mn < mn_extent; ++mn)
    for (int k = 0; k < 16; ++k) {
      const unsigned want = kBase + placed(mn, k), got = model_address(d, op.mn_major, mn, k);
      if (got != want && bad++ < 3 && !quiet)
        ADD_FAILURE() << what << " element (" << mn << ", " << k << "): read at " << got << ", stored at " << want;
    }
  return bad;
}

TEST(WgmmaLayout, ForwardStatePassOperandsAreReadWhereStored) {
  for (int kk = 0; kk < kK / 16; ++kk) {  // Δacc = W h_n: A[token][key], B[key][column]
    EXPECT_EQ(0, mismatches(keys_along_k(kk), 64, [&](int m, int k) { return key_tile(m, 16 * kk + k); },
                            "W (K-major) step " + std::to_string(kk)));
    EXPECT_EQ(0, mismatches(cols_along_n(kk), kBV, [&](int n, int k) { return col_tile(16 * kk + k, n); },
                            "h_n (N-major) step " + std::to_string(kk)));
  }
  for (int mt = 0; mt < kK / 64; ++mt)  // S += (w ⊙ e^{…})ᵀ Δ: A[key][token] = WD[token][key], B[token][column]
    for (int kk = 0; kk < 4; ++kk) {
      EXPECT_EQ(0, mismatches(keys_along_m(mt, kk), 64, [&](int m, int k) { return key_tile(16 * kk + k, 64 * mt + m); },
                              "WD^T (M-major) half " + std::to_string(mt) + " step " + std::to_string(kk)));
      EXPECT_EQ(0, mismatches(cols_along_n(kk), kBV, [&](int n, int k) { return col_tile(16 * kk + k, n); },
                              "Delta (N-major) step " + std::to_string(kk)));
    }
}

TEST(WgmmaLayout, BackwardStatePassScoresAreReadTransposed) {
  for (int kk = 0; kk < 4; ++kk)  // Mᵀ dO: A[s][t] = M[t][s]
    EXPECT_EQ(0, mismatches(scores_along_m(kk), 64, [&](int m, int k) { return score_tile(16 * kk + k, m); },
                            "M^T (M-major) step " + std::to_string(kk)));
}

// The wy stage's operands (delta_wy_wgmma_layout.hpp): each warpgroup's block of N, for
// both warpgroups, every k step. Its N = 32 blocks of an N-major score tile start 64
// bytes into the swizzle rows; the ISA's model reads them where they are stored.
TEST(WgmmaLayout, WyStageOperandsAreReadWhereStored) {
  using namespace gpu::wy_wgmma;
  for (int kk = 0; kk < 4; ++kk) {
    const std::string step = " step " + std::to_string(kk);
    EXPECT_EQ(0, mismatches(scores_along_k(kk), 64, [&](int m, int k) { return score_tile(m, 16 * kk + k); },
                            "(T^T dT), E as A (K-major)" + step));
    for (int h = 0; h < 2; ++h) {
      const std::string half = " block " + std::to_string(h) + step;
      // dΔ, dWy, W, K as B[s][d] (N-major, 64 columns a warpgroup).
      EXPECT_EQ(0, mismatches(keys_along_n(h, kk), 64, [&](int n, int k) { return key_tile(16 * kk + k, 64 * h + n); },
                              "key tile as N-major B" + half));
      // dT (and T for the mutant) as B[r][s] (N-major, 32 columns a warpgroup).
      EXPECT_EQ(0, mismatches(scores_along_n(h, kk), 32, [&](int n, int k) { return score_tile(16 * kk + k, 32 * h + n); },
                              "score tile as N-major B" + half));
      // T as B[r][s] = T[s][r] (K-major), and dTᵀ for the mutant.
      EXPECT_EQ(0, mismatches(scores_along_k(kk, h), 32, [&](int n, int k) { return score_tile(32 * h + n, 16 * kk + k); },
                              "score tile as K-major B" + half));
    }
  }
  for (int kk = 0; kk < kK / 16; ++kk)
    for (int h = 0; h < 2; ++h)  // bvᵀ, bkᵀ, Wᵀ as B[d][s] (K-major, 32 rows a warpgroup)
      EXPECT_EQ(0, mismatches(keys_along_k_rows(h, kk), 32, [&](int n, int k) { return key_tile(32 * h + n, 16 * kk + k); },
                              "key tile as K-major B block " + std::to_string(h) + " step " + std::to_string(kk)));
}

// The copies' shortcut: a thread's rows r + 8i (key and column tiles) or r + 16i (the
// scores) keep its swizzled chunk, so it steps by whole rows; and no two elements of a
// tile share a byte.
TEST(WgmmaLayout, TilesAreBijectiveAndRowStepsKeepTheChunk) {
  std::set<unsigned> keys, cols, scores;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < kK; ++c) {
      EXPECT_TRUE(keys.insert(key_tile(r, c)).second) << r << " " << c;
      if (r + 8 < 64) {
        EXPECT_EQ(key_tile(r + 8, c), key_tile(r, c) + 8 * kRowW) << r << " " << c;
      }
    }
  for (int r = 0; r < kK; ++r)
    for (int c = 0; c < kBV; ++c) EXPECT_TRUE(cols.insert(col_tile(r, c)).second) << r << " " << c;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      EXPECT_TRUE(scores.insert(score_tile(r, c)).second) << r << " " << c;
      if (r + 16 < 64) {
        EXPECT_EQ(score_tile(r + 16, c), score_tile(r, c) + 16 * kRowM) << r << " " << c;
      }
    }
  EXPECT_EQ(*keys.rbegin(), static_cast<unsigned>(kTileW) - 2);  // the last element's first byte: no gaps
  EXPECT_EQ(*cols.rbegin(), static_cast<unsigned>(kK * kRowB) - 2);
  EXPECT_EQ(*scores.rbegin(), static_cast<unsigned>(64 * kRowM) - 2);
}

// The check has teeth: a descriptor with one field wrong reads elsewhere.
TEST(WgmmaLayout, AWrongDescriptorIsCaught) {
  const auto keys = [](int m, int k) { return key_tile(16 + k, 64 + m); };  // keys_along_m(1, 1)
  Operand op = keys_along_m(1, 1);
  EXPECT_EQ(0, mismatches(op, 64, keys, "as stored"));
  op.sbo /= 2;
  EXPECT_GT(mismatches(op, 64, keys, "SBO halved", true), 0);
  op = keys_along_m(1, 1), op.mn_major = false;
  EXPECT_GT(mismatches(op, 64, keys, "K-major read", true), 0);
  op = keys_along_m(1, 1), op.row = 64;
  EXPECT_GT(mismatches(op, 64, keys, "64-byte swizzle", true), 0);
  op = keys_along_m(1, 1), op.lbo = 0;  // LBO unused within one 64-key half: no change
  EXPECT_EQ(0, mismatches(op, 64, keys, "LBO"));
  op = cols_along_n(2), op.start += 32;
  EXPECT_GT(mismatches(op, kBV, [](int n, int k) { return col_tile(32 + k, n); }, "start", true), 0);
}

}  // namespace
}  // namespace ttr
