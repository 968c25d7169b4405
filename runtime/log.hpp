// SPDX-License-Identifier: Apache-2.0
// One named spdlog logger per layer ("runtime", "kernels", "dispatch", "tuning_db", "cli", ...),
// all writing to stderr at the level PRISM_LOG_LEVEL sets (off|error|warn|info|debug|trace,
// default warn). Thread safety: safe.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

namespace prism::log {

/// The logger named `layer`, created on first use and never destroyed.
std::shared_ptr<spdlog::logger> get(std::string_view layer);

/// The level PRISM_LOG_LEVEL selects (warn when unset). An invalid value logs a warning once
/// listing the valid names and falls back to warn.
spdlog::level::level_enum configured_level();

/// Sets the level of every prism logger, now and for loggers created later.
void set_level(spdlog::level::level_enum level);

}  // namespace prism::log
