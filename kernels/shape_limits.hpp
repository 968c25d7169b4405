// SPDX-License-Identifier: Apache-2.0
// Checking a shape key against a device before anything is allocated for it (`prism run`,
// pretune): a component that is negative, or that alone needs more than one buffer may hold,
// is refused with the valid range instead of reaching std::vector or the driver.
#pragma once

#include <string_view>

#include "kernels/op_descriptor.hpp"
#include "prism/dtype.hpp"
#include "prism/runtime.hpp"

namespace prism {

/// Throws errc::invalid_argument for a negative component, and errc::out_of_memory naming both
/// sizes when one component times the dtype's size exceeds the device's largest allocation
/// (CL_DEVICE_MAX_MEM_ALLOC_SIZE); both messages give the valid range of that component.
/// `operation` names the caller in the error ("prism run").
void check_shape_limits(std::string_view operation, std::string_view op, const shape_key& key, dtype type,
                        const device& dev);

}  // namespace prism
