// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the libFuzzer harnesses: a private scratch folder, and writing an input to
// a file for the parsers that take a path.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace prism::fuzz {

/// A folder of this process under TMPDIR, made once.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("prism_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes `size` bytes to scratch_dir()/relative (creating its folder) and returns the path.
inline std::string write_input(const std::string& relative, const std::uint8_t* data, std::size_t size) {
  auto path = scratch_dir() / relative;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace prism::fuzz
