// SPDX-License-Identifier: Apache-2.0
// prism::io::mapped_file: a weight file's bytes, memory-mapped copy-on-write (the file never
// changes), or borrowed from the caller (a buffer the caller keeps alive: embedded data, fuzzing).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace prism::io {

/// Thread safety: immutable after construction; safe for concurrent reads.
class mapped_file {
 public:
  /// Maps `path` private and writable: writes (by a device buffer over the mapping, see
  /// safetensors_file::load_all) copy the page and never reach the file. Throws
  /// prism::error(io_error) naming the file and the OS error.
  explicit mapped_file(const std::string& path);
  /// Borrows `bytes` (not copied: the caller keeps them alive); `label` names them in errors.
  mapped_file(std::span<const std::byte> bytes, std::string label);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// The mapping's first byte (page aligned, writable) when the file was mapped; nullptr for
  /// borrowed bytes.
  std::byte* mapping() const noexcept { return static_cast<std::byte*>(map_); }
  /// The path, or the label of borrowed bytes.
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::span<const std::byte> bytes_;
  void* map_ = nullptr;
};

}  // namespace prism::io
