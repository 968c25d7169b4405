// SPDX-License-Identifier: Apache-2.0
// What `prism --version` and `prism-llm --version` print: prism's version, the git commit it was
// built from, the build type and compiler, and the OpenCL and CLBlast versions (built against,
// and the OpenCL platforms found at run time).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace prism::cli {

/// Several lines, the first "<program> <version> (git <hash>, <build type>)".
std::string version_text(const std::string& program);
/// The same facts as JSON (for `prism version --json`).
nlohmann::json version_json();

}  // namespace prism::cli
