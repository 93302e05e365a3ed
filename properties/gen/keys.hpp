// Key generators: a block of T keys of width K (row-major T×K) per (batch, head).
//
//   direction        a unit vector from small integers (shrinks to e_0)
//   orthogonal       a product of n Householder reflections (shrinks to I)
//   conditioned_keys K = U Σ Vᵀ with singular values s·κ^{-i/(r-1)}: cond₂(K) = κ
//                    exactly in real arithmetic (κ = 1 and 1e6 are edges)
//   collinear_keys   k_t = s (cos θ_t d + sin θ_t e_t), e_t ⊥ d unit: every pair
//                    of keys within 2θ of each other, θ down to 1e-6
//   decade_keys      unit directions times norms 10^u, u ∈ [−3, 3] (edges exact)
//   key_block        one of the above (plus plain unit keys), tagged with its kind
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "properties/gen/scalars.hpp"

namespace ttr::prop::gen {

using Mat = std::vector<double>;  // row-major

// An integer in [−m, m] that shrinks toward 0.
inline rc::Gen<int> signed_int(int m) {
  return rc::gen::apply([](int a, int s) { return a * s; }, uniform_int(0, m), sign());
}

inline double norm2(const double* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return std::sqrt(s);
}

// Unit vector of length n from integer components; the zero draw means e_0.
inline rc::Gen<std::vector<double>> direction(int n) {
  return rc::gen::map(rc::gen::container<std::vector<int>>(static_cast<std::size_t>(n), signed_int(64)),
                      [n](const std::vector<int>& c) {
                        std::vector<double> x(c.begin(), c.end());
                        const double s = norm2(x.data(), n);
                        if (s == 0) {
                          x.assign(static_cast<std::size_t>(n), 0.0);
                          x[0] = 1.0;
                        } else {
                          for (double& e : x) e /= s;
                        }
                        return x;
                      });
}

// n×n orthogonal matrix H(u_1)···H(u_n), H(u) = I − 2uuᵀ/uᵀu (the zero u: H = I).
// Every orthogonal matrix is such a product (Householder QR of Qᵀ).
inline rc::Gen<Mat> orthogonal(int n) {
  return rc::gen::map(
      rc::gen::container<std::vector<std::vector<int>>>(
          static_cast<std::size_t>(n), rc::gen::container<std::vector<int>>(static_cast<std::size_t>(n), signed_int(16))),
      [n](const std::vector<std::vector<int>>& us) {
        Mat Q(static_cast<std::size_t>(n) * n, 0.0);
        for (int i = 0; i < n; ++i) Q[static_cast<std::size_t>(i) * n + i] = 1.0;
        for (const auto& ui : us) {
          std::vector<double> u(ui.begin(), ui.end());
          double uu = 0;
          for (double e : u) uu += e * e;
          if (uu == 0) continue;
          for (int r = 0; r < n; ++r) {  // Q ← Q H(u): row r of Q minus 2 (Q_r·u)/uu uᵀ
            double* row = &Q[static_cast<std::size_t>(r) * n];
            double dot = 0;
            for (int c = 0; c < n; ++c) dot += row[c] * u[c];
            for (int c = 0; c < n; ++c) row[c] -= 2.0 * dot / uu * u[c];
          }
        }
        return Q;
      });
}

// log10 κ of a key block: exactly 0 or 6 (edges), else i/4 in between.
inline rc::Gen<double> log10_condition() {
  const auto interior = rc::gen::map(uniform_int(1, 23), [](int i) { return i / 4.0; });
  return one_of<double>({{2, rc::gen::just(0.0)}, {2, rc::gen::just(6.0)}, {6, interior}});
}

// T×K keys K = s·U Σ Vᵀ: U the first r = min(T, K) columns of a T×T orthogonal
// matrix, V a K×K orthogonal matrix, Σ = diag(κ^{-i/(r-1)}). cond₂ = κ (r ≥ 2).
inline Mat conditioned_keys(int T, int K, double kappa, double s, const Mat& U, const Mat& V) {
  const int r = std::min(T, K);
  Mat k(static_cast<std::size_t>(T) * K, 0.0);
  for (int i = 0; i < r; ++i) {
    const double sigma = s * (r == 1 ? 1.0 : std::pow(kappa, -static_cast<double>(i) / (r - 1)));
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < K; ++c)
        k[static_cast<std::size_t>(t) * K + c] += U[static_cast<std::size_t>(t) * T + i] * sigma * V[static_cast<std::size_t>(c) * K + i];
  }
  return k;
}

