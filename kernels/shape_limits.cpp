// SPDX-License-Identifier: Apache-2.0
// Shape keys against device limits (see shape_limits.hpp).
#include "kernels/shape_limits.hpp"

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism {
namespace {
std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", bytes, units[u]);
}
}  // namespace

void check_shape_limits(std::string_view operation, std::string_view op, const shape_key& key, dtype type,
                        const device& dev) {
  const std::uint64_t max_alloc = dev.max_mem_alloc_size();
  const std::uint64_t elem = dtype_size(type);
  const std::uint64_t limit = elem ? max_alloc / elem : max_alloc;
  for (const auto& [name, value] : key.components()) {
    if (value < 0)
      throw error(errc::invalid_argument, std::string(operation),
                  fmt::format("{} shape component {}={} is negative; valid {}: 0 to {} (for {} on {})", op,
                              name, value, name, limit, dtype_name(type), dev.name()));
    if (max_alloc && static_cast<std::uint64_t>(value) > limit) {
      double need = static_cast<double>(value) * static_cast<double>(elem);
      throw error(
          errc::out_of_memory, std::string(operation),
          fmt::format("{} shape component {}={} needs at least {:.0f} bytes ({}) of {} in one buffer, but {} "
                      "allocates at most {} bytes ({}) per buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); valid {}: "
                      "0 to {}",
                      op, name, value, need, human_bytes(need), dtype_name(type), dev.name(), max_alloc,
                      human_bytes(static_cast<double>(max_alloc)), name, limit));
    }
  }
}

}  // namespace prism
