// SPDX-License-Identifier: Apache-2.0
// Fuzzes vendor profiles: the input is vendors/fuzz/vendor.yaml, loaded with
// load_vendor_profiles. A prism::error is the expected answer to bad input.
#include "dispatch/config/vendor_profile.hpp"
#include "fuzz/fuzz_support.hpp"
#include "prism/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = prism::fuzz::write_input("vendors/fuzz/vendor.yaml", data, size);
  try {
    (void)prism::dispatch::load_vendor_profiles({(prism::fuzz::scratch_dir() / "vendors" / "fuzz").string()});
  } catch (const prism::error&) {
  }
  return 0;
}
