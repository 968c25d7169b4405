// SPDX-License-Identifier: Apache-2.0
// `prism log summarize FILE` and `prism log replay FILE`: the dispatch log read back. summarize
// recomputes the exit summary (calls, fallbacks, time per op, backend and tier) from a log file,
// of one process or many; replay runs its lines again through `prism run --replay`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "prism/error.hpp"

namespace {

namespace pd = prism::dispatch;

struct log_args {
  std::string file;
  bool json = false;
  bool all = false;
  int repeat = 1;
  std::size_t limit = 0;
  std::string event;
};

std::vector<pd::log_record> read_log(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw prism::error(prism::errc::not_found, "prism log", "cannot read '" + file + "' (no such file?)");
  auto recs = pd::parse_log(in);
  return recs;
}

nlohmann::json summary_json(const pd::log_summary& s) {
  nlohmann::json rows = nlohmann::json::array();
  std::uint64_t hits = 0;
  for (const auto& st : s.stats) {
    nlohmann::json r = {{"op", st.op},
                        {"backend", st.backend},
                        {"tier", pd::source_tier_name(st.tier)},
                        {"calls", st.calls},
                        {"fallbacks", st.fallbacks}};
    r["time_ms"] = s.with_time ? nlohmann::json(static_cast<double>(st.time_ns) / 1e6) : nlohmann::json();
    if (st.tier == pd::source_tier::db_exact || st.tier == pd::source_tier::db_nearest) hits += st.calls;
    rows.push_back(r);
  }
  return {{"lines", s.lines},
          {"exec", s.exec},
          {"recorded", s.recorded},
          {"rejects", s.rejects},
          {"errors", s.errors},
          {"processes", s.processes},
          {"compile_ms", s.compile_ms},
          {"profiled", s.with_time},
          {"db_hits", hits},
          {"rows", rows}};
}

// Runs the hook with stdout silenced (for --json, whose stdout must stay one JSON document).
int replay_quietly(const std::string& line, const std::string& device, int repeat, bool quiet) {
  if (!quiet) return prism::cli::replay_log_line(line, device, repeat);
  std::fflush(stdout);
  int saved = ::dup(1);
  std::FILE* null = std::fopen("/dev/null", "w");
  if (null) ::dup2(::fileno(null), 1);
  struct restore {
    int saved;
    std::FILE* null;
    ~restore() {
      std::fflush(stdout);
      if (saved >= 0) {
        ::dup2(saved, 1);
        ::close(saved);
      }
      if (null) std::fclose(null);
    }
  } guard{saved, null};
  return prism::cli::replay_log_line(line, device, repeat);
}

}  // namespace

