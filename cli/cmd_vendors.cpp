// `prism vendors`: the vendor profiles found (shipped and PRISM_VENDOR_PATH) and which one
// matches each OpenCL device.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

PRISM_CLI_COMMAND(41) {
  auto* cmd = app.add_subcommand("vendors", "List vendor profiles and the one each device matches");
  cmd->callback([&exit_code] {
    prism::dispatch::init();
    auto profiles = prism::dispatch::vendor_profiles();
    std::printf("vendor profiles (PRISM_VENDOR_PATH adds more; PRISM_VENDOR forces one):\n");
    for (const auto& p : profiles) {
      std::printf("  %-10s priority %-3d %s\n", p.name.c_str(), p.priority, p.directory.c_str());
      std::printf("             match: %s\n", p.match_summary.c_str());
      if (!p.kernel_overrides.empty()) {
        std::string files;
        for (const auto& k : p.kernel_overrides) files += (files.empty() ? "" : ", ") + k;
        std::printf("             kernel overrides: %s\n", files.c_str());
      }
    }
    std::printf("devices:\n");
    for (const auto& d : prism::device::get_devices()) {
      auto v = prism::dispatch::matched_vendor(d);
      std::printf("  [%zu] %s (%s, %s) -> %s\n", d.global_index(), d.name().c_str(),
                  d.platform_name().c_str(), prism::device_type_name(d.type()),
                  v.name.empty() ? "(no profile)" : v.name.c_str());
    }
    exit_code = 0;
  });
}
