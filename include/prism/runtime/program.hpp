// SPDX-License-Identifier: Apache-2.0
// Programs and kernels from OpenCL C source, through a process-wide cache keyed by
// (context, device, source hash, build options): concurrent requests for one key compile once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "prism/runtime/context.hpp"

/// The prefix (a PTX comment) of inline-asm lines that a `-prism-ptx-target` build makes live.
#define PRISM_PTX_TARGET_MARKER "// @@prism-ptx-target@@ "

namespace prism {

class kernel;

/// A built OpenCL program. Thread safety: safe.
class program {
 public:
  program() = default;
  /// Builds (or returns the cached build of) `source` with `options` for the context's device.
  /// Throws errc::build_failure with the compiler log when the build fails; failures are cached
  /// too, so a broken variant is not recompiled on every call.
  /// NVIDIA only: an option `-prism-ptx-target=T` (e.g. sm_90a) builds the source, takes the
  /// driver's PTX, makes every line marked with PRISM_PTX_TARGET_MARKER live (the source writes
  /// such lines as PTX comments through inline asm) and builds that PTX for `.target T`. This
  /// reaches instructions the driver's own target (sm_90 on an H100) lacks, such as Hopper's
  /// wgmma (sm_90a). Given twice (own options and PRISM_CL_OPTIONS) it acts once; two different
  /// targets, or none after the '=', throw errc::invalid_argument naming them.
  static program build(const context& ctx, std::string_view source, std::string_view options = {});

  kernel get_kernel(const std::string& name) const;
  const std::string& options() const;
  /// Hash of source + options, hex; identifies a kernel build in logs and the tuning database.
  const std::string& source_hash() const;

  struct impl;
  explicit program(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  impl& get_impl() const;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

 private:
  std::shared_ptr<impl> impl_;
};

/// Program cache statistics, for tests and logs.
struct program_cache_stats {
  std::uint64_t hits = 0;
  std::uint64_t builds = 0;
  std::uint64_t failures = 0;
};
program_cache_stats program_cache_statistics();
/// Nanoseconds the calling thread has spent in program::build compiling or waiting for another
/// thread's build of the same key (cache hits cost nothing). The dispatch log's profile mode
/// subtracts it, so a first call's kernel build is reported apart from its run time.
std::uint64_t program_build_ns_on_this_thread() noexcept;

/// One kernel of a program. Arguments are set at enqueue time under the kernel's own lock, so a
/// kernel may be launched from several threads at once. Thread safety: safe.
class kernel {
 public:
  kernel() = default;
  const std::string& name() const;
  /// CL_KERNEL_WORK_GROUP_SIZE and CL_KERNEL_LOCAL_MEM_SIZE for the context's device.
  std::size_t max_work_group_size() const;
  std::uint64_t local_mem_size() const;
  std::size_t preferred_work_group_multiple() const;

  struct impl;
  explicit kernel(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  impl& get_impl() const;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace prism
