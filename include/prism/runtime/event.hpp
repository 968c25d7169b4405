// SPDX-License-Identifier: Apache-2.0
// prism::event: completion, status, dependencies, callbacks and profiling of one command.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace prism {

enum class event_status { submitted, running, complete, failed };

/// Device timestamps in nanoseconds; valid only for commands on a profiling queue.
struct profiling_info {
  std::uint64_t queued_ns = 0;
  std::uint64_t submit_ns = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

/// A default-constructed event is already complete. Cheap to copy.
/// Thread safety: safe.
class event {
 public:
  event() = default;

  void wait() const;
  static void wait(const std::vector<event>& events);
  event_status status() const;
  /// Events this command waited on when it was enqueued.
  std::vector<event> dependencies() const;
  /// Runs `callback` on a runtime thread once the command completes (or fails; the argument
  /// says which). Exceptions from the callback are logged and reported to the queue's handler.
  void then(std::function<void(event_status)> callback) const;
  /// Throws errc::unsupported when the queue did not enable profiling.
  profiling_info profiling() const;

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  bool operator==(const event& o) const noexcept { return impl_ == o.impl_; }

  struct impl;
  explicit event(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  impl* get_impl() const noexcept { return impl_.get(); }
  const std::shared_ptr<impl>& impl_ptr() const noexcept { return impl_; }

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace prism
