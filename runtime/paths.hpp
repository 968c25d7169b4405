// SPDX-License-Identifier: Apache-2.0
// Where prism's data files (vendor profiles, shape sets) live. Thread safety: safe.
#pragma once

#include <filesystem>

namespace prism {

/// PRISM_DATA_DIR when set; else <prefix>/share/prism when the library is installed (found
/// relative to libprism_runtime); else the source tree when running from a build tree.
/// Resolved once. Throws errc::not_found naming every place it looked when none exists.
const std::filesystem::path& data_dir();

}  // namespace prism
