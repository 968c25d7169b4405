// SPDX-License-Identifier: Apache-2.0
// Per-layer spdlog loggers on one shared stderr sink; level from PRISM_LOG_LEVEL.
#include "runtime/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <map>
#include <mutex>
#include <string>

#include "runtime/env.hpp"

namespace prism::log {
namespace {
struct registry {
  std::mutex mutex;
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;
  spdlog::level::level_enum level = spdlog::level::warn;
  bool invalid_level = false;
  std::string invalid_value;
};

registry& the_registry() {
  static auto* r = [] {
    auto* reg = new registry;  // never destroyed: loggers stay usable during exit
    reg->sink->set_pattern("[%H:%M:%S.%e] [prism:%n] [%^%l%$] %v");
    auto v = env::get_or("PRISM_LOG_LEVEL", "warn");
    if (v == "off")
      reg->level = spdlog::level::off;
    else if (v == "error")
      reg->level = spdlog::level::err;
    else if (v == "warn" || v == "warning")
      reg->level = spdlog::level::warn;
    else if (v == "info")
      reg->level = spdlog::level::info;
    else if (v == "debug")
      reg->level = spdlog::level::debug;
    else if (v == "trace")
      reg->level = spdlog::level::trace;
    else {
      reg->invalid_level = true;
      reg->invalid_value = v;
    }
    return reg;
  }();
  return *r;
}
}  // namespace

std::shared_ptr<spdlog::logger> get(std::string_view layer) {
  auto& r = the_registry();
  std::unique_lock lock(r.mutex);
  auto it = r.loggers.find(layer);
  if (it != r.loggers.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(std::string(layer), r.sink);
  logger->set_level(r.level);
  logger->flush_on(spdlog::level::warn);
  r.loggers.emplace(std::string(layer), logger);
  if (r.invalid_level) {
    r.invalid_level = false;
    logger->warn(
        "PRISM_LOG_LEVEL='{}' is not a level; valid: off, error, warn, info, debug, trace. Using warn.",
        r.invalid_value);
  }
  return logger;
}

spdlog::level::level_enum configured_level() {
  return the_registry().level;
}

void set_level(spdlog::level::level_enum level) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  r.level = level;
  for (auto& [name, logger] : r.loggers) logger->set_level(level);
}

}  // namespace prism::log
