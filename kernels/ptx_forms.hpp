// SPDX-License-Identifier: Apache-2.0
// Which inline-PTX forms a device's OpenCL driver builds (NVIDIA's platform only): tensor-core
// mma, ldmatrix, cp.async, dp4a and warp shuffles. Kernels that use a form check it here first and
// build their portable path when it is missing.
#pragma once

#include <map>
#include <string>

#include <fmt/format.h>

#include "prism/runtime/device.hpp"

namespace prism {

/// The forms one device builds; has(form) is false off NVIDIA's platform and for rejected forms.
struct ptx_forms {
  std::string not_nvidia;  // why no form is tried (the platform is not NVIDIA's); empty otherwise
  std::map<std::string, std::string> rejected;  // form -> the build error
  bool has(const std::string& form) const { return not_nvidia.empty() && !rejected.count(form); }
  std::string why(const std::string& form) const {
    if (!not_nvidia.empty()) return not_nvidia;
    auto it = rejected.find(form);
    return it == rejected.end() ? std::string()
                                : fmt::format("driver rejects inline PTX {}: {}", form, it->second);
  }
};

/// Probed once per device with a tiny kernel per form (cached for the process); every rejected
/// form is logged once with the driver's reason. Forms: "mma.m16n8k8.tf32", "mma.m16n8k16.f16",
/// "mma.m16n8k16.bf16", "ldmatrix", "dp4a", "cp.async", "shfl"
/// (shfl.sync.bfly.b32), "fence" (fence.acq_rel.gpu, ld.relaxed.gpu, nanosleep), "wgmma".
const ptx_forms& probe_ptx(const device& dev);

}  // namespace prism
