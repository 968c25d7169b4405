// SPDX-License-Identifier: Apache-2.0
// Fuzzes `prism db import` documents: import_json validates the whole document before it
// writes, so a database that cannot be written (no file, read-only) exercises every check
// without disk traffic. A prism::error is the expected answer to bad input.
#include <string_view>

#include "fuzz/fuzz_support.hpp"
#include "prism/error.hpp"
#include "prism/tuning_db.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static auto* db = new prism::tuning::database((prism::fuzz::scratch_dir() / "none.db").string(),
                                                prism::tuning::database::access::read_only);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)db->import_json(text);
  } catch (const prism::error&) {
  }
  return 0;
}
