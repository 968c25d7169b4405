// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store: schema (created only by init_schema, versioned in prism.meta), the
// faster-row-wins upserts, the per-device snapshot and its refresher, and the fall back to the
// local SQLite file when the server is down, unreachable, refuses the login or times out.
#include "tuning_db/postgres_store.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <unordered_set>

#include "prism/version.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/schema.hpp"

namespace prism::tuning {

using detail::db_error;
using detail::log;

namespace {

// Migrations on the server: migrations[i] takes the schema from version i to i + 1. The
// versions are the SQLite file's (schema.cpp): the same tables and columns.
constexpr std::string_view pg_v1 = R"sql(
CREATE TABLE IF NOT EXISTS prism.devices (
  fingerprint    TEXT PRIMARY KEY,
  name           TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  info           TEXT NOT NULL DEFAULT '{}',
  first_seen     BIGINT NOT NULL,
  last_seen      BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS prism.results (
  device         TEXT NOT NULL,
  op             TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  shape          TEXT NOT NULL,
  backend        TEXT NOT NULL,
  config         TEXT NOT NULL,
  p20_ns         DOUBLE PRECISION NOT NULL,
  p50_ns         DOUBLE PRECISION NOT NULL,
  p80_ns         DOUBLE PRECISION NOT NULL,
  default_ns     DOUBLE PRECISION NOT NULL DEFAULT 0,
  kernel_hash    TEXT NOT NULL DEFAULT '',
  driver_version TEXT NOT NULL DEFAULT '',
  prism_version  TEXT NOT NULL DEFAULT '',
  tuned_at       BIGINT NOT NULL,
  PRIMARY KEY (device, op, dtype, shape)
);
)sql";

constexpr std::string_view pg_v2 = R"sql(
CREATE TABLE IF NOT EXISTS prism.candidates (
  device         TEXT NOT NULL,
  op             TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  shape          TEXT NOT NULL,
  backend        TEXT NOT NULL,
  config         TEXT NOT NULL,
  status         TEXT NOT NULL,
  reason         TEXT NOT NULL DEFAULT '',
  p20_ns         DOUBLE PRECISION NOT NULL DEFAULT 0,
  p50_ns         DOUBLE PRECISION NOT NULL DEFAULT 0,
  p80_ns         DOUBLE PRECISION NOT NULL DEFAULT 0,
  kernel_hash    TEXT NOT NULL DEFAULT '',
  measured_at    BIGINT NOT NULL,
  PRIMARY KEY (device, op, dtype, shape, backend, config)
);
)sql";

constexpr std::array<std::string_view, schema::current_version> pg_migrations{pg_v1, pg_v2};

// Serializes concurrent `prism db init` runs ("PRZM").
constexpr const char* init_lock = "SELECT pg_advisory_xact_lock(1347574349)";

constexpr const char* result_columns =
    "device, op, dtype, shape, backend, config, p20_ns, p50_ns, p80_ns, default_ns, kernel_hash, "
    "driver_version, prism_version, tuned_at";
constexpr const char* candidate_columns =
    "device, op, dtype, shape, backend, config, status, reason, p20_ns, p50_ns, p80_ns, kernel_hash, "
    "measured_at";
constexpr const char* result_values = "($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)";
constexpr const char* result_update =
    " ON CONFLICT (device, op, dtype, shape) DO UPDATE SET backend=excluded.backend, "
    "config=excluded.config, p20_ns=excluded.p20_ns, p50_ns=excluded.p50_ns, p80_ns=excluded.p80_ns, "
    "default_ns=excluded.default_ns, kernel_hash=excluded.kernel_hash, "
    "driver_version=excluded.driver_version, prism_version=excluded.prism_version, "
    "tuned_at=excluded.tuned_at";

int env_seconds(const char* name, int fallback, int min_value) {
  auto v = detail::env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || n < min_value || n > 86400 * 365) {
    log().warn("{}='{}' is not a number of seconds in [{}, 31536000]; using {}", name, *v, min_value,
               fallback);
    return fallback;
  }
  return static_cast<int>(n);
}

void add_result_params(pg::params& p, const result_row& r) {
  p.add(r.device).add(r.op).add(r.dtype).add(r.shape).add(r.backend).add(r.config);
  p.add(r.p20_ns).add(r.p50_ns).add(r.p80_ns).add(r.default_ns).add(r.kernel_hash).add(r.driver_version);
  p.add(r.prism_version.empty() ? std::string(prism::version()) : r.prism_version);
  p.add(r.tuned_at ? r.tuned_at : detail::now_seconds());
}

