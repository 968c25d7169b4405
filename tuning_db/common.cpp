// SPDX-License-Identifier: Apache-2.0
// The tuning_db layer's logger, env access and clock.
#include "tuning_db/common.hpp"

#include <chrono>

#include "runtime/env.hpp"
#include "runtime/log.hpp"

namespace prism::tuning::detail {

spdlog::logger& log() {
  static auto logger = prism::log::get("tuning_db");
  return *logger;
}

std::optional<std::string> env(const char* name) {
  auto value = prism::env::get(name);
  if (!value || value->empty()) return std::nullopt;
  return std::string(*value);
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace prism::tuning::detail
