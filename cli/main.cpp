// `prism`: entry point; subcommands live in cli/cmd_*.cpp and register themselves.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "prism/error.hpp"
#include "prism/tuning_db.hpp"
#include "prism/version.hpp"

namespace prism::cli {
namespace {
std::vector<std::pair<int, command_factory>>& registry() {
  static std::vector<std::pair<int, command_factory>> r;
  return r;
}
}  // namespace

bool register_command(int order, command_factory factory) {
  registry().emplace_back(order, std::move(factory));
  return true;
}
}  // namespace prism::cli

int main(int argc, char** argv) {
  CLI::App app{"prism: OpenCL offload runtime with an autotuned per-op dispatcher", "prism"};
  app.set_version_flag("--version", std::string("prism ") + prism::version());
  app.require_subcommand(1);
  prism::cli::global_options global;
  int exit_code = 0;
  // --db on every command (also after the subcommand name, through fallthrough): the tuning
  // database that dispatch looks up and pretune writes, set before any command runs.
  app.add_option(
         "--db", global.db,
         "Tuning database file (default: PRISM_TUNING_DB, else ${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db)")
      ->check(prism::cli::non_empty_path("--db"));
  app.fallthrough();
  app.parse_complete_callback([&global] {
    if (!global.db.empty()) prism::tuning::database::set_default_path(global.db);
  });
  auto& reg = prism::cli::registry();
  std::stable_sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [order, factory] : reg) factory(app, global, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const prism::error& e) {
    std::fprintf(stderr, "prism: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