pg::params result_params(const result_row& r) {
  pg::params p;
  add_result_params(p, r);
  return p;
}

result_row read_result(const pg::result& res, int i) {
  result_row r;
  r.device = res.text(i, 0);
  r.op = res.text(i, 1);
  r.dtype = res.text(i, 2);
  r.shape = res.text(i, 3);
  r.backend = res.text(i, 4);
  r.config = res.text(i, 5);
  r.p20_ns = res.real(i, 6);
  r.p50_ns = res.real(i, 7);
  r.p80_ns = res.real(i, 8);
  r.default_ns = res.real(i, 9);
  r.kernel_hash = res.text(i, 10);
  r.driver_version = res.text(i, 11);
  r.prism_version = res.text(i, 12);
  r.tuned_at = res.integer(i, 13);
  return r;
}

candidate_row read_candidate(const pg::result& res, int i) {
  candidate_row c;
  c.device = res.text(i, 0);
  c.op = res.text(i, 1);
  c.dtype = res.text(i, 2);
  c.shape = res.text(i, 3);
  c.backend = res.text(i, 4);
  c.config = res.text(i, 5);
  c.status = parse_candidate_status(res.text(i, 6));
  c.reason = res.text(i, 7);
  c.p20_ns = res.real(i, 8);
  c.p50_ns = res.real(i, 9);
  c.p80_ns = res.real(i, 10);
  c.kernel_hash = res.text(i, 11);
  c.measured_at = res.integer(i, 12);
  return c;
}

void upsert_device(pg::connection& c, const device_record& d) {
  c.exec(
      "INSERT INTO prism.devices (fingerprint, name, driver_version, info, first_seen, last_seen) "
      "VALUES ($1,$2,$3,$4,$5,$5) ON CONFLICT (fingerprint) DO UPDATE SET name=excluded.name, "
      "driver_version=excluded.driver_version, info=excluded.info, last_seen=excluded.last_seen",
      pg::params()
          .add(d.fingerprint)
          .add(d.name)
          .add(d.driver_version)
          .add(d.info_json.empty() ? std::string("{}") : d.info_json)
          .add(detail::now_seconds()));
}

void upsert_candidate(pg::connection& c, const candidate_row& r) {
  c.exec(std::string("INSERT INTO prism.candidates (") + candidate_columns +
             ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) ON CONFLICT (device, op, dtype, shape, "
             "backend, config) DO UPDATE SET status=excluded.status, reason=excluded.reason, "
             "p20_ns=excluded.p20_ns, p50_ns=excluded.p50_ns, p80_ns=excluded.p80_ns, "
             "kernel_hash=excluded.kernel_hash, measured_at=excluded.measured_at",
         pg::params()
             .add(r.device)
             .add(r.op)
             .add(r.dtype)
             .add(r.shape)
             .add(r.backend)
             .add(r.config)
             .add(std::string_view(candidate_status_name(r.status)))
             .add(r.reason)
             .add(r.p20_ns)
             .add(r.p50_ns)
             .add(r.p80_ns)
             .add(r.kernel_hash)
             .add(r.measured_at ? r.measured_at : detail::now_seconds()));
}

// The faster row wins, in one statement: a concurrent writer's row lock makes this one wait
// and re-check the WHERE against the row it committed. Returns 'i' (inserted), 'u' (updated)
// or 'k' (kept).
char upsert_result(pg::connection& c, const result_row& r, const char* when) {
  auto res = c.exec(std::string("INSERT INTO prism.results (") + result_columns + ") VALUES " +
                        result_values + result_update + " WHERE " + when + " RETURNING (xmax = 0)",
                    result_params(r));
  if (res.rows() == 0) return 'k';
  return res.text(0, 0) == "t" ? 'i' : 'u';
}
constexpr const char* if_faster = "excluded.p50_ns < prism.results.p50_ns";
// A finished shape's winner also replaces a row another prism or driver measured (it may be
// stale: the same config can build another kernel there).
constexpr const char* if_faster_or_stale =
    "excluded.p50_ns < prism.results.p50_ns OR excluded.prism_version <> prism.results.prism_version OR "
    "excluded.driver_version <> prism.results.driver_version";

