// SPDX-License-Identifier: Apache-2.0
// Internal helpers shared by the tuning_db layer: its logger, env access and error shorthands.
#pragma once

#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "prism/error.hpp"

namespace prism::tuning::detail {

/// The layer's spdlog logger ("tuning_db").
spdlog::logger& log();

/// An environment variable as prism's env helper reads it (once per process); nullopt if unset
/// or empty.
std::optional<std::string> env(const char* name);

/// Unix time in seconds.
std::int64_t now_seconds();

inline prism::error db_error(std::string operation, std::string message) {
  return prism::error(prism::errc::database_error, std::move(operation), std::move(message));
}

}  // namespace prism::tuning::detail
