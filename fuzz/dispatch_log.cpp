// SPDX-License-Identifier: Apache-2.0
// Fuzzes dispatch logs as `prism run --replay` reads them: parse_log on the input text.
// A prism::error is the expected answer to bad input.
#include <sstream>
#include <string>

#include "dispatch/log/dispatch_log.hpp"
#include "prism/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    (void)prism::dispatch::parse_log(in);
  } catch (const prism::error&) {
  }
  return 0;
}
