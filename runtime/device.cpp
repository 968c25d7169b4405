// SPDX-License-Identifier: Apache-2.0
// Device enumeration through the ICD loader, cached device queries and fingerprints.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "runtime/hash.hpp"
#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism {

const char* device_type_name(device_type t) noexcept {
  switch (t) {
    case device_type::cpu:
      return "cpu";
    case device_type::gpu:
      return "gpu";
    case device_type::accelerator:
      return "accelerator";
    case device_type::other:
      return "other";
  }
  return "other";
}

namespace {
std::shared_ptr<const device::impl> make_device(cl_platform_id p, cl_device_id id, std::size_t global_index,
                                                std::size_t index_in_platform) {
  using detail::device_info;
  using detail::device_info_string;
  auto d = std::make_shared<device::impl>();
  d->id = id;
  d->platform = p;
  d->global_index = global_index;
  d->index_in_platform = index_in_platform;
  d->name = device_info_string(id, CL_DEVICE_NAME);
  d->vendor = device_info_string(id, CL_DEVICE_VENDOR);
  d->driver_version = device_info_string(id, CL_DRIVER_VERSION);
  d->opencl_version = device_info_string(id, CL_DEVICE_VERSION);
  d->opencl_c_version = device_info_string(id, CL_DEVICE_OPENCL_C_VERSION);
  d->platform_name = detail::platform_info_string(p, CL_PLATFORM_NAME);
  d->platform_version = detail::platform_info_string(p, CL_PLATFORM_VERSION);
  d->platform_vendor = detail::platform_info_string(p, CL_PLATFORM_VENDOR);
  d->vendor_id = device_info<cl_uint>(id, CL_DEVICE_VENDOR_ID);
  d->compute_units = device_info<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS);
  d->max_clock_mhz = device_info<cl_uint>(id, CL_DEVICE_MAX_CLOCK_FREQUENCY);
  d->global_mem = device_info<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
  d->global_mem_cache = device_info<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
  d->local_mem = device_info<cl_ulong>(id, CL_DEVICE_LOCAL_MEM_SIZE);
  d->max_alloc = device_info<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  d->max_work_group = device_info<std::size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  d->profiling_resolution = device_info<std::size_t>(id, CL_DEVICE_PROFILING_TIMER_RESOLUTION);
  const cl_device_info widths[7] = {
      CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR,  CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT,
      CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT,   CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG,
      CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF,  CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT,
      CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE};
  for (int i = 0; i < 7; ++i) d->vector_widths[i] = device_info<cl_uint>(id, widths[i]);
  auto type = device_info<cl_device_type>(id, CL_DEVICE_TYPE);
  d->type = (type & CL_DEVICE_TYPE_GPU)           ? device_type::gpu
            : (type & CL_DEVICE_TYPE_CPU)         ? device_type::cpu
            : (type & CL_DEVICE_TYPE_ACCELERATOR) ? device_type::accelerator
                                                  : device_type::other;
  std::istringstream ext(device_info_string(id, CL_DEVICE_EXTENSIONS));
  for (std::string e; ext >> e;) d->extensions.push_back(e);
  std::sort(d->extensions.begin(), d->extensions.end());
  auto has = [&](const char* e) { return std::binary_search(d->extensions.begin(), d->extensions.end(), e); };
  int major = 1, minor = 2;
  if (std::sscanf(d->opencl_version.c_str(), "OpenCL %d.%d", &major, &minor) == 2) {
    d->cl_major = major;
    d->cl_minor = minor;
  }
  d->fp16 = has("cl_khr_fp16");
  d->fp64 = has("cl_khr_fp64") || device_info<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
  if (d->cl_major >= 2) {
    auto svm = device_info<cl_device_svm_capabilities>(id, CL_DEVICE_SVM_CAPABILITIES);
    d->svm = (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0;
    d->subgroups = has("cl_khr_subgroups") || device_info<cl_uint>(id, CL_DEVICE_MAX_NUM_SUB_GROUPS) > 0;
  } else {
    d->subgroups = has("cl_khr_subgroups");
  }
  char vid[16];
  std::snprintf(vid, sizeof vid, "0x%04x", d->vendor_id);
  d->fingerprint.text = d->platform_name + " | " + d->platform_version + " | " + d->name + " | " + vid +
                        " | " + d->driver_version + " | " + std::to_string(d->compute_units) + " CU";
  d->fingerprint.hash = hash::hex(d->fingerprint.text);
  return d;
}

const std::vector<device>& all_devices() {
  static const auto* devices = [] {
    auto* list = new std::vector<device>;  // never destroyed: no OpenCL from static destructors
    auto logger = log::get("runtime");
    cl_uint np = 0;
    cl_int st = clGetPlatformIDs(0, nullptr, &np);
    if (st != CL_SUCCESS || np == 0) {
      logger->warn("no OpenCL platform found (clGetPlatformIDs: {}); is an ICD installed?",
                   st == CL_SUCCESS ? "0 platforms" : cl_error_name(st));
      return list;
    }
    std::vector<cl_platform_id> platforms(np);
    clGetPlatformIDs(np, platforms.data(), nullptr);
    for (auto p : platforms) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ids(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
      for (cl_uint i = 0; i < nd; ++i) {
        list->push_back(device(make_device(p, ids[i], list->size(), i)));
        logger->debug("device {}: {} ({}), fingerprint {}", list->size() - 1, list->back().name(),
                      list->back().platform_name(), list->back().fingerprint().hash);
      }
    }
    return list;
  }();
  return *devices;
}
}  // namespace

