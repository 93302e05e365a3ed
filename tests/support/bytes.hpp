// Byte-for-byte equality of two ranges that may be empty: memcmp needs valid
// pointers even for n = 0 (C11 7.24.1p2), and an empty sequence's slice is an
// empty vector whose data() may be null (UBSan reported it in varlen_test.cpp).
#pragma once

#include <cstddef>
#include <cstring>

namespace ttr::test {

inline bool same_bytes(const void* a, const void* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

}  // namespace ttr::test
