// SPDX-License-Identifier: Apache-2.0
// `prism pretune`: measure the candidates of every shape in a shape set on one device and store
// the fastest correct one per shape in the tuning database (docs/tuning.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "dispatch/tuner/pretune.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"

namespace {

struct pretune_args {
  std::string shapes_file;
  std::string model;
  std::vector<std::string> ops, dtypes, backends;
  double budget_s = 0;
  std::string strategy = "random";
  std::size_t max_candidates = 12;
  int min_runs = 3;
  int max_runs = 25;
  int pipeline = 20;
  bool force = false;
  bool list_models = false;
  std::string progress = "auto";
  std::string kv_buckets = "on";
  std::string order = "payoff";
  unsigned compile_threads = 0;
  std::uint64_t seed = 1;
  bool json = false;
};

namespace tuner = prism::dispatch::tuner;
using state = tuner::shape_outcome::state;

std::string route_text(const prism::tuning::result_row& r) {
  return r.backend + " " + (r.config.empty() ? "(default)" : r.config);
}

// The end-of-run summary, compact: a row per shape tuned or failed in this run, fitted to the
// terminal; shapes tuned earlier and shapes the budget did not reach as one line each.
std::string compact_summary(const tuner::pretune_report& report, std::size_t width) {
  using align = prism::cli::table::align;
  prism::cli::table t;
  t.column("shape", align::left, true, 20)
      .column("winner", align::left, true, 12)
      .column("time", align::right)
      .column("default", align::right)
      .column("speedup", align::right);
  std::size_t tuned = 0, earlier = 0, covered = 0, failed = 0, left = 0, n = 0;
  double log_sum = 0;
  std::map<std::string, std::size_t> left_per_op;
  std::string left_reason;
  for (const auto& s : report.shapes) {
    const std::string shape = s.entry.op + " " + tuner::entry_dtype(s.entry) + " [" + s.shape + "]";
    switch (s.status) {
      case state::tuned:
        ++tuned;
        t.row({shape, route_text(s.row), tuner::human_ns(s.row.p50_ns), tuner::human_ns(s.row.default_ns),
               s.row.speedup() > 0 ? fmt::format("{:.2f}x", s.row.speedup()) : "-"});
        break;
      case state::already_tuned:
        ++earlier;
        break;
      case state::covered:
        ++covered;
        break;
      case state::failed:
        ++failed;
        t.row({shape, "FAILED: " + s.detail, "", "", ""});
        break;
      case state::not_reached:
        ++left;
        ++left_per_op[s.entry.op];
        if (left_reason.empty()) left_reason = s.detail.empty() ? "budget spent" : s.detail;
        break;
    }
    if ((s.status == state::tuned || s.status == state::already_tuned) && s.row.speedup() > 0) {
      log_sum += std::log(s.row.speedup());
      ++n;
    }
  }
  std::string out = t.rows() ? t.render(width) : std::string();
  if (earlier)
    out +=
        prism::cli::fit(
            fmt::format("{} shapes tuned by an earlier run (`prism db list` shows them)", earlier), width) +
        "\n";
  if (covered)
    out += prism::cli::fit(fmt::format("{} shapes covered by their tuned KV-length bucket (served by the "
                                       "nearest-shape lookup)",
                                       covered),
                           width) +
           "\n";
  if (left) {
    std::string ops;
    for (const auto& [op, count] : left_per_op)
      ops += (ops.empty() ? "" : ", ") + fmt::format("{} {}", op, count);
    out += prism::cli::wrap(fmt::format("{} shapes not tuned ({}): {}", left, left_reason, ops), width, 2);
  }
  out += fmt::format("{} tuned, {} already tuned, {} failed, {} left", tuned, earlier, failed, left);
  if (n)
    out += fmt::format("; geomean speedup vs default {:.2f}x", std::exp(log_sum / static_cast<double>(n)));
  out += fmt::format("; {:.1f} s elapsed\n", report.seconds);
  if (report.budget_exhausted) out += "budget spent: run the same command again to resume where it stopped\n";
  return out;
}

nlohmann::json report_json(const tuner::pretune_report& report) {
  nlohmann::json shapes = nlohmann::json::array();
  std::map<std::string, std::size_t> counts;
  std::size_t order = 0;  // the position in the tuning order (payoff order unless --order set)
  for (const auto& s : report.shapes) {
    const char* status = s.status == state::tuned           ? "tuned"
                         : s.status == state::already_tuned ? "already_tuned"
                         : s.status == state::failed        ? "failed"
                         : s.status == state::covered       ? "covered"
                                                            : "not_reached";
    ++counts[status];
    nlohmann::json j = {{"op", s.entry.op},
                        {"dtype", s.entry.dtype},
                        {"shape", s.shape},
                        {"status", status},
                        {"detail", s.detail},
                        {"candidates", s.candidates},
                        {"failed_candidates", s.failed_candidates},
                        {"calls", s.calls},
                        {"payoff_ns", s.payoff_ns},
                        {"calls_per_sample", s.calls_per_sample},
                        {"seconds",
                         {{"total", s.total_s},
                          {"reference", s.reference_s},
                          {"builds", s.build_s},
                          {"measuring", s.measure_s}}}};
    if (!s.entry.act.empty()) j["act"] = s.entry.act;
    if (s.status != state::covered) j["order"] = ++order;
    if (s.status == state::tuned || s.status == state::already_tuned) {
      j["backend"] = s.row.backend;
      j["config"] = s.row.config;
      j["p50_ns"] = s.row.p50_ns;
      j["default_ns"] = s.row.default_ns;
      j["speedup"] = s.row.speedup();
    }
    shapes.push_back(j);
  }
  return {{"seconds", report.seconds},
          {"ordering_seconds", report.ordering_seconds},
          {"budget_exhausted", report.budget_exhausted},
          {"tuned", counts["tuned"]},
          {"already_tuned", counts["already_tuned"]},
          {"covered", counts["covered"]},
          {"failed", counts["failed"]},
          {"not_reached", counts["not_reached"]},
          {"shapes", shapes}};
}

// A CLI11 check for a whole number in [lo, hi] (checked on the text, so "-1" is not wrapped
// into a huge unsigned value).
CLI::Validator whole_in(const char* option, long long lo, unsigned long long hi) {
  return CLI::Validator(
      [option, lo, hi](std::string& text) -> std::string {
        std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        bool negative = !text.empty() && text[0] == '-';
        std::size_t used = 0;
        try {
          if (negative) {
            long long v = std::stoll(text, &used);
            if (used == text.size() && v >= lo) return {};
          } else if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
            unsigned long long v = std::stoull(text, &used);
            if (used == text.size() && v <= hi && (lo <= 0 || v >= static_cast<unsigned long long>(lo)))
              return {};
          }
        } catch (const std::exception&) {
        }
        return std::string(option) + " must be a whole number in " + range + ", got '" + text + "'";
      },
      "INT");
}

