// SPDX-License-Identifier: Apache-2.0
// The `prism` command's subcommand registry: each cli/cmd_*.cpp registers itself, so adding a
// command touches one file.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"

namespace prism::cli {

/// Options every subcommand shares (device and database selection).
struct global_options {
  std::string device;  ///< --device: a PRISM_DEVICE-style spec; empty = PRISM_DEVICE / default
  std::string db;      ///< --db: tuning database file or URL; empty = PRISM_TUNING_DB / default
};

/// The device a command runs on: the one `spec` (--device) matches first, errors naming
/// --device; with no spec, PRISM_DEVICE's or the default device.
inline device pick_device(const std::string& spec) {
  return spec.empty() ? select_device() : devices_matching(spec, "--device").front();
}

/// A CLI11 check for a tuning database location (--db): an SQLite file path, or a
/// postgresql:// or postgres:// URL; an empty value or another scheme is refused, saying what
/// is valid.
inline CLI::Validator db_location() {
  return CLI::Validator(
      [](std::string& value) {
        // CLI11 puts the option's name in front of the message.
        if (value.empty())
          return std::string("needs a file name or a postgresql:// URL, got an empty string");
        return tuning::database::location_error(value);
      },
      "FILE|URL");
}

/// The help text of --db.
inline constexpr const char* db_option_help =
    "Tuning database: an SQLite file or a postgresql:// URL (default: PRISM_TUNING_DB, else "
    "${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db)";

/// Adds one subcommand to `app`; its callback runs when the subcommand is chosen and returns
/// the process exit code through `exit_code`.
using command_factory = std::function<void(CLI::App& app, global_options& global, int& exit_code)>;

/// Registers a subcommand factory; `order` sorts the help listing.
bool register_command(int order, command_factory factory);

/// Runs one dispatch log line (v1 or v2) as `prism run --replay LINE --repeat N` does (cli/cmd_run.cpp)
/// and returns its exit code; throws what that command throws.
int replay_log_line(const std::string& line, const std::string& device_spec, int repeat);

}  // namespace prism::cli

#define PRISM_CLI_CONCAT2(a, b) a##b
#define PRISM_CLI_CONCAT(a, b) PRISM_CLI_CONCAT2(a, b)
/// PRISM_CLI_COMMAND(order) { ...body using app, global, exit_code... }
#define PRISM_CLI_COMMAND(order)                                                                          \
  static void PRISM_CLI_CONCAT(prism_cli_cmd_, __LINE__)(CLI::App&, ::prism::cli::global_options&, int&); \
  static const bool PRISM_CLI_CONCAT(prism_cli_reg_, __LINE__) =                                          \
      ::prism::cli::register_command(order, &PRISM_CLI_CONCAT(prism_cli_cmd_, __LINE__));                 \
  static void PRISM_CLI_CONCAT(prism_cli_cmd_, __LINE__)(                                                 \
      CLI::App & app, ::prism::cli::global_options & global, int& exit_code)