inline rc::Gen<double> collinear_angle() {  // θ: exactly 1e-6, else 10^{-j/4}, j ∈ [4, 23]
  const auto interior = rc::gen::map(uniform_int(4, 23), [](int j) { return std::pow(10.0, -j / 4.0); });
  return one_of<double>({{3, rc::gen::just(1e-6)}, {7, interior}});
}

enum class KeyKind { unit, decades, conditioned, collinear };
inline const char* key_kind_name(KeyKind k) {
  switch (k) {
    case KeyKind::unit: return "unit";
    case KeyKind::decades: return "decades";
    case KeyKind::conditioned: return "conditioned";
    case KeyKind::collinear: return "collinear";
  }
  return "?";
}

struct KeyBlock {
  KeyKind kind = KeyKind::unit;
  double kappa = 1;   // conditioned: the prescribed cond₂
  double theta = 0;   // collinear: the smallest angle drawn
  double min_log10_norm = 0, max_log10_norm = 0;  // decades
  Mat k;              // T×K
};

inline void showValue(const KeyBlock& b, std::ostream& os) {
  os << key_kind_name(b.kind) << " kappa=" << b.kappa << " theta=" << b.theta << " log10|k| in ["
     << b.min_log10_norm << ", " << b.max_log10_norm << "] k=";
  rc::show(b.k, os);
}

inline rc::Gen<KeyBlock> key_block(int T, int K) {
  return rc::gen::exec([T, K] {
    KeyBlock b;
    b.kind = *choose<KeyKind>(
        {{2, KeyKind::unit}, {2, KeyKind::decades}, {3, KeyKind::conditioned}, {3, KeyKind::collinear}});
    b.k.assign(static_cast<std::size_t>(T) * K, 0.0);
    switch (b.kind) {
      case KeyKind::unit:
      case KeyKind::decades:
        b.min_log10_norm = 1e300, b.max_log10_norm = -1e300;
        for (int t = 0; t < T; ++t) {
          const auto d = *direction(K);
          const double u = b.kind == KeyKind::unit ? 0.0 : *log10_norm();
          b.min_log10_norm = std::min(b.min_log10_norm, u), b.max_log10_norm = std::max(b.max_log10_norm, u);
          for (int c = 0; c < K; ++c) b.k[static_cast<std::size_t>(t) * K + c] = std::pow(10.0, u) * d[c];
        }
        break;
      case KeyKind::conditioned: {
        b.kappa = std::pow(10.0, *log10_condition());
        const double u = *log10_norm();
        b.min_log10_norm = b.max_log10_norm = u;
        b.k = conditioned_keys(T, K, b.kappa, std::pow(10.0, u), *orthogonal(T), *orthogonal(K));
        break;
      }
      case KeyKind::collinear: {
        const auto d = *direction(K);
        const double u = *log10_norm();
        b.min_log10_norm = b.max_log10_norm = u;
        b.theta = 1.0;
        for (int t = 0; t < T; ++t) {
          const double theta = *collinear_angle();
          b.theta = std::min(b.theta, theta);
          // e ⊥ d by Gram–Schmidt of a drawn direction; if it is parallel to d,
          // the coordinate axis least aligned with d instead.
          auto e = *direction(K);
          auto project_out = [&] {
            double dot = 0;
            for (int c = 0; c < K; ++c) dot += e[c] * d[c];
            for (int c = 0; c < K; ++c) e[c] -= dot * d[c];
            return norm2(e.data(), K);
          };
          double n = project_out();
          if (n < 1e-3) {
            const auto least = std::min_element(d.begin(), d.end(), [](double a, double c) { return std::fabs(a) < std::fabs(c); });
            e.assign(static_cast<std::size_t>(K), 0.0);
            e[static_cast<std::size_t>(least - d.begin())] = 1.0;
            n = project_out();
          }
          for (int c = 0; c < K; ++c)
            b.k[static_cast<std::size_t>(t) * K + c] =
                std::pow(10.0, u) * (std::cos(theta) * d[c] + (n > 0 ? std::sin(theta) * e[c] / n : 0.0));
        }
        break;
      }
    }
    return b;
  });
}

}  // namespace ttr::prop::gen
