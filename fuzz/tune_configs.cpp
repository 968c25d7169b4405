// SPDX-License-Identifier: Apache-2.0
// Fuzzes tune_configs.yaml: parse_tune_configs on the input text (products, constraints).
// A prism::error is the expected answer to bad input.
#include <string_view>

#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)prism::parse_tune_configs(text, "fuzz", "fuzz.yaml");
  } catch (const prism::error&) {
  }
  return 0;
}
