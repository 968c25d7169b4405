// Where prism's data files (vendor profiles, shape sets) live. Thread safety: safe.
#pragma once

#include <filesystem>

namespace prism {

/// PRISM_DATA_DIR when set; else the source tree when running from a build tree (it has
/// vendors/); else <prefix>/share/prism found relative to the installed library.
/// Resolved once. Throws errc::not_found naming every place it looked when none exists.
const std::filesystem::path& data_dir();

}  // namespace prism
