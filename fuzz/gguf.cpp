// SPDX-License-Identifier: Apache-2.0
// Fuzzes the GGUF parser (prism/io/gguf.hpp): header, metadata, tensor infos, alignment, and
// the dequantization of every tensor it accepts. A prism::error is the expected answer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "prism/error.hpp"
#include "prism/io/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto file =
        prism::io::gguf_file::parse(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    for (const auto& t : file.tensors()) {
      try {
        if (t.numel() <= (1 << 20)) (void)file.dequantize(t.name);
      } catch (const prism::error&) {
      }
    }
  } catch (const prism::error&) {
  }
  return 0;
}
