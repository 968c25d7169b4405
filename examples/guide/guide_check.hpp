// SPDX-License-Identifier: Apache-2.0
// A tiny check helper for the guide's examples: a mismatch prints what differed and fails the
// program (CTest runs each example), so the guide's code cannot silently stop doing what it says.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

inline void expect_values(const char* what, std::span<const float> got, std::vector<float> want,
                          float tol = 1e-5f) {
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i)
    ok = std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]));
  if (!ok) {
    std::fprintf(stderr, "%s: got", what);
    for (float v : got) std::fprintf(stderr, " %g", v);
    std::fprintf(stderr, ", expected");
    for (float v : want) std::fprintf(stderr, " %g", v);
    std::fprintf(stderr, "\n");
    std::exit(1);
  }
  std::printf("%s: ok\n", what);
}
