// SPDX-License-Identifier: Apache-2.0
// Pretune candidates for one op on one device: what every backend of the registry proposes
// (dispatch/backends/*: its own search space and policy), deduplicated. The untuned default
// route itself is measured by the tuner, not listed here.
#pragma once

#include <vector>

#include "dispatch/backends/backend.hpp"

namespace prism::dispatch::tuner {

/// Candidate list for `d` on `dev`, in registry order then each backend's order, deduplicated.
std::vector<candidate> make_candidates(const device& dev, const op_descriptor& d, dtype type,
                                       const vendor_context& vendor, const candidate_options& options);

}  // namespace prism::dispatch::tuner
