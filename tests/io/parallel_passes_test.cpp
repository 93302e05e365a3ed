// The passes over whole tensors on several threads (oracles/threads.hpp): widening
// an input file to float64 and checking its values (validate_inputs, the check's
// candidate and oracle files), narrowing an oracle back (to_file), counting its
// non-finite values. Each must give what the serial loop gives — the same bits, the
// same first offending element in its error line — whatever the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "oracles/threads.hpp"
#include "oracles/validate.hpp"

namespace ttr::test {
namespace {

constexpr std::size_t kLarge = 3 * kTensorPassGrain + 5;  // three or more blocks at 3+ threads
const int kThreadCounts[] = {1, 2, 3, 8};

// Random bytes of n elements of a dtype: every bit pattern, NaNs and infinities included.
io::RawTensor random_raw(io::DType d, std::size_t n, std::uint64_t seed) {
  io::RawTensor t{d, {static_cast<std::int64_t>(n)}, std::vector<std::uint8_t>(n * io::dtype_size(d))};
  std::mt19937_64 g(seed);
  for (auto& b : t.data) b = static_cast<std::uint8_t>(g());
  return t;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

TEST(ParallelPasses, BlocksCoverTheRangeOnceAtEveryThreadCount) {
  for (int threads : kThreadCounts)
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, kTensorPassGrain - 1, 2 * kTensorPassGrain + 3, kLarge}) {
      const SliceThreadsScope scope(threads);
      std::vector<int> seen(n, 0);
      parallel_blocks(n, kTensorPassGrain, [&](std::size_t b, std::size_t e) {
        ASSERT_LE(b, e);
        for (std::size_t i = b; i < e; ++i) ++seen[i];
      });
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(n))
          << "n = " << n << ", " << threads << " threads";
    }
}

TEST(ParallelPasses, TheLowestBlocksExceptionIsRethrown) {
  const SliceThreadsScope scope(4);
  // Every block but the first throws its own start: the second block's must come out.
  std::mutex lock;
  std::vector<std::size_t> starts;
  parallel_blocks(kLarge, kTensorPassGrain, [&](std::size_t b, std::size_t) {
    const std::lock_guard<std::mutex> hold(lock);
    starts.push_back(b);
  });
  std::sort(starts.begin(), starts.end());
  ASSERT_GE(starts.size(), 3u);  // the pass was split
  const std::size_t second = starts[1];
  try {
    parallel_blocks(kLarge, kTensorPassGrain, [](std::size_t b, std::size_t) {
      if (b > 0) throw std::runtime_error(std::to_string(b));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), std::to_string(second));
  }
}

TEST(ParallelPasses, FirstWhereIsTheSerialFirstHit) {
  std::vector<double> v(kLarge, 1.0);
  const auto is_hit = [](double x) { return x < 0.0; };
  // Hits nowhere, at the ends, and in several blocks at once (the lowest must win
  // even when a later block finds its hit first).
  const std::vector<std::vector<std::size_t>> placements = {
      {}, {0}, {kLarge - 1}, {kLarge - 1, 2 * kTensorPassGrain + 1, kTensorPassGrain + 7}, {5, 6, kLarge / 2}};
  for (const auto& hits : placements) {
    std::fill(v.begin(), v.end(), 1.0);
    for (std::size_t i : hits) v[i] = -1.0;
    const std::size_t want = static_cast<std::size_t>(std::find_if(v.begin(), v.end(), is_hit) - v.begin());
    for (int threads : kThreadCounts) {
      const SliceThreadsScope scope(threads);
      EXPECT_EQ(first_where(v, is_hit), want) << threads << " threads";
    }
  }
}

TEST(ParallelPasses, WidenIsToF64BitForBit) {
  std::uint64_t seed = 1;
  for (io::DType d : {io::DType::F64, io::DType::F32, io::DType::BF16, io::DType::F16}) {
    const io::RawTensor t = random_raw(d, kLarge, seed++);
    const std::vector<double> want = io::to_f64(t, "x");
    for (int threads : kThreadCounts) {
      const SliceThreadsScope scope(threads);
      EXPECT_TRUE(same_bits(widen(t, "x"), want)) << io::dtype_name(d) << ", " << threads << " threads";
    }
  }
}

TEST(ParallelPasses, WidenFailsAtTheSameElementAsToF64) {
  // I64 values beyond 2^53 are refused: two of them, in different blocks.
  io::RawTensor t{io::DType::I64, {static_cast<std::int64_t>(kLarge)}, std::vector<std::uint8_t>(kLarge * 8, 0)};
  for (std::size_t i : {kLarge - 2, kTensorPassGrain + 3}) {
    const std::int64_t big = (std::int64_t{1} << 60) + 1;
    std::memcpy(t.data.data() + i * 8, &big, 8);
  }
  std::string want;
  try {
    (void)io::to_f64(t, "cu");
  } catch (const std::exception& e) {
    want = e.what();
  }
  ASSERT_NE(want.find(std::to_string(kTensorPassGrain + 3)), std::string::npos) << want;
  for (int threads : kThreadCounts) {
    const SliceThreadsScope scope(threads);
    try {
      (void)widen(t, "cu");
      ADD_FAILURE() << "no error at " << threads << " threads";
    } catch (const std::exception& e) {
      EXPECT_EQ(std::string(e.what()), want) << threads << " threads";
    }
  }
}

