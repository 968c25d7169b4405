// SPDX-License-Identifier: Apache-2.0
// Shared fixtures for the runtime tests: the test device's queue and one program holding every
// test kernel, so the suite compiles it once (PoCL builds cost ~1 s each).
#pragma once

#include <functional>
#include <string>

#include "prism/runtime.hpp"

namespace prism::test {

/// A queue on the default device (PRISM_DEVICE applies), shared by tests.
queue& default_queue();
/// The test kernels built for `ctx` (cached by the runtime's program cache).
program test_program(const context& ctx);
/// Work per item of `slow_*` kernels, tuned so they take ~100 ms on the test device.
int slow_iterations(queue& q);
/// What `fn` threw: the text of a prism::error with errc::invalid_argument (another code, or no
/// error at all, fails the calling test).
std::string message_of(const std::function<void()>& fn);

}  // namespace prism::test
