// SPDX-License-Identifier: Apache-2.0
// `prism db list|show|stats|check|export|import|merge|init|push|pull|vacuum|clear|repair`:
// inspect and manage the tuning database, an SQLite file or a PostgreSQL server (docs/tuning.md).
// list/show/stats/check/export never write anything.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/term.hpp"
#include "dispatch/dispatcher.hpp"
#include "dispatch/tuner/pretune.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"

namespace {

using prism::dispatch::tuner::human_ns;

using namespace prism::tuning;

struct db_args {
  std::string fingerprint;  // --fingerprint (prefix)
  std::string op;
  std::string dtype;
  std::string shape;
  std::string file;
  bool replace = false;
  bool yes = false;
  bool force = false;
  bool json = false;
};

std::string human_time(std::int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string speedup_text(double s) {
  return s > 0 ? fmt::format("{:.2f}x", s) : "-";
}

std::string db_path(const prism::cli::global_options& global) {
  return global.db.empty() ? database::default_path() : global.db;
}

// For the commands that write (import, merge, vacuum, clear): refuses a file that is not a
// usable prism database before anything else is done.
database& open_db(const prism::cli::global_options& global, const char* command) {
  database::set_default_path(db_path(global));
  auto& db = database::process_default();
  if (!db.refusal().empty())
    throw prism::error(prism::errc::database_error, command, db.path() + ": " + db.refusal());
  return db;
}

// For the commands that only read: opened read-only, so that nothing is created or changed.
std::unique_ptr<database> open_db_read_only(const prism::cli::global_options& global, const char* command) {
  auto db = std::make_unique<database>(db_path(global), database::access::read_only);
  if (!db->refusal().empty())
    throw prism::error(prism::errc::database_error, command, db->path() + ": " + db->refusal());
  return db;
}

// The fingerprint filter: --fingerprint, else the device chosen with --device (if any).
std::string fingerprint_filter(const prism::cli::global_options& global, const db_args& a) {
  if (!a.fingerprint.empty()) {
    bool hex = a.fingerprint.size() <= 16 &&
               a.fingerprint.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
    if (!hex)
      throw prism::error(
          prism::errc::invalid_argument, "prism db",
          "--fingerprint '" + a.fingerprint +
              "' is not a device fingerprint or a prefix of one: 1 to 16 hex digits (see `prism "
              "db stats`)");
    return a.fingerprint;
  }
  if (global.device.empty()) return {};
  return prism::cli::pick_device(global.device).fingerprint().hash;
}

// One row as JSON: the same function `prism db export` writes rows with.
nlohmann::json row_json(const result_row& r) {
  return nlohmann::json::parse(to_json(r));
}

void print_header(database& db) {
  std::printf("database: %s", db.path().c_str());
  if (!db.is_open()) std::printf(" (%s)", db.read_only_reason().c_str());
  std::printf("\n");
}

void add_db_option(CLI::App* cmd, prism::cli::global_options& global) {
  cmd->add_option("--db", global.db, prism::cli::db_option_help)->check(prism::cli::db_location());
}
void add_device_option(CLI::App* cmd, prism::cli::global_options& global) {
  cmd->add_option(
      "--device", global.device,
      std::string("Only rows of this device (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");
}
void add_filters(CLI::App* cmd, prism::cli::global_options& global, db_args& a) {
  add_device_option(cmd, global);
  cmd->add_option("--fingerprint", a.fingerprint, "Only rows of devices whose fingerprint starts with this");
  cmd->add_option("--op", a.op, "Only rows of this op");
  cmd->add_option("--dtype", a.dtype, "Only rows of this dtype");
}

// A location as messages show it (a URL without its password).
std::string shown(const std::string& location) {
  return database::redact(location);
}

// The server argument of init, push and pull: it must be a URL.
std::string server_url(const std::string& location, const char* command) {
  if (location.find("://") == std::string::npos)
    throw prism::error(prism::errc::invalid_argument, command,
                       "'" + location +
                           "' is not a server: give a postgresql:// or postgres:// URL (e.g. "
                           "postgresql://user@host:5432/dbname)");
  return location;
}

// The local file of push and pull: --db, else the local file of the fleet set-up.
std::string local_file(const std::string& db, const char* command) {
  std::string file = db.empty() ? database::local_path() : db;
  if (file.find("://") != std::string::npos)
    throw prism::error(prism::errc::invalid_argument, command,
                       "--db must name a local SQLite file, got the URL '" + shown(file) + "'");
  return file;
}

std::vector<device_record> present_devices() {
  std::vector<device_record> out;
  try {
    for (auto& d : prism::device::get_devices()) out.push_back(describe(d));
  } catch (const prism::error&) {
    // No OpenCL platform: rows can still be listed, only driver checks are skipped.
  }
  return out;
}

}  // namespace

PRISM_CLI_COMMAND(70) {
  auto* db_cmd =
      app.add_subcommand("db",
                         "Inspect and manage the tuning database, a file or a PostgreSQL server (list, "
                         "show, stats, check, export, import, merge, init, push, pull, vacuum, clear, "
                         "repair)");
  db_cmd->require_subcommand(1);
  add_db_option(db_cmd, global);
  auto args = std::make_shared<db_args>();
  auto& a = *args;

  // ---- list ----
  auto* list =
      db_cmd->add_subcommand("list", "List tuned rows: shape, backend, config, time, speedup vs default");
  add_db_option(list, global);
  add_filters(list, global, a);
  list->add_flag("--json", a.json, "Print the rows as JSON");
  list->callback([&global, &exit_code, args] {
    auto db_owner = open_db_read_only(global, "prism db list");
    auto& db = *db_owner;
    auto rows = db.results(row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    if (args->json) {
      nlohmann::json out = {{"database", db.path()}, {"rows", nlohmann::json::array()}};
      for (const auto& r : rows) out["rows"].push_back(row_json(r));
      std::printf("%s\n", out.dump(2).c_str());
      exit_code = 0;
      return;
    }
    print_header(db);
    using align = prism::cli::table::align;
    prism::cli::table t;
    // The date, the device and the default's time go first when the terminal is narrow; the
    // widest of config and shape is cut first.
    t.column("device", align::left, true, 6)
        .droppable(1, true)
        .column("op")
        .column("dtype")
        .column("shape", align::left, true, 10)
        .column("backend")
        .column("config", align::left, true, 9)
        .column("p50", align::right)
        .column("default", align::right)
        .droppable(2, true)
        .column("speedup", align::right)
        .column("tuned (UTC)")
        .droppable(0, true);
    for (auto& r : rows)
      t.row({r.device, r.op, r.dtype, r.shape, r.backend, r.config.empty() ? "(default)" : r.config,
             human_ns(r.p50_ns), human_ns(r.default_ns), speedup_text(r.speedup()), human_time(r.tuned_at)});
    std::printf("%s", t.render(prism::cli::terminal_width()).c_str());
    std::printf("%zu rows\n", rows.size());
    exit_code = 0;
  });

  // ---- show ----
  auto* show = db_cmd->add_subcommand("show", "Show one key: the winner and every candidate measured for it");
  add_db_option(show, global);
  add_device_option(show, global);
  show->add_option("--fingerprint", a.fingerprint, "Only rows of devices whose fingerprint starts with this");
  show->add_option("op", a.op, "Op name, e.g. matmul")->required();
  show->add_option("dtype", a.dtype, "Dtype, e.g. f32")->required();
  show->add_option("shape", a.shape, "Shape key, e.g. m=16,n=4096,k=4096")->required();
  show->add_flag("--json", a.json, "Print the rows and their candidates as JSON");
  show->callback([&global, &exit_code, args] {
    auto db_owner = open_db_read_only(global, "prism db show");
    auto& db = *db_owner;
    auto key = shape_key::parse(args->shape);
    auto rows = db.results(row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    if (args->json) {
      nlohmann::json out = {{"database", db.path()}, {"rows", nlohmann::json::array()}};
      for (auto& r : rows) {
        if (!(shape_key::parse(r.shape) == key)) continue;
        auto j = row_json(r);
        j["candidates"] = nlohmann::json::array();
        for (auto& c : db.candidates(r.device, r.op, r.dtype, shape_key::parse(r.shape)))
          j["candidates"].push_back({{"backend", c.backend},
                                     {"config", c.config},
                                     {"status", candidate_status_name(c.status)},
                                     {"reason", c.reason},
                                     {"p50_ns", c.p50_ns}});
        out["rows"].push_back(j);
      }
      std::printf("%s\n", out.dump(2).c_str());
      exit_code = out["rows"].empty() ? 1 : 0;
      return;
    }
    print_header(db);
    std::size_t shown = 0;
    for (auto& r : rows) {
      if (!(shape_key::parse(r.shape) == key)) continue;
      ++shown;
      auto dev = db.find_device(r.device);
      std::printf("%s %s [%s] on %s (%s, driver %s)\n", r.op.c_str(), r.dtype.c_str(), r.shape.c_str(),
                  r.device.c_str(), dev ? dev->name.c_str() : "unknown device", r.driver_version.c_str());
      std::printf("  winner: %s %s  p20/p50/p80 %s / %s / %s  default %s  speedup %s\n", r.backend.c_str(),
                  r.config.empty() ? "(default)" : r.config.c_str(), human_ns(r.p20_ns).c_str(),
                  human_ns(r.p50_ns).c_str(), human_ns(r.p80_ns).c_str(), human_ns(r.default_ns).c_str(),
                  speedup_text(r.speedup()).c_str());
      std::printf("  kernel hash %s, prism %s, tuned %s UTC\n", r.kernel_hash.c_str(),
                  r.prism_version.c_str(), human_time(r.tuned_at).c_str());
      auto cands = db.candidates(r.device, r.op, r.dtype, shape_key::parse(r.shape));
      std::stable_sort(cands.begin(), cands.end(), [](auto& x, auto& y) {
        bool xo = x.status == candidate_status::ok, yo = y.status == candidate_status::ok;
        if (xo != yo) return xo;
        return xo && x.p50_ns < y.p50_ns;
      });
      std::printf("  %zu candidates:\n", cands.size());
      for (auto& c : cands) {
        if (c.status == candidate_status::ok)
          std::printf("    %-8s %-40s %10s\n", c.backend.c_str(),
                      c.config.empty() ? "(default)" : c.config.c_str(), human_ns(c.p50_ns).c_str());
        else
          std::printf("    %-8s %-40s %s: %s\n", c.backend.c_str(),
                      c.config.empty() ? "(default)" : c.config.c_str(), candidate_status_name(c.status),
                      c.reason.c_str());
      }
    }
    if (shown == 0) {
      std::fprintf(stderr, "prism db show: no row for %s %s [%s]%s (see `prism db list`)\n", args->op.c_str(),
                   args->dtype.c_str(), key.str().c_str(), global.device.empty() ? "" : " on that device");
      exit_code = 1;
      return;
    }
    exit_code = 0;
  });

  // ---- stats ----
  auto* stats =
      db_cmd->add_subcommand("stats", "Rows per device and op, with the speedups over the default they give");
  add_db_option(stats, global);
  add_filters(stats, global, a);
  stats->add_flag("--json", a.json, "Print JSON instead of a table");
  stats->callback([&global, &exit_code, args] {
    auto db_owner = open_db_read_only(global, "prism db stats");
    auto& db = *db_owner;
    auto st = db.stats(row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    if (args->json) {
      nlohmann::json out = {{"database", db.path()}, {"groups", nlohmann::json::array()}};
      for (auto& s : st)
        out["groups"].push_back({{"device", s.device},
                                 {"device_name", s.device_name},
                                 {"op", s.op},
                                 {"rows", s.rows},
                                 {"geomean_speedup", s.geomean_speedup},
                                 {"min_speedup", s.min_speedup},
                                 {"max_speedup", s.max_speedup}});
      std::printf("%s\n", out.dump(2).c_str());
      exit_code = 0;
      return;
    }
    print_header(db);
    using align = prism::cli::table::align;
    prism::cli::table t;
    t.column("device")
        .column("name", align::left, true, 6)
        .droppable()
        .column("op")
        .column("rows", align::right)
        .column("geomean", align::right)
        .column("min", align::right)
        .column("max", align::right);
    for (auto& s : st)
      t.row({s.device, s.device_name, s.op, std::to_string(s.rows), speedup_text(s.geomean_speedup),
             speedup_text(s.min_speedup), speedup_text(s.max_speedup)});
    std::printf("%s", t.render(prism::cli::terminal_width()).c_str());
    auto devs = db.devices();
    std::printf("%zu devices, %zu (device, op) groups\n", devs.size(), st.size());
    exit_code = 0;
  });

  // ---- check ----
  auto* check = db_cmd->add_subcommand(
      "check",
      "Integrity check, and the rows lookups skip (driver or kernel changed since tuning); exit 1 on damage");
  add_db_option(check, global);
  check->add_flag("--json", a.json, "Print JSON instead of text");
  check->callback([&global, &exit_code, args] {
    // A damaged or foreign file is reported (exit 1), not refused.
    database db(db_path(global), database::access::read_only);
    // Kernel-hash staleness for the devices present here (rows of other devices: driver only).
    db.set_validator(prism::dispatch::stale_row_validator(prism::device::get_devices()));
    if (args->json) {
      std::string integrity = db.integrity_check();
      nlohmann::json out = {
          {"database", db.path()}, {"integrity", integrity}, {"stale", nlohmann::json::array()}};
      for (auto& s : db.check(present_devices())) {
        auto j = row_json(s.row);
        j["reason"] = s.reason;
        out["stale"].push_back(j);
      }
      std::printf("%s\n", out.dump(2).c_str());
      exit_code = integrity == "ok" ? 0 : 1;
      return;
    }
    print_header(db);
    std::string integrity = db.integrity_check();
    std::printf("integrity: %s\n", integrity.c_str());
    auto stale = db.check(present_devices());
    for (auto& s : stale)
      std::printf("stale: %s %s %s [%s] %s '%s': %s\n", s.row.device.c_str(), s.row.op.c_str(),
                  s.row.dtype.c_str(), s.row.shape.c_str(), s.row.backend.c_str(), s.row.config.c_str(),
                  s.reason.c_str());
    std::printf("%zu stale rows (skipped by lookups; re-run `prism pretune` to refresh them)\n",
                stale.size());
    exit_code = integrity == "ok" ? 0 : 1;
  });

  // ---- export ----
  auto* exp =
      db_cmd->add_subcommand("export", "Write rows as JSON (for `prism db import` on another machine)");
  add_db_option(exp, global);
  add_filters(exp, global, a);
  exp->add_option("file", a.file, "Output file (default: stdout)");
  exp->callback([&global, &exit_code, args] {
    auto db_owner = open_db_read_only(global, "prism db export");
    auto& db = *db_owner;
    auto text = db.export_json(row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    if (args->file.empty() || args->file == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::ofstream out(args->file);
      out << text;
      if (!out) throw prism::error(prism::errc::io_error, "prism db export", "cannot write " + args->file);
      std::fprintf(stderr, "exported to %s\n", args->file.c_str());
    }
    exit_code = 0;
  });

  // ---- import ----
  auto* imp =
      db_cmd->add_subcommand("import", "Import a `prism db export` JSON file; per key the faster row wins");
  add_db_option(imp, global);
  imp->add_option("file", a.file, "JSON file ('-' for stdin)")->required();
  imp->add_flag("--replace", a.replace, "Replace existing rows even when they are faster");
  imp->callback([&global, &exit_code, args] {
    auto& db = open_db(global, "prism db import");
    std::stringstream buf;
    if (args->file == "-") {
      buf << std::cin.rdbuf();
    } else {
      std::ifstream in(args->file);
      if (!in) throw prism::error(prism::errc::io_error, "prism db import", "cannot read " + args->file);
      buf << in.rdbuf();
    }
    auto rep = db.import_json(buf.str(), args->replace);
    std::printf(
        "imported into %s: %zu new, %zu replaced (faster), %zu kept (existing as fast or faster), %zu "
        "devices\n",
        db.path().c_str(), rep.inserted, rep.replaced, rep.kept, rep.devices);
    exit_code = 0;
  });

  // ---- merge ----
  auto* merge = db_cmd->add_subcommand(
      "merge", "Merge another tuning database (file or server); per key the faster row wins");
  add_db_option(merge, global);
  merge->add_option("other", a.file, "The other database: a file or a postgresql:// URL")
      ->required()
      ->check(prism::cli::db_location());
  merge->callback([&global, &exit_code, args] {
    auto& db = open_db(global, "prism db merge");
    auto rep = db.merge_from(args->file);
    std::printf("merged %s into %s: %zu new, %zu replaced (faster), %zu kept, %zu devices\n",
                shown(args->file).c_str(), db.path().c_str(), rep.inserted, rep.replaced, rep.kept,
                rep.devices);
    if (rep.inserted + rep.replaced + rep.kept == 0)
      std::fprintf(stderr, "prism db merge: warning: %s holds no tuned rows\n", shown(args->file).c_str());
    exit_code = 0;
  });

  // ---- init ----
  auto* init = db_cmd->add_subcommand(
      "init", "Create (or upgrade) prism's schema on a PostgreSQL server; prism never creates it implicitly");
  init->add_option("url", a.file, "postgresql:// URL of the server")
      ->required()
      ->check(prism::cli::db_location());
  init->callback([&exit_code, args] {
    std::string url = server_url(args->file, "prism db init");
    database db(url);
    int before = db.init();
    if (before == database::current_schema_version())
      std::printf("%s already holds prism's schema v%d\n", db.path().c_str(), before);
    else if (before == 0)
      std::printf("created prism's schema v%d on %s\n", database::current_schema_version(),
                  db.path().c_str());
    else
      std::printf("upgraded prism's schema on %s from v%d to v%d\n", db.path().c_str(), before,
                  database::current_schema_version());
    exit_code = 0;
  });

  // ---- push ----
  auto* push = db_cmd->add_subcommand(
      "push",
      "Send a local file's rows (e.g. results queued while the server was down) to a PostgreSQL server; per "
      "key the faster row wins");
  push->add_option("url", a.shape, "postgresql:// URL of the server")
      ->required()
      ->check(prism::cli::db_location());
  push->add_option("--db", a.file,
                   "The local file to send (default: PRISM_TUNING_DB_LOCAL, else "
                   "${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db)")
      ->check(prism::cli::db_location());
  push->callback([&global, &exit_code, args] {
    std::string url = server_url(args->shape, "prism db push");
    std::string file = local_file(args->file.empty() ? global.db : args->file, "prism db push");
    database server(url);
    if (!server.refusal().empty())
      throw prism::error(prism::errc::database_error, "prism db push",
                         server.path() + ": " + server.refusal());
    auto rep = server.merge_from(file);
    std::printf(
        "pushed %s to %s: %zu new, %zu replaced (faster), %zu kept (as fast or faster there), %zu devices\n",
        file.c_str(), server.path().c_str(), rep.inserted, rep.replaced, rep.kept, rep.devices);
    exit_code = 0;
  });

  // ---- pull ----
  auto* pull = db_cmd->add_subcommand(
      "pull", "Copy a PostgreSQL server's rows into a local file; per key the faster row wins");
  pull->add_option("url", a.shape, "postgresql:// URL of the server")
      ->required()
      ->check(prism::cli::db_location());
  pull->add_option("--db", a.file,
                   "The local file to fill (default: PRISM_TUNING_DB_LOCAL, else "
                   "${XDG_CACHE_HOME:-~/.cache}/prism/tuning.db)")
      ->check(prism::cli::db_location());
  add_device_option(pull, global);
  pull->add_option("--fingerprint", a.fingerprint, "Only rows of devices whose fingerprint starts with this");
  pull->add_option("--op", a.op, "Only rows of this op");
  pull->add_option("--dtype", a.dtype, "Only rows of this dtype");
  pull->callback([&global, &exit_code, args] {
    std::string url = server_url(args->shape, "prism db pull");
    std::string file = local_file(args->file.empty() ? global.db : args->file, "prism db pull");
    database local(file);
    if (!local.refusal().empty())
      throw prism::error(prism::errc::database_error, "prism db pull", file + ": " + local.refusal());
    auto rep =
        local.merge_from(url, row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    std::printf(
        "pulled %s into %s: %zu new, %zu replaced (faster), %zu kept (as fast or faster here), %zu devices\n",
        shown(url).c_str(), file.c_str(), rep.inserted, rep.replaced, rep.kept, rep.devices);
    exit_code = 0;
  });

  // ---- vacuum ----
  auto* vac = db_cmd->add_subcommand("vacuum", "Compact the database file");
  add_db_option(vac, global);
  vac->callback([&global, &exit_code] {
    auto& db = open_db(global, "prism db vacuum");
    db.vacuum();
    std::printf("vacuumed %s\n", db.path().c_str());
    exit_code = 0;
  });

  // ---- clear ----
  auto* clear =
      db_cmd->add_subcommand("clear", "Delete rows (and their candidate measurements); needs --yes");
  add_db_option(clear, global);
  add_filters(clear, global, a);
  clear->add_flag("--yes", a.yes, "Really delete");
  clear->callback([&global, &exit_code, args] {
    if (!args->yes)
      throw prism::error(
          prism::errc::invalid_argument, "prism db clear",
          "refusing to delete without --yes (narrow it with --device/--fingerprint/--op/--dtype)");
    auto& db = open_db(global, "prism db clear");
    auto n = db.clear(row_filter{fingerprint_filter(global, *args), args->op, args->dtype, ""});
    std::printf("removed %zu rows from %s\n", n, db.path().c_str());
    exit_code = 0;
  });

  // ---- repair ----
  auto* rep = db_cmd->add_subcommand(
      "repair",
      "Move a damaged database aside (to FILE.corrupt-<time>-<pid>) so that the next write starts a new one");
  add_db_option(rep, global);
  rep->add_flag(
      "--force", a.force,
      "Also move a file whose header does not say it is a prism database (never a sound database of "
      "another program)");
  rep->callback([&global, &exit_code, args] {
    std::string path = db_path(global);
    if (database::is_server_location(path))
      throw prism::error(prism::errc::invalid_argument, "prism db repair",
                         "repair moves a damaged SQLite file aside; " + database::redact(path) +
                             " is a server (see `prism db check`)");
    std::string aside = database::repair(path, args->force);
    if (aside.empty())
      std::printf("%s is a sound prism tuning database: nothing to repair\n", path.c_str());
    else
      std::printf("moved %s to %s; the next write starts a new database\n", path.c_str(), aside.c_str());
    exit_code = 0;
  });
}