// --budget-s: a finite number of seconds >= 0 (0 = no limit).
CLI::Validator seconds_check(const char* option) {
  return CLI::Validator(
      [option](std::string& text) -> std::string {
        std::size_t used = 0;
        try {
          double v = std::stod(text, &used);
          if (used == text.size() && std::isfinite(v) && v >= 0 && v <= 1e9) return {};
        } catch (const std::exception&) {
        }
        return std::string(option) + " must be a number of seconds in [0, 1e9] (0 = no limit), got '" + text +
               "'";
      },
      "SECONDS");
}

// The names in `chosen` that no entry has, as "a, b".
std::string missing_from(const std::vector<std::string>& chosen, const std::set<std::string>& present) {
  std::string out;
  for (auto& c : chosen)
    if (!present.count(c)) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

PRISM_CLI_COMMAND(60) {
  auto* cmd = app.add_subcommand(
      "pretune",
      "Measure backend/config candidates for every shape of a shape set and store the fastest per shape "
      "in the tuning database");
  auto a = std::make_shared<pretune_args>();
  auto* shapes = cmd->add_option("--shapes", a->shapes_file, "Shape set file (YAML, see docs/tuning.md)");
  auto* model =
      cmd->add_option("--model", a->model, "A shipped shape set, e.g. llama-2-7b (see --list-models)");
  shapes->excludes(model);
  cmd->add_flag("--list-models", a->list_models, "List the shipped shape sets and exit");
  cmd->add_option("--ops", a->ops, "Only these ops (comma separated)")->delimiter(',');
  cmd->add_option("--dtypes", a->dtypes, "Only these dtypes (comma separated, e.g. f32,f16)")->delimiter(',');
  cmd->add_option(
         "--backends", a->backends,
         "Candidate backends (comma separated: opencl, clblast, host; default: opencl and clblast where "
         "they serve, and host on CPU devices for calls whose default takes 1 ms or more: host blocks "
         "and drains the queue inside a model). The default route is always measured")
      ->delimiter(',');
  cmd->add_option("--budget-s", a->budget_s,
                  "Stop cleanly after this many seconds (finished shapes are kept; run "
                  "again to resume)")
      ->check(seconds_check("--budget-s"));
  cmd->add_option("--strategy", a->strategy,
                  "exhaustive: every candidate; random: at most --max-candidates per "
                  "backend and shape (default)")
      ->check(CLI::IsMember({"exhaustive", "random"}));
  cmd->add_option("--max-candidates", a->max_candidates,
                  "random strategy: generated candidates per backend and shape (default 12)")
      ->check(whole_in("--max-candidates", 1, 100000));
  cmd->add_option("--min-runs", a->min_runs, "Timed runs per candidate, at least (default 3)")
      ->check(whole_in("--min-runs", 1, 100000));
  cmd->add_option("--max-runs", a->max_runs, "Timed runs per candidate, at most (default 25)")
      ->check(whole_in("--max-runs", 1, 100000));
  cmd->add_option("--pipeline", a->pipeline,
                  "Calls back to back in one timed run, at most, for shapes whose default route is short: "
                  "as a model's graph runs its kernels (default 20; 1: one finished call a run)")
      ->check(whole_in("--pipeline", 1, 1000));
  cmd->add_option("--seed", a->seed, "Seed of the random strategy and of the sampled inputs (default 1)")
      ->check(whole_in("--seed", 0, UINT64_MAX));
  cmd->add_flag("--force", a->force, "Re-tune shapes that already have a valid row");
  cmd->add_flag("--json", a->json, "Print the report as JSON on stdout (progress stays on stderr)");
  cmd->add_option("--kv-buckets", a->kv_buckets,
                  "on (default): attention shapes that differ only in KV length are tuned as one bucket; "
                  "off: each shape")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option(
         "--order", a->order,
         "payoff (default): time each shape's default route first and tune the largest default time x "
         "recorded calls first; file: the set's order")
      ->check(CLI::IsMember({"payoff", "file"}));
  cmd->add_option("--compile-threads", a->compile_threads,
                  "threads that build a shape's candidate kernels before they are measured one at a time "
                  "(default 0: the hardware's concurrency; 1: build each as it is measured)")
      ->check(whole_in("--compile-threads", 0, 64));
  cmd->add_option("--progress", a->progress, "auto (bar on a terminal), bar, or lines")
      ->check(CLI::IsMember({"auto", "bar", "lines"}));
  cmd->add_option("--db", global.db, prism::cli::db_option_help)->check(prism::cli::db_location());
  cmd->add_option("--device", global.device,
                  std::string("Device to tune (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");

  cmd->callback([&global, &exit_code, a] {
    using namespace prism;
    if (a->list_models) {
      if (a->json) {
        std::cout << nlohmann::json(tuning::shipped_models()).dump(2) << "\n";
      } else {
        for (auto& m : tuning::shipped_models()) std::printf("%s\n", m.c_str());
      }
      exit_code = 0;
      return;
    }
    if (a->shapes_file.empty() == a->model.empty())
      throw error(errc::invalid_argument, "prism pretune",
                  "give exactly one of --shapes FILE.yaml or --model NAME (shipped: see --list-models)");
    if (a->min_runs < 1 || a->max_runs < a->min_runs)
      throw error(errc::invalid_argument, "prism pretune", "need 1 <= --min-runs <= --max-runs");
    dispatch::tuner::pretune_options o;
    o.shapes =
        a->model.empty() ? tuning::load_shape_set(a->shapes_file) : tuning::load_model_shape_set(a->model);
    {
      // An --ops/--dtypes choice that selects nothing is a mistake, not a successful no-op.
      std::set<std::string> ops, dtypes;
      std::size_t selected = 0;
      for (auto& e : o.shapes.entries) {
        ops.insert(e.op);
        dtypes.insert(e.dtype);
        bool op_ok = a->ops.empty() || std::find(a->ops.begin(), a->ops.end(), e.op) != a->ops.end();
        bool dt_ok =
            a->dtypes.empty() || std::find(a->dtypes.begin(), a->dtypes.end(), e.dtype) != a->dtypes.end();
        selected += op_ok && dt_ok;
      }
      if (selected == 0) {
        std::string what;
        if (auto m = missing_from(a->ops, ops); !m.empty())
          what += "--ops " + m + " (its ops: " + joined(ops) + ")";
        if (auto m = missing_from(a->dtypes, dtypes); !m.empty())
          what += (what.empty() ? "" : "; ") + std::string("--dtypes ") + m +
                  " (its dtypes: " + joined(dtypes) + ")";
        if (what.empty()) what = "no entry has both the chosen ops and dtypes";
        throw error(errc::invalid_argument, "prism pretune",
                    "nothing to tune: shape set '" + o.shapes.name + "' has no entry for " + what);
      }
    }
    o.ops = a->ops;
    o.dtypes = a->dtypes;
    o.backends = a->backends;
    o.budget_s = a->budget_s;
    o.pick = a->strategy == "exhaustive" ? dispatch::strategy::exhaustive : dispatch::strategy::random;
    o.max_per_backend = a->max_candidates;
    o.min_runs = a->min_runs;
    o.max_runs = a->max_runs;
    o.pipeline_calls = a->pipeline;
    o.force = a->force;
    o.fold_kv_lengths = a->kv_buckets == "on";
    o.payoff_order = a->order == "payoff";
    o.compile_threads = a->compile_threads;
    o.seed = a->seed;
    // The bar is drawn by the CLI, fitted to the terminal; finished shapes print as lines above it.
    const bool bar = a->progress == "bar" || (a->progress == "auto" && ::isatty(2));
    auto progress = std::make_shared<prism::cli::progress_line>(stderr);
    o.on_progress = [bar, progress](std::string_view line, std::size_t done, std::size_t total,
                                    std::string_view label, std::string_view detail) {
      if (!line.empty()) {
        progress->clear();
        std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
        std::fflush(stderr);
      } else if (bar) {
        progress->draw(done, total, label, detail);
      }
    };

    device dev = prism::cli::pick_device(global.device);
    tuning::database::set_default_path(global.db.empty() ? tuning::database::default_path() : global.db);
    auto& db = tuning::database::process_default();
    dispatch::init();
    std::fprintf(stderr, "pretune: %s on %s [%s], database %s\n", o.shapes.name.c_str(), dev.name().c_str(),
                 dev.fingerprint().hash.c_str(), db.path().c_str());
    auto report = dispatch::tuner::pretune(dev, db, o);
    // The .db file alone holds every row once pretune is done (a copy of it is complete).
    db.checkpoint();
    progress->clear();
    // A server that could not take the results: they wait in the local file.
    const std::string queued = db.queued_to();
    if (!queued.empty())
      std::fprintf(stderr, "pretune: results were queued in %s; send them with `prism db push %s`\n",
                   queued.c_str(), db.path().c_str());
    if (a->json) {
      auto j = report_json(report);
      j["device"] = dev.name();
      j["fingerprint"] = dev.fingerprint().hash;
      j["database"] = db.path();
      if (!queued.empty()) j["queued_to"] = queued;
      j["shape_set"] = o.shapes.name;
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf("%s", compact_summary(report, prism::cli::terminal_width()).c_str());
    }
    bool any_failed = false;
    for (auto& s : report.shapes) any_failed = any_failed || s.status == state::failed;
    exit_code = any_failed ? prism::cli::exit_runtime_error : prism::cli::exit_ok;
  });
}
