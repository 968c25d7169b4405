// SPDX-License-Identifier: Apache-2.0
// `prism devices`: every OpenCL device with its fingerprint, the default one marked; --json too.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "prism/runtime.hpp"

namespace {
std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

nlohmann::json device_json(const prism::device& d, bool is_default) {
  using prism::scalar_kind;
  nlohmann::json widths = {{"char", d.preferred_vector_width(scalar_kind::char_)},
                           {"short", d.preferred_vector_width(scalar_kind::short_)},
                           {"int", d.preferred_vector_width(scalar_kind::int_)},
                           {"long", d.preferred_vector_width(scalar_kind::long_)},
                           {"half", d.preferred_vector_width(scalar_kind::half_)},
                           {"float", d.preferred_vector_width(scalar_kind::float_)},
                           {"double", d.preferred_vector_width(scalar_kind::double_)}};
  return {{"index", d.global_index()},
          {"index_in_platform", d.index_in_platform()},
          {"default", is_default},
          {"type", prism::device_type_name(d.type())},
          {"name", d.name()},
          {"vendor", d.vendor()},
          {"vendor_id", d.vendor_id()},
          {"platform", d.platform_name()},
          {"platform_version", d.platform_version()},
          {"driver_version", d.driver_version()},
          {"opencl_version", d.opencl_version()},
          {"opencl_c_version", d.opencl_c_version()},
          {"compute_units", d.compute_units()},
          {"max_clock_mhz", d.max_clock_mhz()},
          {"global_mem_bytes", d.global_mem_size()},
          {"local_mem_bytes", d.local_mem_size()},
          {"max_alloc_bytes", d.max_mem_alloc_size()},
          {"max_work_group_size", d.max_work_group_size()},
          {"preferred_vector_widths", widths},
          {"fp16", d.has_fp16()},
          {"fp64", d.has_fp64()},
          {"svm", d.has_svm()},
          {"subgroups", d.has_subgroups()},
          {"extensions", d.extensions()},
          {"fingerprint", {{"text", d.fingerprint().text}, {"hash", d.fingerprint().hash}}}};
}
}  // namespace

PRISM_CLI_COMMAND(10) {
  auto* cmd =
      app.add_subcommand("devices", "List OpenCL devices with their fingerprints; * marks the default");
  auto json = std::make_shared<bool>(false);  // owned by the callback, which the CLI::App keeps
  cmd->add_flag("--json", *json, "Print the devices (with every queried property) as JSON");
  cmd->add_option("--device", global.device,
                  "Mark the device this PRISM_DEVICE-style spec picks instead of the default");
  cmd->callback([json, &global, &exit_code] {
    auto devices = prism::device::get_devices();
    prism::device chosen;
    std::string default_error;
    try {
      chosen = prism::cli::pick_device(global.device);
    } catch (const prism::error& e) {
      default_error = e.what();
    }
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (auto& d : devices) out.push_back(device_json(d, chosen && d == chosen));
      std::cout << out.dump(2) << "\n";
    } else {
      using align = prism::cli::table::align;
      prism::cli::table t;
      // The fingerprint and the OpenCL C version are never cut; the vendor, memory and compute
      // units go first when the terminal is narrow.
      t.column("#")
          .column("type")
          .column("name", align::left, true, 12)
          .column("vendor", align::left, true, 6)
          .droppable(0, true)
          .column("CUs", align::right)
          .droppable(2)
          .column("global mem", align::right)
          .droppable(1)
          .column("fingerprint")
          .column("OpenCL C");
      for (auto& d : devices) {
        bool is_default = chosen && d == chosen;
        t.row({std::to_string(d.global_index()) + (is_default ? "*" : ""), prism::device_type_name(d.type()),
               d.name(), d.vendor(), std::to_string(d.compute_units()), mib(d.global_mem_size()),
               d.fingerprint().hash, d.opencl_c_version()});
      }
      std::printf("%s", t.render(prism::cli::terminal_width()).c_str());
      if (devices.empty())
        std::printf("(no OpenCL devices; is an ICD such as pocl-opencl-icd installed?)\n");
      else if (chosen)
        std::printf("%s\n", global.device.empty()
                                ? "* default device (PRISM_DEVICE selects another; see --help)"
                                : "* the device --device picks");
    }
    if (!default_error.empty()) {
      if (global.device.empty())
        std::fprintf(stderr, "prism devices: no default device: %s\n", default_error.c_str());
      else
        std::fprintf(stderr, "prism devices: %s\n", default_error.c_str());
      exit_code = 1;
    } else if (devices.empty()) {
      exit_code = 1;
    }
  });
  cmd->footer(std::string("Device selection: ") + prism::device_spec_syntax() + "\n");
}
