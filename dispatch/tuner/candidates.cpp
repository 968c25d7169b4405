// SPDX-License-Identifier: Apache-2.0
// Candidate generation for pretune: the union of what each backend proposes.
#include "dispatch/tuner/candidates.hpp"

#include <set>

namespace prism::dispatch::tuner {

std::vector<candidate> make_candidates(const device& dev, const op_descriptor& d, dtype type,
                                       const vendor_context& vendor, const candidate_options& options) {
  std::vector<candidate> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const backend* b : backend_registry())
    for (auto& c : b->candidates(dev, d, type, vendor, options))
      if (seen.emplace(c.backend, c.config).second) out.push_back(std::move(c));
  return out;
}

}  // namespace prism::dispatch::tuner