// validate_inputs names the first bad element in index order: a NaN and an
// out-of-range β in later blocks do not hide an earlier one.
TEST(ParallelPasses, ValidationNamesTheFirstBadElement) {
  const LayerSpec& spec = find_layer("gated_delta_rule").spec;
  const std::int64_t B = 1, T = 1024, H = 4, K = 64, V = 64;  // q: 262 144 elements, two blocks or more
  io::TensorFile f;
  const auto put = [&](const std::string& name, std::vector<std::int64_t> shape, double value) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    f.tensors[name] = io::from_f64(std::vector<double>(static_cast<std::size_t>(n), value), shape, io::DType::F32);
  };
  put("q", {B, T, H, K}, 0.5);
  put("k", {B, T, H, K}, 0.25);
  put("v", {B, T, H, V}, 1.0);
  put("g", {B, T, H}, -0.5);
  put("beta", {B, T, H}, 0.5);
  const auto set = [&](const std::string& name, std::size_t i, float x) {
    std::memcpy(f.tensors[name].data.data() + i * 4, &x, 4);
  };
  set("q", 250'000, NAN);                 // [0,976,2,16]
  set("q", 200'000, INFINITY);            // [0,781,1,0]: the first
  set("beta", 4000, 2.0f);                // outside [0, 1]: beta is checked after q
  // The error line at every thread count.
  const auto errors = [&] {
    std::vector<std::string> out;
    for (int threads : kThreadCounts) {
      const SliceThreadsScope scope(threads);
      try {
        (void)validate_inputs(spec, f, "in.safetensors");
        out.push_back("accepted at " + std::to_string(threads) + " threads");
      } catch (const InputError& e) {
        out.push_back(e.what());
      }
    }
    return out;
  };
  for (const auto& e : errors())
    EXPECT_EQ(e, "in.safetensors: tensor 'q': element [0,781,1,0] is +Inf; inputs must be finite");
  set("q", 250'000, 0.5f);
  set("q", 200'000, 0.5f);
  for (const auto& e : errors())
    EXPECT_EQ(e, "in.safetensors: tensor 'beta': element [0,1000,0] = 2 is outside [0, 1] (write strength β_t)");
}

// to_file narrows on every core: the bytes from_f64 gives, in every dtype, and
// cu_seqlens as I64 whatever the dtype of the rest.
TEST(ParallelPasses, ToFileIsFromF64ByteForByte) {
  TensorMap<double> m;
  m["o"] = Tensor<double>({static_cast<std::int64_t>(kLarge)}, 0.0);
  std::mt19937_64 g(11);
  std::uniform_real_distribution<double> u(-1e5, 1e5);
  for (double& x : m["o"].data) x = u(g);
  m["o"].data[17] = NAN;
  m["o"].data[kLarge - 1] = -INFINITY;
  m["o"].data[kTensorPassGrain] = 1e300;  // beyond every narrow format: inf there
  m["cu_seqlens"] = Tensor<double>({3}, 0.0);
  m["cu_seqlens"].data = {0, 5, 9};
  for (io::DType d : {io::DType::F64, io::DType::F32, io::DType::BF16, io::DType::F16})
    for (int threads : kThreadCounts) {
      const SliceThreadsScope scope(threads);
      const io::TensorFile f = to_file(m, d, {});
      EXPECT_TRUE(f.tensors.at("o").data == io::from_f64(m["o"].data, m["o"].shape, d).data)
          << io::dtype_name(d) << ", " << threads << " threads";
      EXPECT_EQ(f.tensors.at("o").dtype, d);
      EXPECT_EQ(f.tensors.at("o").shape, m["o"].shape);
      EXPECT_TRUE(f.tensors.at("cu_seqlens").data ==
                  io::from_f64(m["cu_seqlens"].data, {3}, io::DType::I64).data);
    }
}

// A tensor whose values do not fill its shape is a programming error, as for from_f64:
// no file with a wrong byte count.
TEST(ParallelPasses, ToFileRefusesValuesThatDoNotFillTheShape) {
  TensorMap<double> m;
  m["o"] = Tensor<double>({2, 3}, 1.0);
  m["o"].data.pop_back();
  EXPECT_THROW((void)to_file(m, io::DType::F32, {}), std::invalid_argument);
}

}  // namespace
}  // namespace ttr::test
