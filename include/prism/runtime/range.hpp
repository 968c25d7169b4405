// SPDX-License-Identifier: Apache-2.0
// range<D> and nd_range: global and optional local sizes of a kernel launch (1 to 3 dims).
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>

namespace prism {

template <int D>
struct range {
  static_assert(D >= 1 && D <= 3, "range has 1 to 3 dimensions");
  std::array<std::size_t, D> v{};
  range() = default;
  template <class... I>
  explicit range(I... sizes) : v{static_cast<std::size_t>(sizes)...} {
    static_assert(sizeof...(I) == D, "range<D> takes D sizes");
  }
  std::size_t operator[](int i) const { return v[i]; }
  std::size_t size() const {
    std::size_t n = 1;
    for (auto x : v) n *= x;
    return n;
  }
};

/// A launch shape. Without a local size the driver picks one.
struct nd_range {
  std::array<std::size_t, 3> global{1, 1, 1};
  std::array<std::size_t, 3> local{1, 1, 1};
  unsigned dims = 1;
  bool has_local = false;

  nd_range() = default;
  template <int D>
  nd_range(range<D> g) : dims(D) {  // NOLINT: implicit, like SYCL's range -> nd_range use
    for (int i = 0; i < D; ++i) global[i] = g.v[i];
  }
  template <int D>
  nd_range(range<D> g, range<D> l) : dims(D), has_local(true) {
    for (int i = 0; i < D; ++i) {
      global[i] = g.v[i];
      local[i] = l.v[i];
    }
  }
  std::size_t global_size() const { return global[0] * global[1] * global[2]; }
};

}  // namespace prism
