// SPDX-License-Identifier: Apache-2.0
// mapped_file: mmap of a whole file (MAP_PRIVATE: copy-on-write, the file never changes); empty
// files map to no bytes.
#include "prism/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::io {

mapped_file::mapped_file(const std::string& path) : path_(path) {
  const char* op = "io::mapped_file";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw error(errc::io_error, op, fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int e = errno;
    ::close(fd);
    throw error(errc::io_error, op,
                fmt::format("'{}' is not a readable regular file{}", path,
                            S_ISREG(st.st_mode) ? std::string(": ") + std::strerror(e) : ""));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > 0) {
    map_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      const int e = errno;
      ::close(fd);
      throw error(errc::io_error, op, fmt::format("cannot map '{}': {}", path, std::strerror(e)));
    }
    ::madvise(map_, size, MADV_WILLNEED);  // weights are read once, front to back
    bytes_ = {static_cast<const std::byte*>(map_), size};
  }
  ::close(fd);
}

mapped_file::mapped_file(std::span<const std::byte> bytes, std::string label)
    : path_(std::move(label)), bytes_(bytes) {}

mapped_file::~mapped_file() {
  if (map_) ::munmap(map_, bytes_.size());
}

}  // namespace prism::io
