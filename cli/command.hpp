// SPDX-License-Identifier: Apache-2.0
// The `prism` command's subcommand registry: each cli/cmd_*.cpp registers itself, so adding a
// command touches one file.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "prism/runtime.hpp"

namespace prism::cli {

/// Options every subcommand shares (device and database selection).
struct global_options {
  std::string device;  ///< --device: a PRISM_DEVICE-style spec; empty = PRISM_DEVICE / default
  std::string db;      ///< --db: tuning database path; empty = PRISM_TUNING_DB / default
};

/// The device a command runs on: the one `spec` (--device) matches first, errors naming
/// --device; with no spec, PRISM_DEVICE's or the default device.
inline device pick_device(const std::string& spec) {
  return spec.empty() ? select_device() : devices_matching(spec, "--device").front();
}

/// A CLI11 check that refuses an empty value ("--db ''"), naming the option.
inline CLI::Validator non_empty_path(const std::string& option) {
  return CLI::Validator(
      [option](std::string& value) {
        return value.empty() ? option + " needs a file name, got an empty string" : std::string();
      },
      "PATH");
}

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
