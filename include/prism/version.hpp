// SPDX-License-Identifier: Apache-2.0
// prism's version, from the CMake project version.
#pragma once

namespace prism {
/// e.g. "0.1.0"
const char* version() noexcept;
}  // namespace prism
