// `prism routes`: the dispatcher's effective routes table for a device, with the origin of each
// entry (env variable, routes file line, vendor profile line or built-in order).
#include <nlohmann/json.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "cli/command.hpp"
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
    std::printf("device: %s [%s], vendor profile: %s\n", dev.name().c_str(), dev.fingerprint().hash.c_str(),
                vendor.name.empty() ? "(none)" : vendor.name.c_str());
    std::printf("precedence: env > routes file > tuning db (per shape) > vendor > default\n");
    std::size_t w = 2;
    for (const auto& r : routes) w = std::max(w, r.op.size());
    std::printf("%s\n",
                fmt::format("{:<{}}  {:<8}  {:<8}  {:<24}  {}", "op", w, "backend", "tier", "order", "origin")
                    .c_str());
    for (const auto& r : routes) {
      std::string order;
      for (const auto& b : r.order) order += (order.empty() ? "" : ">") + b;
      std::printf("%s\n", fmt::format("{:<{}}  {:<8}  {:<8}  {:<24}  {}{}", r.op, w, r.backend,
                                      prism::dispatch::source_tier_name(r.tier), order, r.origin,
                                      r.unused ? " [unused]" : "")
                              .c_str());
      // Shape conditions first, as they are tried; the line above serves what none takes.
      for (const auto& c : r.cases)
        std::printf("%s\n", fmt::format("{:<{}}    when {} -> {}{}  ({}, {})", "", w, c.when, c.backend,
                                        c.config.empty() ? "" : " {" + c.config + "}",
                                        prism::dispatch::source_tier_name(c.tier), c.origin)
                                .c_str());
    }
    exit_code = 0;
  });
}