// Many rows in one statement per batch (one round trip each): the same faster-row-wins upsert.
// A key may appear only once in a statement: the first row of each key goes in the batches,
// any later row of the same key after them, one statement each. Keys are independent and each
// key's rows keep their order, so the outcome and the report are those of one row at a time.
void upsert_results(pg::connection& c, const std::vector<result_row>& rows, bool replace,
                    merge_report& report) {
  std::vector<const result_row*> unique, repeats;
  std::unordered_set<std::string> seen;
  for (auto& r : rows)
    (seen.insert(r.device + '\x1f' + r.op + '\x1f' + r.dtype + '\x1f' + r.shape).second ? unique : repeats)
        .push_back(&r);
  constexpr std::size_t batch = 1000;  // 14 parameters a row: far below libpq's 65535
  for (std::size_t start = 0; start < unique.size(); start += batch) {
    std::size_t n = std::min(batch, unique.size() - start);
    std::string sql = std::string("INSERT INTO prism.results (") + result_columns + ") VALUES ";
    pg::params p;
    for (std::size_t i = 0; i < n; ++i) {
      sql += i ? ",(" : "(";
      for (int col = 1; col <= 14; ++col)
        sql += (col > 1 ? ",$" : "$") + std::to_string(i * 14 + static_cast<std::size_t>(col));
      sql += ')';
      add_result_params(p, *unique[start + i]);
    }
    auto res =
        c.exec(sql + result_update + " WHERE " + (replace ? "TRUE" : if_faster) + " RETURNING (xmax = 0)", p);
    for (int i = 0; i < res.rows(); ++i) ++(res.text(i, 0) == "t" ? report.inserted : report.replaced);
    report.kept += n - static_cast<std::size_t>(res.rows());
  }
  for (auto* r : repeats) {
    char what = upsert_result(c, *r, replace ? "TRUE" : if_faster);
    ++(what == 'i' ? report.inserted : what == 'u' ? report.replaced : report.kept);
  }
}

// WHERE clause for a row_filter, parameters from $1.
std::string where_of(const row_filter& f, pg::params& p) {
  std::string where;
  auto add = [&](const char* column_test, const std::string& value) {
    p.add(value);
    where += where.empty() ? " WHERE " : " AND ";
    where += std::string(column_test) + "$" + std::to_string(p.size());
  };
  if (!f.device.empty()) {
    p.add(f.device);
    where += " WHERE strpos(device, $" + std::to_string(p.size()) + ") = 1";
  }
  if (!f.op.empty()) add("op = ", f.op);
  if (!f.dtype.empty()) add("dtype = ", f.dtype);
  if (!f.shape.empty()) add("shape = ", shape_key::parse(f.shape).str());
  return where;
}

// Rows of one device, grouped by (op, dtype).
std::map<std::pair<std::string, std::string>, std::vector<result_row>> load_device(
    pg::connection& c, const std::string& device) {
  std::map<std::pair<std::string, std::string>, std::vector<result_row>> groups;
  auto res = c.exec(std::string("SELECT ") + result_columns +
                        " FROM prism.results WHERE device = $1 ORDER BY op, dtype, shape",
                    pg::params().add(device));
  for (int i = 0; i < res.rows(); ++i) {
    auto r = read_result(res, i);
    auto key = std::make_pair(r.op, r.dtype);
    groups[key].push_back(std::move(r));
  }
  return groups;
}

// "" when the server holds prism's schema at a version this prism can use, else why not.
std::string schema_problem(pg::connection& c, const std::string& shown, int& version) {
  version = 0;
  auto has = c.exec("SELECT to_regclass('prism.meta') IS NOT NULL");
  if (has.text(0, 0) != "t")
    return "the server has no prism schema (no table prism.meta); create it with `prism db init " + shown +
           "`";
  auto v = c.exec("SELECT value FROM prism.meta WHERE key = 'schema_version'");
  version = v.rows() ? std::atoi(v.text(0, 0).c_str()) : 0;
  if (version > schema::current_version)
    return "its prism schema was written by a newer prism (schema v" + std::to_string(version) +
           ", this prism uses v" + std::to_string(schema::current_version) + "); upgrade prism to use it";
  if (version < schema::current_version)
    return "its prism schema is older (v" + std::to_string(version) + ", this prism uses v" +
           std::to_string(schema::current_version) + "); upgrade it with `prism db init " + shown + "`";
  return {};
}

}  // namespace