PRISM_CLI_COMMAND(50) {
  auto* log_cmd = app.add_subcommand(
      "log", "Read a dispatch log file (PRISM_LOG_DISPATCH_FILE) back: summarize it, or replay its lines");
  log_cmd->require_subcommand(1);
  auto a = std::make_shared<log_args>();

  auto* sum = log_cmd->add_subcommand(
      "summarize", "Calls, fallbacks and (profile logs) time per op, backend and tier, from a log file");
  sum->add_option("file", a->file, "Dispatch log file (CSV, v1 or v2)")->required();
  sum->add_flag("--json", a->json, "Print JSON instead of a table");
  sum->callback([a, &exit_code] {
    auto s = pd::summarize_log(read_log(a->file));
    if (a->json) {
      std::cout << summary_json(s).dump(2) << "\n";
    } else {
      std::printf("%s", pd::format_summary(s.stats, s.with_time).c_str());
      std::printf("%llu lines: %llu exec, %llu reject, %llu error; processes: %llu",
                  static_cast<unsigned long long>(s.lines), static_cast<unsigned long long>(s.exec),
                  static_cast<unsigned long long>(s.rejects), static_cast<unsigned long long>(s.errors),
                  static_cast<unsigned long long>(s.processes));
      if (s.with_time) std::printf("; kernel builds %.3f ms (not in time_ms)", s.compile_ms);
      std::printf("\n");
    }
    exit_code = prism::cli::exit_ok;
  });

  auto* rep = log_cmd->add_subcommand(
      "replay",
      "Run the lines of a log file again (each as `prism run --replay LINE`): exec lines must pass the "
      "host check; reject and error lines name a candidate that refused, and are reported as refused "
      "again or now running");
  rep->add_option("file", a->file, "Dispatch log file (CSV, v1 or v2)")->required();
  rep->add_flag("--all", a->all, "Replay every line, not each distinct call once");
  rep->add_option("--event", a->event, "Only lines of this event")
      ->check(CLI::IsMember({"exec", "record", "reject", "error"}));
  rep->add_option("--limit", a->limit, "Stop after this many replays (0: no limit)");
  rep->add_option("--repeat", a->repeat, "Timed runs per line after the checked one")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  rep->add_option("--device", global.device,
                  std::string("Device (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");
  rep->add_flag("--json", a->json, "Print one JSON report (each replay's output is not shown)");
  rep->callback([a, &global, &exit_code] {
    auto recs = read_log(a->file);
    std::set<
        std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, std::string>>
        seen;
    nlohmann::json results = nlohmann::json::array();
    std::size_t passed = 0, failed_checks = 0, errors = 0, refused = 0, now_run = 0, replayed = 0;
    for (std::size_t i = 0; i < recs.size(); ++i) {
      const auto& r = recs[i];
      if (!a->event.empty() && r.event != a->event) continue;
      if (r.event == "fallback") continue;  // served outside prism (log_fallback): nothing to replay
      if (!a->all && !seen.insert({r.event, r.op, r.dtypes, r.shape, r.backend, r.config, r.attrs}).second)
        continue;
      if (a->limit && replayed == a->limit) break;
      ++replayed;
      auto line = r;
      line.version = pd::log_version;
      const std::string text = pd::format_log_line(line);
      const bool expect_refusal = r.event != "exec" && r.event != "record";
      if (!a->json)
        std::printf("== replay %zu: %s %s %s [%s] %s %s\n", replayed, r.event.c_str(), r.op.c_str(),
                    r.dtypes.c_str(), r.shape.c_str(), r.backend.c_str(),
                    r.config.empty() ? "(default)" : r.config.c_str());
      std::fflush(stdout);
      std::string outcome, detail;
      int code = 0;
      try {
        code = replay_quietly(text, global.device, a->repeat, a->json);
        outcome = code == prism::cli::exit_ok ? (expect_refusal ? "now runs" : "pass") : "check failed";
      } catch (const prism::error& e) {
        detail = e.what();
        if (expect_refusal && e.code() == prism::errc::unsupported) {
          outcome = "refused again";
        } else {
          outcome = "error";
          code = prism::cli::exit_runtime_error;
        }
      }
      if (outcome == "pass") ++passed;
      if (outcome == "check failed") ++failed_checks;
      if (outcome == "error") ++errors;
      if (outcome == "refused again") ++refused;
      if (outcome == "now runs") ++now_run;
      if (a->json)
        results.push_back({{"event", r.event},
                           {"op", r.op},
                           {"dtypes", r.dtypes},
                           {"shape", r.shape},
                           {"backend", r.backend},
                           {"config", r.config},
                           {"outcome", outcome},
                           {"detail", detail},
                           {"exit_code", code}});
      else if (outcome != "pass" && outcome != "check failed")
        std::printf("outcome:   %s%s%s\n", outcome.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    }
    if (a->json) {
      std::cout << nlohmann::json{{"file", a->file},
                                  {"lines", recs.size()},
                                  {"replayed", replayed},
                                  {"passed", passed},
                                  {"check_failed", failed_checks},
                                  {"errors", errors},
                                  {"refused_again", refused},
                                  {"now_run", now_run},
                                  {"results", results}}
                       .dump(2)
                << "\n";
    } else {
      std::printf(
          "replayed %zu of %zu lines: %zu passed, %zu failed the check, %zu errors, %zu refused again, "
          "%zu now run\n",
          replayed, recs.size(), passed, failed_checks, errors, refused, now_run);
    }
    exit_code = failed_checks ? prism::cli::exit_check_failed
                : errors      ? prism::cli::exit_runtime_error
                              : prism::cli::exit_ok;
  });
}
