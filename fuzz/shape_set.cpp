// SPDX-License-Identifier: Apache-2.0
// Fuzzes shape sets: parse_shape_set on the input text (variables, lists, products).
// A prism::error is the expected answer to bad input.
#include <string_view>

#include "prism/error.hpp"
#include "prism/tuning_db.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)prism::tuning::parse_shape_set(text, "fuzz.yaml");
  } catch (const prism::error&) {
  }
  return 0;
}
