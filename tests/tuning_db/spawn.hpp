// SPDX-License-Identifier: Apache-2.0
// Test helper: run tuning_db_helper as a child process (posix_spawn, or fork/exec when the
// child must drop root privileges) with its output captured in a file.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace prism::tuning::test {

struct child {
  pid_t pid = -1;
  std::string output_path;  ///< stdout + stderr of the child
};

/// Spawns the helper binary (or `program`) with `args`; extra environment variables are added
/// to ours.
child spawn_helper(const std::vector<std::string>& args, const std::string& output_path,
                   const std::map<std::string, std::string>& extra_env = {}, bool drop_to_nobody = false,
                   const std::string& program = PRISM_TUNING_DB_HELPER);
/// Waits for the child; returns its exit status (128 + signal when killed).
int wait_child(const child& c);
std::string read_file(const std::string& path);
/// A fresh empty directory under the temp dir.
std::string make_temp_dir(const std::string& tag);

}  // namespace prism::tuning::test
