// SPDX-License-Identifier: Apache-2.0
// Fuzzes the safetensors header parser (prism/io/safetensors.hpp): length prefix, JSON header,
// dtypes, shapes against byte ranges. A prism::error is the expected answer to bad input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "prism/error.hpp"
#include "prism/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto file =
        prism::io::safetensors_file::parse(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    for (const auto& name : file.names()) (void)file.get(name);
  } catch (const prism::error&) {
  }
  return 0;
}
