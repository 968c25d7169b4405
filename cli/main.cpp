// SPDX-License-Identifier: Apache-2.0
// `prism`: entry point; subcommands live in cli/cmd_*.cpp and register themselves. Maps every
// failure to the documented exit codes (cli/term.hpp) and suggests close names for mistyped
// subcommands and flags.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "cli/version/build_info.hpp"
#include "prism/error.hpp"
#include "prism/tuning_db.hpp"

namespace prism::cli {
namespace {
std::vector<std::pair<int, command_factory>>& registry() {
  static std::vector<std::pair<int, command_factory>> r;
  return r;
}

// The first mistyped subcommand or flag of argv, with the closest valid name: "unknown command
// 'rnu' (did you mean 'run'?)". Empty when every word is known (the parse failed otherwise).
std::string typo_hint(CLI::App& app, int argc, char** argv) {
  std::vector<CLI::App*> chain{&app};
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.size() > 2 && word.rfind("--", 0) == 0) {
      const std::string name = word.substr(0, word.find('='));
      std::vector<std::string> names;
      const CLI::Option* match = nullptr;
      for (auto* level : chain)
        for (const auto* o : level->get_options()) {
          for (const auto& l : o->get_lnames()) {
            names.push_back("--" + l);
            if ("--" + l == name) match = o;
          }
        }
      if (!match) {
        auto best = closest(name, names);
        return "unknown flag '" + name + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)");
      }
      if (word.find('=') == std::string::npos && match->get_items_expected_max() > 0) ++i;  // its value
      continue;
    }
    if (word[0] == '-') continue;
    auto* level = chain.back();
    auto subs = level->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) continue;  // a leaf's positional argument
    auto found = std::find_if(subs.begin(), subs.end(), [&](CLI::App* s) { return s->check_name(word); });
    if (found != subs.end()) {
      chain.push_back(*found);
      continue;
    }
    if (!level->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) continue;
    std::vector<std::string> names;
    for (auto* s : subs) names.push_back(s->get_name());
    auto best = closest(word, names);
    std::string where = level == &app ? "" : " of '" + level->get_name() + "'";
    return "unknown command '" + word + "'" + where +
           (best.empty() ? "; commands: " +
                               [&] {
                                 std::string all;
                                 for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
                                 return all;
                               }()
                         : " (did you mean '" + best + "'?)");
  }
  return {};
}

}  // namespace

bool register_command(int order, command_factory factory) {
  registry().emplace_back(order, std::move(factory));
  return true;
}
}  // namespace prism::cli

int main(int argc, char** argv) {
  using namespace prism::cli;
  CLI::App app{"prism: OpenCL offload runtime with an autotuned per-op dispatcher", "prism"};
  app.set_version_flag("--version", [] {
    auto text = version_text("prism");
    return text.substr(0, text.size() - 1);  // CLI11 ends the line itself
  });
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 a failed correctness check.\n"
      "Listing and report commands take --json (docs/cli.md).");
  global_options global;
  int exit_code = exit_ok;
  // --db on every command (also after the subcommand name, through fallthrough): the tuning
  // database that dispatch looks up and pretune writes, set before any command runs.
  app.add_option("--db", global.db, prism::cli::db_option_help)->check(prism::cli::db_location());
  app.fallthrough();
  app.parse_complete_callback([&global] {
    if (!global.db.empty()) prism::tuning::database::set_default_path(global.db);
  });
  auto& reg = registry();
  std::stable_sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [order, factory] : reg) factory(app, global, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // help, version
    auto hint = typo_hint(app, argc, argv);
    std::fprintf(stderr, "prism: %s\n", hint.empty() ? e.what() : hint.c_str());
    std::fprintf(stderr, "Run with --help for more information.\n");
    return exit_usage;
  } catch (const prism::error& e) {
    std::fprintf(stderr, "prism: error: %s\n", e.what());
    // Bad values and unknown names on the command line are usage errors; the rest happened
    // while working.
    const bool usage = e.code() == prism::errc::invalid_argument || e.code() == prism::errc::not_found;
    return usage ? exit_usage : exit_runtime_error;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prism: error: %s\n", e.what());
    return exit_runtime_error;
  }
  return exit_code;
}
