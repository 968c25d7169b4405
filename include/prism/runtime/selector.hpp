// SPDX-License-Identifier: Apache-2.0
// Device selection, SYCL style: a selector scores devices; the highest non-negative score wins.
// PRISM_DEVICE filters and orders the candidates of the default selector.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "prism/runtime/device.hpp"

namespace prism {

/// A scoring callable: negative rejects a device, higher is better.
using device_selector = std::function<int(const device&)>;

/// Prefers the PRISM_DEVICE filter's first match when set, else a GPU, else a CPU.
int default_selector_v(const device& d);
int cpu_selector_v(const device& d);
int gpu_selector_v(const device& d);

/// The highest-scoring device; ties keep enumeration order. Throws errc::device_not_found with
/// the list of available devices when every score is negative.
device select_device(const device_selector& selector = default_selector_v);

/// Devices that match a PRISM_DEVICE-style spec, in the spec's order. A spec is a comma list of
/// terms; a term is `cpu`, `gpu`, `accelerator`, a platform or vendor word (`pocl`, `nvidia`,
/// `intel`, `amd`), any of those with `:N` (N-th match), a bare index `N` (global index), or a
/// case-insensitive substring of the device name. Throws errc::device_not_found, listing every
/// device and the syntax, when nothing matches; `source` names where the spec came from in
/// errors ("PRISM_DEVICE", "--device", ...).
std::vector<device> devices_matching(const std::string& spec, std::string_view source = "PRISM_DEVICE");

/// The syntax accepted by PRISM_DEVICE, for error messages and --help.
const char* device_spec_syntax() noexcept;

}  // namespace prism