std::vector<device> device::get_devices() {
  return all_devices();
}

const device::impl& device::get_impl() const {
  if (!impl_)
    throw error(errc::invalid_argument, "prism::device", "use of a default-constructed (empty) device");
  return *impl_;
}

const std::string& device::name() const {
  return get_impl().name;
}
const std::string& device::vendor() const {
  return get_impl().vendor;
}
std::uint32_t device::vendor_id() const {
  return get_impl().vendor_id;
}
const std::string& device::driver_version() const {
  return get_impl().driver_version;
}
const std::string& device::opencl_version() const {
  return get_impl().opencl_version;
}
const std::string& device::opencl_c_version() const {
  return get_impl().opencl_c_version;
}
const std::string& device::platform_name() const {
  return get_impl().platform_name;
}
const std::string& device::platform_version() const {
  return get_impl().platform_version;
}
std::size_t device::global_index() const {
  return get_impl().global_index;
}
std::size_t device::index_in_platform() const {
  return get_impl().index_in_platform;
}
device_type device::type() const {
  return get_impl().type;
}
std::uint32_t device::compute_units() const {
  return get_impl().compute_units;
}
std::uint64_t device::global_mem_size() const {
  return get_impl().global_mem;
}
std::uint64_t device::global_mem_cache_size() const {
  return get_impl().global_mem_cache;
}
std::uint64_t device::local_mem_size() const {
  return get_impl().local_mem;
}
std::uint64_t device::max_mem_alloc_size() const {
  return get_impl().max_alloc;
}
std::size_t device::max_work_group_size() const {
  return get_impl().max_work_group;
}
std::uint32_t device::max_clock_mhz() const {
  return get_impl().max_clock_mhz;
}
std::uint32_t device::preferred_vector_width(scalar_kind kind) const {
  return get_impl().vector_widths[static_cast<int>(kind)];
}
const std::vector<std::string>& device::extensions() const {
  return get_impl().extensions;
}
bool device::has_extension(const std::string& name) const {
  auto& e = get_impl().extensions;
  return std::binary_search(e.begin(), e.end(), name);
}
bool device::has_fp16() const {
  return get_impl().fp16;
}
bool device::has_fp64() const {
  return get_impl().fp64;
}
bool device::has_svm() const {
  return get_impl().svm;
}
bool device::has_subgroups() const {
  return get_impl().subgroups;
}
std::uint64_t device::profiling_resolution_ns() const {
  return get_impl().profiling_resolution;
}
const device_fingerprint& device::fingerprint() const {
  return get_impl().fingerprint;
}

}  // namespace prism
