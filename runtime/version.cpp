// SPDX-License-Identifier: Apache-2.0
// prism::version(): the CMake project version, baked in at build time.
#include "prism/version.hpp"

namespace prism {
const char* version() noexcept {
  return PRISM_VERSION_STRING;
}
}  // namespace prism
