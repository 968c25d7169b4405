// SPDX-License-Identifier: Apache-2.0
// The opencl backend's pretune search: the configs of the vendor's tune space and the ones
// generated around them (what `prism pretune` tries for an op on prism's own kernels).
#pragma once

#include <string>
#include <vector>

#include "dispatch/backends/backend.hpp"

namespace prism::dispatch {

/// The opencl configs pretune tries: every config of the vendor's tune_configs.yaml space
/// (default first), then configs generated around them: each parameter the file varies is
/// stepped through its allowed values (schema-valid only; random strategy: at most
/// max_per_backend of them).
struct opencl_space {
  std::string vendor;  ///< the profile the space came from
  std::vector<std::string> explicit_configs;
  std::vector<std::string> generated;
};
opencl_space opencl_configs(const op_descriptor& d, const vendor_context& vendor,
                            const candidate_options& options);

}  // namespace prism::dispatch
