// SPDX-License-Identifier: Apache-2.0
// data_dir(): PRISM_DATA_DIR, else the install prefix of libprism_runtime, else the source tree.
#include "runtime/paths.hpp"

#include <dlfcn.h>

#include <string>
#include <system_error>

#include "prism/error.hpp"
#include "runtime/env.hpp"
#include "runtime/log.hpp"

namespace prism {
namespace {
std::filesystem::path library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&data_dir), &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  auto p = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).parent_path() : p.parent_path();
}

std::filesystem::path resolve() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (auto v = env::get("PRISM_DATA_DIR"); v && !v->empty()) {
    if (fs::is_directory(*v, ec)) return fs::path(*v);
    throw error(errc::not_found, "prism::data_dir", "PRISM_DATA_DIR='" + *v + "' is not a directory");
  }
  // Installed: <prefix>/<libdir>/libprism_runtime.so -> <prefix>/share/prism (libdir may be
  // lib or lib/<multiarch>). An installed prism reads its own data, not the tree it came from.
  std::string looked;
  fs::path lib = library_dir();
  for (const fs::path& dir : {lib.parent_path(), lib.parent_path().parent_path()}) {
    if (dir.empty()) continue;
    fs::path candidate = dir / PRISM_INSTALL_DATA_DIR;
    if (fs::is_directory(candidate / "vendors", ec)) return candidate;
    looked += candidate.string() + ", ";
  }
  // A build tree: the source tree's data.
  fs::path source = PRISM_SOURCE_DATA_DIR;
  if (fs::is_directory(source / "vendors", ec)) return source;
  looked += source.string();
  throw error(errc::not_found, "prism::data_dir",
              "no data directory with vendors/ found (looked in " + looked +
                  "); set PRISM_DATA_DIR to the folder that holds vendors/");
}
}  // namespace

const std::filesystem::path& data_dir() {
  static const auto* dir = [] {
    auto* p = new std::filesystem::path(resolve());
    log::get("runtime")->debug("data dir: {}", p->string());
    return p;
  }();
  return *dir;
}

}  // namespace prism
