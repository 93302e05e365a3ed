// Shared by the fuzz harnesses: what counts as a finding, and a reader of the
// fuzzer's bytes for the structured harness.
//
// A harness returns normally for input the code rejects as a user error
// (ttr::InputError: one clear line, exit 2 in the CLI) and for input it accepts
// and handles correctly. Everything else is a finding: a sanitizer report, an
// uncaught exception of another type (std::out_of_range from a .at(), a
// nlohmann type_error, ...), or an invariant that `ttr_fuzz_require` checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// A violated invariant: print it and abort, so libFuzzer (and the replay
// driver) record the input as a crash.
#define TTR_FUZZ_REQUIRE(cond, what)                                                          \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "fuzz finding: %s (%s:%d: %s)\n", std::string(what).c_str(), __FILE__, \
                   __LINE__, #cond);                                                           \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace ttr::fuzz {

// Reads choices off the front of the input, like LLVM's FuzzedDataProvider but
// ours (the CI replays the harnesses with g++, which has no such header), with a
// fixed documented byte order so a seed written by fuzz/corpus/make_seeds.py
// means the same thing in every build. Exhausted input reads as zeros, so every
// prefix of a valid input is a valid input.
class ByteSource {
 public:
  ByteSource(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}

  std::uint8_t byte() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  std::uint16_t u16() {  // little-endian
    const std::uint16_t lo = byte();
    return static_cast<std::uint16_t>(lo | (byte() << 8));
  }
  // An integer in [lo, hi] from one byte (hi - lo < 256).
  int pick(int lo, int hi) { return lo + byte() % (hi - lo + 1); }
  // A value in [0, 1]: 16 bits of resolution, both ends reachable exactly.
  double unit() { return u16() / 65535.0; }
  bool flag() { return byte() & 1u; }
  std::size_t remaining() const { return n_; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

}  // namespace ttr::fuzz
