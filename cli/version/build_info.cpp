// SPDX-License-Identifier: Apache-2.0
// version_text / version_json (see build_info.hpp). The git hash comes from a file generated at
// every build (cmake/git_hash.cmake), so it follows commits without a reconfigure.
#include "cli/version/build_info.hpp"

#include <clblast.h>

#include <set>
#include <utility>

#include <fmt/format.h>

#include "prism/runtime.hpp"
#include "prism/version.hpp"

namespace prism::cli::detail {
extern const char* const git_hash;  // generated: "<12 hex>[-dirty]" or "unknown"
}

namespace prism::cli {
namespace {

std::string clblast_version() {
  return fmt::format("{}.{}.{}", CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR, CLBLAST_VERSION_PATCH);
}

std::string opencl_target() {
  return fmt::format("{}.{}", CL_TARGET_OPENCL_VERSION / 100, CL_TARGET_OPENCL_VERSION % 100 / 10);
}

// "<platform>: <version>" once per platform; an empty list when no ICD answers.
std::vector<std::pair<std::string, std::string>> platforms() {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  try {
    for (const auto& d : device::get_devices())
      if (seen.insert(d.platform_name()).second) out.emplace_back(d.platform_name(), d.platform_version());
  } catch (const std::exception&) {
    // --version must work without a usable OpenCL installation.
  }
  return out;
}

}  // namespace

std::string version_text(const std::string& program) {
  std::string out =
      fmt::format("{} {} (git {}, {} build, {} {})\n", program, prism::version(), detail::git_hash,
                  PRISM_BUILD_TYPE, PRISM_COMPILER_ID, PRISM_COMPILER_VERSION);
  out += fmt::format("  OpenCL: built for {} (headers), CLBlast {}\n", opencl_target(), clblast_version());
  auto found = platforms();
  if (found.empty()) out += "  OpenCL platforms: none found (is an ICD such as pocl-opencl-icd installed?)\n";
  for (const auto& [name, version] : found) out += fmt::format("  OpenCL platform: {} ({})\n", name, version);
  return out;
}

nlohmann::json version_json() {
  nlohmann::json plats = nlohmann::json::array();
  for (const auto& [name, version] : platforms()) plats.push_back({{"name", name}, {"version", version}});
  return {{"version", prism::version()},
          {"git", detail::git_hash},
          {"build_type", PRISM_BUILD_TYPE},
          {"compiler", fmt::format("{} {}", PRISM_COMPILER_ID, PRISM_COMPILER_VERSION)},
          {"opencl_target", opencl_target()},
          {"clblast", clblast_version()},
          {"opencl_platforms", plats}};
}

}  // namespace prism::cli
