// SPDX-License-Identifier: Apache-2.0
// Environment variables, read once per name and cached for the life of the process, so a
// setting cannot change under a running program. Thread safety: safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace prism::env {

/// The value of `name`, or nullopt when unset. The first call for a name reads the environment;
/// later calls return that value.
std::optional<std::string> get(std::string_view name);
/// The value of `name`, or `fallback` when unset or empty.
std::string get_or(std::string_view name, std::string_view fallback);
/// Integer value; throws errc::config_error naming the variable when it is not an integer.
long long get_int(std::string_view name, long long fallback);
/// true for 1/on/true/yes, false for 0/off/false/no; throws errc::config_error otherwise.
bool get_bool(std::string_view name, bool fallback);

/// Replaces the cached value (nullopt = unset) for tests that need another setting.
void override_for_testing(std::string_view name, std::optional<std::string> value);

}  // namespace prism::env
