// SPDX-License-Identifier: Apache-2.0
// Shared by the dispatcher's test binaries: code_of (run a callable that must throw
// prism::error, return its code and text) and drain_before_exit (a binary's queue is idle when
// the process exits).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "prism/error.hpp"
#include "prism/runtime.hpp"

namespace prism::test {

inline errc code_of(const std::function<void()>& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const prism::error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no prism::error thrown";
  return errc::internal;
}

/// Waits for `get_queue()` after the last test. PoCL builds a kernel's work-group function when
/// the command runs; a command still pending when the process exits races LLVM's teardown
/// inside PoCL ("Failed to create kernel compiler pass"). Call once, at namespace scope.
inline const ::testing::Environment* drain_before_exit(queue& (*get_queue)()) {
  struct drain : ::testing::Environment {
    explicit drain(queue& (*g)()) : get(g) {}
    void TearDown() override { get().wait(); }
    queue& (*get)();
  };
  return ::testing::AddGlobalTestEnvironment(new drain(get_queue));
}

}  // namespace prism::test
