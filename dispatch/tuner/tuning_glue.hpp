// Glue between the dispatcher and the tuning database: the kernel hash stored with each row
// (and re-checked at lookup), the dtype key the database uses, and the tier-3 lookup hook.
#pragma once

#include <string>
#include <string_view>

#include "prism/runtime/device.hpp"

namespace prism::dispatch::tuner {

/// Hash (16 hex digits) of what decides a tuned row's speed besides the device: for opencl the
/// op's kernel sources (embedded or the vendor override) + the config; for clblast the library
/// and the parameter set; for host the backend name. Rows whose hash differs are skipped.
std::string kernel_hash(const device& dev, const std::string& op, const std::string& backend,
                        const std::string& config);

/// The dtype column for a call's dispatch dtypes ("f32|f32|-" -> "f32"): the one dtype when
/// every defined input shares it, else the defined dtypes joined by '|'.
std::string dtype_key(std::string_view dispatch_dtypes);

/// Installs the dispatcher's tier-3 lookup on the process-wide tuning database (done once at
/// library load; call again after uninstall_db_lookup). Misses are recorded for
/// PRISM_RECORD_UNTUNED.
void install_db_lookup();
/// Removes it (untuned defaults), e.g. while pretune measures the default route.
void uninstall_db_lookup();

}  // namespace prism::dispatch::tuner