postgres_store::postgres_store(std::string url, database::access mode)
    : url_(std::move(url)),
      shown_(pg::redact(url_)),
      mode_(mode),
      timeout_s_(env_seconds("PRISM_TUNING_DB_TIMEOUT", 5, 1)),
      refresh_s_(env_seconds("PRISM_TUNING_DB_REFRESH", 300, 0)) {
  // A malformed URL is a mistake to fix, not a fault to ride out: no fall back.
  refusal_ = database::location_error(url_);
  if (!refusal_.empty()) return;
  connect();
}

postgres_store::~postgres_store() {
  {
    std::lock_guard lock(snap_mu_);
    stop_ = true;
  }
  refresh_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

void postgres_store::connect() {
  refusal_.clear();
  try {
    conn_ = std::make_unique<pg::connection>(url_, timeout_s_);
    refusal_ = schema_problem(*conn_, shown_, found_version_);
  } catch (const pg::failure& f) {
    conn_.reset();
    refusal_ = f.kind == pg::failure_kind::auth ? "the server refused the login: " + f.text
                                                : "cannot reach the server: " + f.text;
  }
  faulted_ = !refusal_.empty();
}

// From now on lookups also read the local file and writes go there. Said once.
sqlite_store* postgres_store::fallback() {
  if (local_) return local_.get();
  if (usable() || !faulted_ || mode_ != database::access::read_write) return nullptr;
  const std::string& why = refusal_;
  std::string local = database::local_path();
  local_ = std::make_unique<sqlite_store>(local, database::access::read_write);
  if (local_->writable())
    log().warn(
        "tuning database {}: {}; lookups use the rows fetched before and the local file {}, and tuning "
        "results "
        "are queued there (send them with `prism db push {}`)",
        shown_, why, local, shown_);
  else
    log().warn(
        "tuning database {}: {}; the local file {} cannot take results either ({}): dispatch uses "
        "what it has and the vendor defaults",
        shown_, why, local, local_->read_only_reason());
  return local_.get();
}

void postgres_store::lost(const pg::failure& f, const char* operation) {
  conn_.reset();
  refusal_ = "the connection to the server failed during " + std::string(operation) + ": " + f.text;
  faulted_ = true;
  fallback();
}

bool postgres_store::is_open() const {
  return usable() || (local_ && local_->is_open());
}

bool postgres_store::writable() const {
  if (mode_ != database::access::read_write) return false;
  if (usable()) return true;
  // A fault: results go to the local file (opened on the first write).
  return faulted_ && (!local_ || local_->writable());
}

const std::string& postgres_store::read_only_reason() const {
  static const std::string read_only = "opened read-only";
  if (writable()) {
    static const std::string none;
    return none;
  }
  if (mode_ != database::access::read_write) return refusal_.empty() ? read_only : refusal_;
  return local_ ? local_->read_only_reason() : refusal_;
}

// A write to the server; on a connection fault, to the local file instead (rows queued for
// `prism db push`). SQL errors of the server are errors.
template <class Server, class Local>
auto postgres_store::write(const char* operation, const std::string& device, Server&& on_server,
                           Local&& on_local) -> decltype(on_local(std::declval<sqlite_store&>())) {
  if (mode_ != database::access::read_write)
    throw db_error(operation, "cannot save tuning results to " + shown_ + ": it was opened read-only");
  if (usable()) {
    try {
      decltype(on_local(std::declval<sqlite_store&>())) out{};
      conn_->transaction([&] { out = on_server(*conn_); });
      // The next lookup of this device takes a new snapshot, with this write in it.
      if (!device.empty()) {
        std::lock_guard lock(snap_mu_);
        snapshot_.erase(device);
      }
      return out;
    } catch (const pg::failure& f) {
      if (!f.is_connection()) throw db_error(operation, shown_ + ": " + f.text);
      lost(f, operation);
    }
  }
  auto* local = fallback();
  if (!local || !local->writable())
    throw db_error(operation, "cannot save tuning results to " + shown_ + ": " + refusal_ +
                                  (local ? "; nor to the local file " + local->location() + ": " +
                                               local->read_only_reason()
                                         : std::string()));
  return on_local(*local);
}

int postgres_store::init_schema() {
  if (auto why = database::location_error(url_); !why.empty()) throw db_error("prism db init", why);
  if (!conn_) connect();
  if (!conn_)
    throw db_error("prism db init", "cannot create the prism schema on " + shown_ + ": " + refusal_);
  int before = 0;
  try {
    conn_->transaction([&] {
      conn_->exec(init_lock);
      conn_->exec("CREATE SCHEMA IF NOT EXISTS prism");
      conn_->exec("CREATE TABLE IF NOT EXISTS prism.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
      auto v = conn_->exec("SELECT value FROM prism.meta WHERE key = 'schema_version'");
      before = v.rows() ? std::atoi(v.text(0, 0).c_str()) : 0;
      if (before > schema::current_version)
        throw db_error("prism db init", shown_ + ": its prism schema was written by a newer prism (schema v" +
                                            std::to_string(before) + ", this prism uses v" +
                                            std::to_string(schema::current_version) +
                                            "); upgrade prism, nothing was changed");
      for (int v2 = before; v2 < schema::current_version; ++v2) conn_->exec(pg_migrations[v2]);
      conn_->exec(
          "INSERT INTO prism.meta (key, value) VALUES ('schema_version', $1), ('application', 'prism') "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
          pg::params().add(std::to_string(schema::current_version)));
    });
  } catch (const pg::failure& f) {
    throw db_error("prism db init", shown_ + ": " + f.text);
  }
  refusal_ = schema_problem(*conn_, shown_, found_version_);
  return before;
}

void postgres_store::close() {
  // Lookups keep their snapshot; the connection is reopened by the next write if needed.
  {
    std::lock_guard lock(snap_mu_);
    stop_ = true;
  }
  refresh_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  {
    std::lock_guard lock(snap_mu_);
    stop_ = false;
  }
  if (local_) local_->close();
}

// ---- writes ----

void postgres_store::put_device(const device_record& dev) {
  write(
      "tuning_db::put_device", "",
      [&](pg::connection& c) {
        upsert_device(c, dev);
        return 0;
      },
      [&](sqlite_store& s) {
        s.put_device(dev);
        return 0;
      });
}

void postgres_store::put_result(const result_row& row) {
  write(
      "tuning_db::put_result", row.device,
      [&](pg::connection& c) {
        upsert_result(c, row, "TRUE");
        return 0;
      },
      [&](sqlite_store& s) {
        s.put_result(row);
        return 0;
      });
}

bool postgres_store::put_result_if_faster(const result_row& row) {
  return write(
      "tuning_db::put_result_if_faster", row.device,
      [&](pg::connection& c) { return upsert_result(c, row, if_faster) != 'k'; },
      [&](sqlite_store& s) { return s.put_result_if_faster(row); });
}

void postgres_store::put_candidate(const candidate_row& row) {
  write(
      "tuning_db::put_candidate", "",
      [&](pg::connection& c) {
        upsert_candidate(c, row);
        return 0;
      },
      [&](sqlite_store& s) {
        s.put_candidate(row);
        return 0;
      });
}

void postgres_store::put_shape(const result_row& winner, const std::vector<candidate_row>& cands) {
  write(
      "tuning_db::put_shape", winner.device,
      [&](pg::connection& c) {
        for (auto& cand : cands) upsert_candidate(c, cand);
        upsert_result(c, winner, if_faster_or_stale);
        return 0;
      },
      [&](sqlite_store& s) {
        s.put_shape(winner, cands);
        return 0;
      });
}

std::size_t postgres_store::clear(const row_filter& filter) {
  if (!usable()) throw db_error("tuning_db::clear", "cannot delete rows on " + shown_ + ": " + refusal_);
  std::size_t removed = 0;
  try {
    conn_->transaction([&] {
      pg::params p;
      std::string where = where_of(filter, p);
      removed = static_cast<std::size_t>(
          conn_->exec("DELETE FROM prism.results" + where + " RETURNING 1", p).rows());
      pg::params pc;
      conn_->exec("DELETE FROM prism.candidates" + where_of(filter, pc), pc);
    });
  } catch (const pg::failure& f) {
    throw db_error("tuning_db::clear", shown_ + ": " + f.text);
  }
  std::lock_guard lock(snap_mu_);
  snapshot_.clear();
  return removed;
}

void postgres_store::vacuum() {
  if (!usable()) throw db_error("tuning_db::vacuum", "cannot vacuum " + shown_ + ": " + refusal_);
  try {
    conn_->exec("VACUUM (ANALYZE) prism.results, prism.candidates, prism.devices");
  } catch (const pg::failure& f) {
    throw db_error("tuning_db::vacuum", shown_ + ": " + f.text);
  }
}

merge_report postgres_store::store_rows(const row_bundle& rows, bool replace) {
  if (mode_ != database::access::read_write)
    throw db_error("tuning_db::store_rows", "cannot save rows to " + shown_ + ": it was opened read-only");
  if (!usable()) throw db_error("tuning_db::store_rows", "cannot save rows to " + shown_ + ": " + refusal_);
  merge_report report;
  try {
    conn_->transaction([&] {
      report = merge_report{};
      for (auto& d : rows.devices) {
        upsert_device(*conn_, d);
        ++report.devices;
      }
      for (auto& c : rows.candidates) upsert_candidate(*conn_, c);
      upsert_results(*conn_, rows.results, replace, report);
    });
  } catch (const pg::failure& f) {
    throw db_error("tuning_db::store_rows", shown_ + ": " + f.text);
  }
  std::lock_guard lock(snap_mu_);
  snapshot_.clear();
  return report;
}

// ---- reads ----

std::vector<result_row> postgres_store::group_rows(const std::string& device, const std::string& op,
                                                   const std::string& dtype) {
  std::vector<result_row> rows;
  bool have = false;
  {
    std::lock_guard lock(snap_mu_);
    wanted_.insert(device);
    if (auto it = snapshot_.find(device); it != snapshot_.end()) {
      have = true;
      if (auto g = it->second.find({op, dtype}); g != it->second.end()) rows = g->second;
    }
  }
  if (!have && usable()) {
    // The device's first lookup: one query takes all its rows.
    try {
      auto groups = load_device(*conn_, device);
      if (auto g = groups.find({op, dtype}); g != groups.end()) rows = g->second;
      std::lock_guard lock(snap_mu_);
      snapshot_[device] = std::move(groups);
      have = true;
    } catch (const pg::failure& f) {
      if (!f.is_connection()) throw db_error("tuning_db::lookup", shown_ + ": " + f.text);
      lost(f, "a lookup");
    }
  }
  start_refresher();
  if (auto* local = fallback()) {
    // Rows queued in (or pulled into) the local file; per key the faster one.
    for (auto& r : local->group_rows(device, op, dtype)) {
      auto same = std::find_if(rows.begin(), rows.end(), [&](auto& x) { return x.shape == r.shape; });
      if (same == rows.end())
        rows.push_back(std::move(r));
      else if (r.p50_ns < same->p50_ns)
        *same = std::move(r);
    }
  }
  return rows;
}

void postgres_store::start_refresher() {
  if (refresher_.joinable() || refresh_s_ <= 0) return;
  refresher_ = std::thread([this] { refresh_loop(); });
}

// Every refresh_s_ seconds: new snapshots of the devices lookups asked for, on a connection of
// its own, swapped in at once. A failed refresh keeps the old snapshot (warned once per outage).
void postgres_store::refresh_loop() {
  std::unique_ptr<pg::connection> c;
  bool failing = false, back = false;
  for (;;) {
    std::set<std::string> devices;
    {
      std::unique_lock lock(snap_mu_);
      if (refresh_cv_.wait_for(lock, std::chrono::duration<double>(refresh_s_), [&] { return stop_; }))
        return;
      devices = wanted_;
    }
    try {
      if (!c || !c->ok()) c = std::make_unique<pg::connection>(url_, timeout_s_);
      int version = 0;
      std::string problem = schema_problem(*c, shown_, version);
      if (!problem.empty()) throw pg::failure(pg::failure_kind::sql, "", problem);
      std::map<std::string, group_map> fresh;
      for (auto& d : devices) fresh[d] = load_device(*c, d);
      {
        std::lock_guard lock(snap_mu_);
        for (auto& [d, groups] : fresh) snapshot_[d] = std::move(groups);
      }
      generation_.fetch_add(1, std::memory_order_release);
      note_rows_changed();  // the dispatcher's remembered decisions may be out of date now
      if (failing || faulted_)
        log().info("tuning database {}: the snapshot is refreshed from the server again", shown_);
      failing = false;
    } catch (const std::exception& e) {
      c.reset();
      // A fault already reported (the fall back to the local file) is not reported again.
      if (!failing && !faulted_)
        log().warn("tuning database {}: refreshing the snapshot failed ({}); lookups keep the rows they have",
                   shown_, e.what());
      failing = true;
      back = false;
    }
  }
}

std::vector<candidate_row> postgres_store::candidates(const std::string& device, const std::string& op,
                                                      const std::string& dtype, const shape_key& shape) {
  if (usable()) {
    try {
      auto res = conn_->exec(std::string("SELECT ") + candidate_columns +
                                 " FROM prism.candidates WHERE device=$1 AND op=$2 AND dtype=$3 AND shape=$4 "
                                 "ORDER BY backend, config",
                             pg::params().add(device).add(op).add(dtype).add(shape.str()));
      std::vector<candidate_row> out;
      for (int i = 0; i < res.rows(); ++i) out.push_back(read_candidate(res, i));
      return out;
    } catch (const pg::failure& f) {
      if (!f.is_connection() || mode_ != database::access::read_write)
        throw db_error("tuning_db::candidates", shown_ + ": " + f.text);
      lost(f, "a read");
    }
  }
  if (auto* local = fallback()) return local->candidates(device, op, dtype, shape);
  throw db_error("tuning_db::candidates", shown_ + ": " + refusal_);
}

std::vector<result_row> postgres_store::results(const row_filter& filter) {
  if (usable()) {
    try {
      pg::params p;
      std::string where = where_of(filter, p);
      auto res = conn_->exec(std::string("SELECT ") + result_columns + " FROM prism.results" + where +
                                 " ORDER BY device, op, dtype, shape",
                             p);
      std::vector<result_row> out;
      out.reserve(static_cast<std::size_t>(res.rows()));
      for (int i = 0; i < res.rows(); ++i) out.push_back(read_result(res, i));
      return out;
    } catch (const pg::failure& f) {
      if (!f.is_connection() || mode_ != database::access::read_write)
        throw db_error("tuning_db::results", shown_ + ": " + f.text);
      lost(f, "a read");
    }
  }
  if (auto* local = fallback()) return local->results(filter);
  throw db_error("tuning_db::results", shown_ + ": " + refusal_);
}

std::vector<candidate_row> postgres_store::all_candidates(const row_filter& filter) {
  if (!usable()) throw db_error("tuning_db::candidates", shown_ + ": " + refusal_);
  try {
    pg::params p;
    std::string where = where_of(filter, p);
    auto res = conn_->exec(std::string("SELECT ") + candidate_columns + " FROM prism.candidates" + where +
                               " ORDER BY device, op, dtype, shape, backend, config",
                           p);
    std::vector<candidate_row> out;
    for (int i = 0; i < res.rows(); ++i) out.push_back(read_candidate(res, i));
    return out;
  } catch (const pg::failure& f) {
    throw db_error("tuning_db::candidates", shown_ + ": " + f.text);
  }
}

std::vector<device_record> postgres_store::devices() {
  if (usable()) {
    try {
      auto res = conn_->exec(
          "SELECT fingerprint, name, driver_version, info FROM prism.devices ORDER BY fingerprint");
      std::vector<device_record> out;
      for (int i = 0; i < res.rows(); ++i)
        out.push_back(device_record{res.text(i, 0), res.text(i, 1), res.text(i, 2), res.text(i, 3)});
      return out;
    } catch (const pg::failure& f) {
      if (!f.is_connection() || mode_ != database::access::read_write)
        throw db_error("tuning_db::devices", shown_ + ": " + f.text);
      lost(f, "a read");
    }
  }
  if (auto* local = fallback()) return local->devices();
  throw db_error("tuning_db::devices", shown_ + ": " + refusal_);
}

// The checks a server allows from a client: the schema version, and rows no prism would write
// (a time that is not a positive number, a result of a device without a record).
std::string postgres_store::integrity_check() {
  if (!usable()) return "not open: " + refusal_;
  try {
    std::string out;
    auto bad = conn_->exec(
        "SELECT device, op, dtype, shape FROM prism.results WHERE NOT (p50_ns > 0 AND p50_ns < 1e18) "
        "ORDER BY 1, 2, 3, 4 LIMIT 20");
    for (int i = 0; i < bad.rows(); ++i) {
      if (!out.empty()) out += '\n';
      out += "row " + bad.text(i, 0) + " " + bad.text(i, 1) + " " + bad.text(i, 2) + " [" + bad.text(i, 3) +
             "]: p50_ns is not a positive time";
    }
    return out.empty() ? "ok" : out;
  } catch (const pg::failure& f) {
    return "check failed: " + f.text;
  }
}

}  // namespace prism::tuning
