// SPDX-License-Identifier: Apache-2.0
// `prism vendors`: the vendor profiles found (shipped and PRISM_VENDOR_PATH) and which one
// matches each OpenCL device; --json too.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

PRISM_CLI_COMMAND(41) {
  auto* cmd = app.add_subcommand("vendors", "List vendor profiles and the one each device matches");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->callback([&exit_code, json] {
    prism::dispatch::init();
    auto profiles = prism::dispatch::vendor_profiles();
    auto devices = prism::device::get_devices();
    if (*json) {
      nlohmann::json out = {{"profiles", nlohmann::json::array()}, {"devices", nlohmann::json::array()}};
      for (const auto& p : profiles)
        out["profiles"].push_back({{"name", p.name},
                                   {"priority", p.priority},
                                   {"directory", p.directory},
                                   {"match", p.match_summary},
                                   {"kernel_overrides", p.kernel_overrides}});
      for (const auto& d : devices) {
        auto v = prism::dispatch::matched_vendor(d);
        out["devices"].push_back({{"index", d.global_index()},
                                  {"name", d.name()},
                                  {"platform", d.platform_name()},
                                  {"type", prism::device_type_name(d.type())},
                                  {"profile", v.name.empty() ? nlohmann::json() : nlohmann::json(v.name)}});
      }
      std::cout << out.dump(2) << "\n";
      exit_code = prism::cli::exit_ok;
      return;
    }
    const std::size_t width = prism::cli::terminal_width();
    std::printf("%s", prism::cli::wrap(
                          "vendor profiles (PRISM_VENDOR_PATH adds more; PRISM_VENDOR forces one):", width, 2)
                          .c_str());
    for (const auto& p : profiles) {
      std::printf("%s", prism::cli::wrap("  " + p.name + " (priority " + std::to_string(p.priority) +
                                             "), match: " + p.match_summary,
                                         width, 6)
                            .c_str());
      // A path is printed whole, on a line of its own: cut, it would name nothing.
      std::printf("    %s\n", p.directory.c_str());
      if (!p.kernel_overrides.empty()) {
        std::string files;
        for (const auto& k : p.kernel_overrides) files += (files.empty() ? "" : ", ") + k;
        std::printf("%s", prism::cli::wrap("    kernel overrides: " + files, width, 6).c_str());
      }
    }
    std::printf("devices:\n");
    for (const auto& d : devices) {
      auto v = prism::dispatch::matched_vendor(d);
      // The profile first: a long device name is what gets cut.
      std::printf("%s\n",
                  prism::cli::fit("  [" + std::to_string(d.global_index()) + "] -> " +
                                      (v.name.empty() ? "(no profile)" : v.name) + ": " + d.name() + " (" +
                                      d.platform_name() + ", " + prism::device_type_name(d.type()) + ")",
                                  width)
                      .c_str());
    }
    exit_code = prism::cli::exit_ok;
  });
}
