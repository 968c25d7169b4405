// SPDX-License-Identifier: Apache-2.0
// `prism routes`: the dispatcher's effective routes table for a device, with the origin of each
// entry (env variable, routes file line, vendor profile line or built-in order).
#include <nlohmann/json.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

PRISM_CLI_COMMAND(40) {
  auto* cmd = app.add_subcommand("routes",
                                 "Print the effective per-op routes (backend, tier and origin) for a device");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--device", global.device,
                  std::string("Device (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->callback([&global, &exit_code, json] {
    auto dev = prism::cli::pick_device(global.device);
    prism::dispatch::init();
    auto routes = prism::dispatch::effective_routes(dev);
    auto vendor = prism::dispatch::matched_vendor(dev);
    if (*json) {
      nlohmann::json out;
      out["device"] = dev.name();
      out["fingerprint"] = dev.fingerprint().hash;
      out["vendor"] = vendor.name;
      out["routes"] = nlohmann::json::array();
      for (const auto& r : routes)
        out["routes"].push_back({{"op", r.op},
                                 {"backend", r.backend},
                                 {"tier", prism::dispatch::source_tier_name(r.tier)},
                                 {"origin", r.origin},
                                 {"unused", r.unused},
                                 {"order", r.order},
                                 {"cases", [&] {
                                    auto cases = nlohmann::json::array();
                                    for (const auto& c : r.cases)
                                      cases.push_back({{"when", c.when},
                                                       {"backend", c.backend},
                                                       {"config", c.config},
                                                       {"tier", prism::dispatch::source_tier_name(c.tier)},
                                                       {"origin", c.origin}});
                                    return cases;
                                  }()}});
      std::printf("%s\n", out.dump(2).c_str());
      exit_code = 0;
      return;
    }
    const std::size_t width = prism::cli::terminal_width();
    std::printf("%s",
                prism::cli::wrap("device: " + dev.name() + " [" + dev.fingerprint().hash +
                                     "], vendor profile: " + (vendor.name.empty() ? "(none)" : vendor.name),
                                 width, 2)
                    .c_str());
    std::printf(
        "%s",
        prism::cli::wrap("precedence: env > routes file > tuning db (per shape) > vendor > default", width, 2)
            .c_str());
    using align = prism::cli::table::align;
    prism::cli::table t;
    t.column("op")
        .column("backend")
        .column("tier")
        .column("order", align::left, true, 12)
        .droppable()
        .column("origin", align::left, true, 10);
    for (const auto& r : routes) {
      std::string order;
      for (const auto& b : r.order) order += (order.empty() ? "" : ">") + b;
      t.row({r.op, r.backend, prism::dispatch::source_tier_name(r.tier), order,
             r.origin + (r.unused ? " [unused]" : "")});
      // Shape conditions, as they are tried before the row above (which serves what none takes).
      for (const auto& c : r.cases)
        t.row({"", c.backend, prism::dispatch::source_tier_name(c.tier), "",
               "when " + c.when + (c.config.empty() ? "" : " {" + c.config + "}") + " (" + c.origin + ")"});
    }
    std::printf("%s", t.render(width).c_str());
    exit_code = 0;
  });
}
