// SPDX-License-Identifier: Apache-2.0
// prism::device and prism::platform: what the ICD loader reports, and a stable fingerprint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prism {

enum class device_type { cpu, gpu, accelerator, other };
const char* device_type_name(device_type t) noexcept;

/// A stable identity for tuning results: platform name+version, device name, vendor id, driver
/// version and compute units. `text` is human readable; `hash` is 16 hex digits of it.
struct device_fingerprint {
  std::string text;
  std::string hash;
};

/// Scalar kinds for preferred vector widths.
enum class scalar_kind { char_, short_, int_, long_, half_, float_, double_ };

/// One OpenCL device. Cheap to copy (shared handle); equal when it is the same cl_device_id.
/// Thread safety: safe; all queries read cached values.
class device {
 public:
  device() = default;

  /// Every device of every platform the ICD loader reports, in platform order.
  static std::vector<device> get_devices();

  const std::string& name() const;
  const std::string& vendor() const;
  std::uint32_t vendor_id() const;
  const std::string& driver_version() const;
  const std::string& opencl_version() const;    ///< CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ..."
  const std::string& opencl_c_version() const;  ///< e.g. "OpenCL C 1.2 PoCL"
  const std::string& platform_name() const;
  const std::string& platform_version() const;
  /// Index of this device among all devices (get_devices() order) and within its platform.
  std::size_t global_index() const;
  std::size_t index_in_platform() const;

  device_type type() const;
  bool is_cpu() const { return type() == device_type::cpu; }
  bool is_gpu() const { return type() == device_type::gpu; }

  std::uint32_t compute_units() const;
  std::uint64_t global_mem_size() const;
  /// CL_DEVICE_GLOBAL_MEM_CACHE_SIZE: the largest cache in front of global memory as the driver
  /// reports it (PoCL: the host's last-level cache; 0 where the driver reports none).
  std::uint64_t global_mem_cache_size() const;
  std::uint64_t local_mem_size() const;
  std::uint64_t max_mem_alloc_size() const;
  std::size_t max_work_group_size() const;
  std::uint32_t max_clock_mhz() const;
  std::uint32_t preferred_vector_width(scalar_kind kind) const;
  const std::vector<std::string>& extensions() const;
  bool has_extension(const std::string& name) const;

  bool has_fp16() const;  ///< cl_khr_fp16 (arithmetic); f16 *storage* never needs it
  bool has_fp64() const;
  bool has_svm() const;        ///< coarse-grain buffer SVM
  bool has_subgroups() const;  ///< cl_khr_subgroups or OpenCL 3.0 sub-groups
  std::uint64_t profiling_resolution_ns() const;

  const device_fingerprint& fingerprint() const;

  bool operator==(const device& other) const noexcept { return impl_ == other.impl_; }
  explicit operator bool() const noexcept { return impl_ != nullptr; }

  struct impl;
  explicit device(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}
  const impl& get_impl() const;

 private:
  std::shared_ptr<const impl> impl_;
};

}  // namespace prism
