// SPDX-License-Identifier: Apache-2.0
// Schema migrations: migrations[i] takes a database from user_version i to i + 1.
// Never edit a shipped migration; append a new one and bump current_version.
#include "tuning_db/schema.hpp"

#include <array>
#include <cstdio>
#include <set>
#include <string_view>
#include <vector>

namespace prism::tuning::schema {
namespace {

// v0 -> v1: devices and the per-key winners.
constexpr std::string_view v1 = R"sql(
CREATE TABLE IF NOT EXISTS devices (
  fingerprint    TEXT PRIMARY KEY,
  name           TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  info           TEXT NOT NULL DEFAULT '{}',
  first_seen     INTEGER NOT NULL,
  last_seen      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
  device         TEXT NOT NULL,
  op             TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  shape          TEXT NOT NULL,
  backend        TEXT NOT NULL,
  config         TEXT NOT NULL,
  p20_ns         REAL NOT NULL,
  p50_ns         REAL NOT NULL,
  p80_ns         REAL NOT NULL,
  default_ns     REAL NOT NULL DEFAULT 0,
  kernel_hash    TEXT NOT NULL DEFAULT '',
  driver_version TEXT NOT NULL DEFAULT '',
  prism_version  TEXT NOT NULL DEFAULT '',
  tuned_at       INTEGER NOT NULL,
  PRIMARY KEY (device, op, dtype, shape)
);
)sql";

// v1 -> v2: per-candidate measurements (failures included) so an interrupted pretune resumes.
constexpr std::string_view v2 = R"sql(
CREATE TABLE IF NOT EXISTS candidates (
  device         TEXT NOT NULL,
  op             TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  shape          TEXT NOT NULL,
  backend        TEXT NOT NULL,
  config         TEXT NOT NULL,
  status         TEXT NOT NULL,
  reason         TEXT NOT NULL DEFAULT '',
  p20_ns         REAL NOT NULL DEFAULT 0,
  p50_ns         REAL NOT NULL DEFAULT 0,
  p80_ns         REAL NOT NULL DEFAULT 0,
  kernel_hash    TEXT NOT NULL DEFAULT '',
  measured_at    INTEGER NOT NULL,
  PRIMARY KEY (device, op, dtype, shape, backend, config)
);
)sql";

constexpr std::array<std::string_view, current_version> migrations{v1, v2};

void exec_script(sql::connection& conn, std::string_view script) {
  // sqlite3_exec runs every statement of the script; we are inside BEGIN IMMEDIATE already.
  char* err = nullptr;
  std::string text(script);
  int rc = sqlite3_exec(conn.handle(), text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw sql::failure(rc & 0xff, sqlite3_extended_errcode(conn.handle()), "migration: " + msg);
  }
}

}  // namespace

int migrate(sql::connection& conn) {
  // Cheap check first so that opening an up-to-date file takes no write lock.
  int found = static_cast<int>(conn.query_int("PRAGMA user_version"));
  if (found >= current_version && conn.query_int("PRAGMA application_id") == application_id) return found;
  conn.write_transaction([&] {
    // Re-read under the write lock: another process may have migrated meanwhile.
    found = static_cast<int>(conn.query_int("PRAGMA user_version"));
    for (int v = found; v < current_version; ++v) exec_script(conn, migrations[v]);
    if (found < current_version) conn.exec("PRAGMA user_version = " + std::to_string(current_version));
    if (conn.query_int("PRAGMA application_id") != application_id)
      conn.exec("PRAGMA application_id = " + std::to_string(application_id));
  });
  return found;
}

std::string foreign_reason(sql::connection& conn) {
  std::int64_t app = conn.query_int("PRAGMA application_id");
  if (app == application_id) return {};
  if (app != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%08llx", static_cast<unsigned long long>(app) & 0xffffffffULL);
    return std::string("it belongs to another program (application_id ") + hex + ", prism's is 0x50525a4d)";
  }
  std::vector<std::string> tables;
  {
    sql::statement st(conn, "SELECT name FROM sqlite_master WHERE type IN ('table','view') ORDER BY name");
    while (st.step()) tables.push_back(st.text(0));
  }
  if (tables.empty()) return {};
  std::int64_t version = conn.query_int("PRAGMA user_version");
  static const std::set<std::string> ours{"devices", "results", "candidates"};
  std::string others;
  for (auto& t : tables)
    if (!ours.count(t)) others += (others.empty() ? "" : ", ") + t;
  if (version >= 1 && others.empty()) return {};
  std::string listed;
  for (auto& t : tables) listed += (listed.empty() ? "" : ", ") + t;
  return "it holds tables of another program (" + listed + "; user_version " + std::to_string(version) +
         ") and no prism application_id";
}

}  // namespace prism::tuning::schema
