// Scalar generators with the edge values the layers must survive.
//
// RapidCheck's element/weightedElement/oneOf/weightedOneOf do not shrink, and its
// inRange is size-scaled (at size 0 it returns its lower end). The primitives
// here are neither: uniform_int draws over the whole range at every size and
// shrinks toward its lower end; choose and one_of pick by weight and shrink
// toward their first alternative — the edges are listed first, so a failing
// case shrinks onto the edge values (then the drawn value shrinks in its own
// generator).
//
//   bf16_value   m·2^e with |m| ≤ 255: exactly representable in bf16 (8-bit significand)
//   log_decay    g = log γ: exactly 0 (γ = 1), exactly log(1e-30), or −e^u in between
//   beta         exactly 0, exactly 1, or i/256 in between (also bf16-exact)
//   log10_norm   exactly 0, −3, +3 (norms 1, 1e-3, 1e3), or i/8 in between
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <rapidcheck.h>

namespace ttr::prop::gen {

// An integer in [lo, hi] (inclusive), uniform at every size, shrinking toward lo.
inline rc::Gen<int> uniform_int(int lo, int hi) {
  return rc::Gen<int>([lo, hi](const rc::Random& random, int) {
    const auto n = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo + 1);
    const int v = lo + static_cast<int>(rc::Random(random).next() % n);
    return rc::shrinkable::shrinkRecur(v, [lo](int x) { return rc::shrink::towards<int>(x, lo); });
  });
}

// An index by weight, shrinking toward 0.
inline rc::Gen<int> weighted_index(std::vector<int> weights) {
  return rc::Gen<int>([weights](const rc::Random& random, int) {
    std::uint64_t total = 0;
    for (int w : weights) total += static_cast<std::uint64_t>(w);
    std::uint64_t r = rc::Random(random).next() % total;
    int i = 0;
    while (r >= static_cast<std::uint64_t>(weights[i])) r -= static_cast<std::uint64_t>(weights[i++]);
    return rc::shrinkable::shrinkRecur(i, [](int x) { return rc::shrink::towards<int>(x, 0); });
  });
}

// One of the values by weight, shrinking toward the first.
template <class T>
rc::Gen<T> choose(std::vector<std::pair<int, T>> options) {
  std::vector<int> w;
  for (const auto& o : options) w.push_back(o.first);
  return rc::gen::map(weighted_index(w), [options](int i) { return options[static_cast<std::size_t>(i)].second; });
}
template <class T>
rc::Gen<T> choose_uniform(std::vector<T> values) {
  std::vector<std::pair<int, T>> o;
  for (const T& v : values) o.emplace_back(1, v);
  return choose(o);
}

// One of the generators by weight, shrinking toward the first, then within it.
template <class T>
rc::Gen<T> one_of(std::vector<std::pair<int, rc::Gen<T>>> options) {
  std::vector<int> w;
  for (const auto& o : options) w.push_back(o.first);
  return rc::gen::mapcat(weighted_index(w), [options](int i) { return options[static_cast<std::size_t>(i)].second; });
}

inline rc::Gen<int> sign() { return choose<int>({{1, 1}, {1, -1}}); }

inline const double kLogTinyDecay = std::log(1e-30);  // g of the smallest decay, γ = 1e-30

// m·2^e, |m| ≤ 255, e ∈ [e_lo, e_hi]: at most 8 significant bits, so exactly a
// bf16 number for every exponent bf16 can hold. Shrinks to 0.
inline rc::Gen<double> bf16_value(int e_lo = -8, int e_hi = 0) {
  // inRange shrinks toward its lower end: magnitude and sign are drawn apart so
  // that the value shrinks toward 0 and the exponent toward e_hi.
  return rc::gen::apply([e_hi](int m, int sign, int de) { return std::ldexp(static_cast<double>(sign * m), e_hi - de); },
                        uniform_int(0, 255), sign(), uniform_int(0, e_hi - e_lo));
}

// log γ ≤ 0. Edges first: γ = 1 (nothing forgotten) and γ = 1e-30 (everything
// forgotten but the exponent); in between γ = exp(−e^{i/16}), γ from 1 − 6e-6 to e^-66.
inline rc::Gen<double> log_decay() {
  const auto interior = rc::gen::map(uniform_int(-192, 67), [](int i) { return -std::exp(i / 16.0); });
  return one_of<double>(
      {{3, rc::gen::just(0.0)}, {2, rc::gen::just(kLogTinyDecay)}, {5, interior}});
}

// β ∈ [0, 1]: exactly 0 (no write), exactly 1 (full write), else i/256.
inline rc::Gen<double> beta() {
  const auto interior = rc::gen::map(uniform_int(1, 255), [](int i) { return i / 256.0; });
  return one_of<double>({{2, rc::gen::just(0.0)}, {2, rc::gen::just(1.0)}, {6, interior}});
}

// log10 of a key norm in [−3, 3], edges exact.
inline rc::Gen<double> log10_norm() {
  const auto interior =
      rc::gen::apply([](int i, int s) { return s * i / 8.0; }, uniform_int(1, 23), sign());
  return one_of<double>(
      {{2, rc::gen::just(0.0)}, {1, rc::gen::just(-3.0)}, {1, rc::gen::just(3.0)}, {6, interior}});
}

// A positive number 10^{i/8}, i/8 ∈ [lo, hi] (shrinks toward 10^lo).
inline rc::Gen<double> log_uniform(int lo_eighths, int hi_eighths) {
  return rc::gen::map(uniform_int(lo_eighths, hi_eighths), [](int i) { return std::pow(10.0, i / 8.0); });
}

}  // namespace ttr::prop::gen
