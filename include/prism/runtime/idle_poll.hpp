// SPDX-License-Identifier: Apache-2.0
// prism::idle_poll: while alive, asks Linux to keep idle CPUs polling instead of halting: a PM QoS
// CPU-latency request of 0 µs through /dev/cpu_dma_latency, what tuned's latency-performance
// profile sets for a whole machine. It is for CPU devices: PoCL's pthread workers sleep whenever
// the next command is not ready, which in a chain of dependent kernels is after every kernel, and
// waking a halted CPU costs an interrupt; on a VM, a halted vCPU also has to be scheduled again by
// the host (tens of µs per kernel on the 2-core machine, benchmarks/RESULTS.md "Issue 14,
// session 10"). A polling idle CPU sees the wake-up without an interrupt. llama.cpp gets the same
// effect by polling in its own worker threads. The request costs power while it is held, and ends
// when the object is destroyed or the process exits.
// Thread safety: an object is used by one thread; any number may exist.
#pragma once

#include <string>

namespace prism {

class idle_poll {
 public:
  /// Makes the request. Never throws: where it cannot be made (not Linux, no permission to write
  /// /dev/cpu_dma_latency, which is root's by default), active() is false and reason() says why.
  idle_poll();
  ~idle_poll();
  idle_poll(const idle_poll&) = delete;
  idle_poll& operator=(const idle_poll&) = delete;

  /// Whether the request is held.
  bool active() const noexcept { return fd_ >= 0; }
  /// Why the request is not held ("" while it is).
  const std::string& reason() const noexcept { return reason_; }

 private:
  int fd_ = -1;
  std::string reason_;
};

}  // namespace prism
