// SPDX-License-Identifier: Apache-2.0
// Fuzzes PRISM_ROUTES files: load_routes_file on the input (its includes resolve next to it).
// A prism::error is the expected answer to bad input; anything else is a bug.
#include "dispatch/config/routes_file.hpp"
#include "fuzz/fuzz_support.hpp"
#include "prism/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = prism::fuzz::write_input("routes/top.yaml", data, size);
  try {
    (void)prism::dispatch::load_routes_file(path);
  } catch (const prism::error&) {
  }
  return 0;
}
