// SPDX-License-Identifier: Apache-2.0
// `prism version`: what --version prints (version, git commit, build type, OpenCL and CLBlast
// versions), also as JSON.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "cli/version/build_info.hpp"

PRISM_CLI_COMMAND(90) {
  auto* cmd =
      app.add_subcommand("version", "Print the version, git commit, build type and OpenCL/CLBlast versions");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->callback([json, &exit_code] {
    if (*json)
      std::cout << prism::cli::version_json().dump(2) << "\n";
    else
      std::printf("%s", prism::cli::version_text("prism").c_str());
    exit_code = prism::cli::exit_ok;
  });
}
