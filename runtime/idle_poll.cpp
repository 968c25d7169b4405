// SPDX-License-Identifier: Apache-2.0
// idle_poll: a PM QoS CPU-latency request held through an open /dev/cpu_dma_latency (the kernel
// drops it when the file is closed, so a crash cannot leave it behind).
#include "prism/runtime/idle_poll.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <unistd.h>
#endif

#include "runtime/log.hpp"

namespace prism {

idle_poll::idle_poll() {
#if defined(__linux__)
  constexpr const char* path = "/dev/cpu_dma_latency";
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    reason_ = std::string("cannot open ") + path + " for writing: " + std::strerror(errno) +
              (errno == EACCES || errno == EPERM ? " (it is root's; run as root or give the user write access)" : "");
    log::get("runtime")->debug("idle_poll: {}", reason_);
    return;
  }
  const std::int32_t zero_us = 0;
  if (::write(fd, &zero_us, sizeof zero_us) != static_cast<ssize_t>(sizeof zero_us)) {
    reason_ = std::string("writing 0 to ") + path + " failed: " + std::strerror(errno);
    ::close(fd);
    log::get("runtime")->debug("idle_poll: {}", reason_);
    return;
  }
  fd_ = fd;
  log::get("runtime")->debug("idle_poll: idle CPUs poll (PM QoS CPU latency 0 us) until released");
#else
  reason_ = "PM QoS CPU-latency requests are Linux's (/dev/cpu_dma_latency)";
#endif
}

idle_poll::~idle_poll() {
#if defined(__linux__)
  if (fd_ >= 0) ::close(fd_);
#endif
}

}  // namespace prism
