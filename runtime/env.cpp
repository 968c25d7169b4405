// SPDX-License-Identifier: Apache-2.0
// Environment cache: each variable is read from the process environment once.
#include "runtime/env.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "prism/error.hpp"

namespace prism::env {
namespace {
struct cache {
  std::mutex mutex;
  std::map<std::string, std::optional<std::string>, std::less<>> values;
};
cache& the_cache() {
  static auto* c = new cache;  // never destroyed: may be read from other static destructors
  return *c;
}
}  // namespace

std::optional<std::string> get(std::string_view name) {
  auto& c = the_cache();
  std::lock_guard lock(c.mutex);
  auto it = c.values.find(name);
  if (it != c.values.end()) return it->second;
  std::string key(name);
  const char* v = std::getenv(key.c_str());
  std::optional<std::string> value = v ? std::optional<std::string>(v) : std::nullopt;
  c.values.emplace(std::move(key), value);
  return value;
}

std::string get_or(std::string_view name, std::string_view fallback) {
  auto v = get(name);
  return v && !v->empty() ? *v : std::string(fallback);
}

long long get_int(std::string_view name, long long fallback) {
  auto v = get(name);
  if (!v || v->empty()) return fallback;
  try {
    std::size_t used = 0;
    long long r = std::stoll(*v, &used);
    if (used == v->size()) return r;
  } catch (const std::exception&) {
  }
  throw error(errc::config_error, "env", std::string(name) + "='" + *v + "' is not an integer");
}

bool get_bool(std::string_view name, bool fallback) {
  auto v = get(name);
  if (!v || v->empty()) return fallback;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "on" || s == "true" || s == "yes") return true;
  if (s == "0" || s == "off" || s == "false" || s == "no") return false;
  throw error(errc::config_error, "env",
              std::string(name) + "='" + *v + "' is not a boolean; use 1/0, on/off, true/false or yes/no");
}

void override_for_testing(std::string_view name, std::optional<std::string> value) {
  auto& c = the_cache();
  std::lock_guard lock(c.mutex);
  c.values.insert_or_assign(std::string(name), std::move(value));
}

}  // namespace prism::env
