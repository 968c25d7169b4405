// SPDX-License-Identifier: Apache-2.0
// prism::context: an OpenCL context for one device. Queues on a device share its default
// context, so buffers and tensors move freely between them.
#pragma once

#include <cstdint>
#include <memory>

#include "prism/runtime/device.hpp"

namespace prism {

/// Thread safety: safe.
class context {
 public:
  context() = default;
  /// A new context of its own for `dev` (objects from it are not usable with other contexts).
  explicit context(const device& dev);
  /// The process-wide default context of `dev`, created on first use and never released at exit.
  static context get_default(const device& dev);

  const device& get_device() const;
  /// A process-unique id, for cache keys and "different contexts" errors.
  std::uint64_t id() const;

  bool operator==(const context& o) const noexcept { return impl_ == o.impl_; }
  explicit operator bool() const noexcept { return impl_ != nullptr; }

  struct impl;
  explicit context(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  impl& get_impl() const;

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace prism
