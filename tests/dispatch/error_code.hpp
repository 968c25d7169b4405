// Shared by the dispatcher's test binaries: run a callable that must throw prism::error and
// return its code (and text), failing the test when nothing is thrown.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "prism/error.hpp"

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

}  // namespace prism::test
