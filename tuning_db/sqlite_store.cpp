// SPDX-License-Identifier: Apache-2.0
// The SQLite store: opening (with corrupt-file and read-only fallbacks), writes in short
// BEGIN IMMEDIATE transactions, reads, repair.
#include "tuning_db/sqlite_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "prism/version.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/schema.hpp"

namespace prism::tuning {

namespace fs = std::filesystem;
using detail::db_error;
using detail::log;

namespace {

// Percent-encodes a path for a file: URI (needed for the read-only and immutable opens).
std::string file_uri(const std::string& path, const char* query) {
  std::string out = "file:";
  for (unsigned char c : path) {
    if (c == '?' || c == '#' || c == '%' || c < 0x20) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "?" + query;
}

std::string timestamp_utc() {
  auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// True when the first 100 bytes are an SQLite header carrying prism's application_id.
bool has_prism_header(const std::string& path) {
  unsigned char h[100] = {};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::pread(fd, h, sizeof h, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof h) || std::memcmp(h, "SQLite format 3", 16) != 0) return false;
  std::uint32_t app =
      (std::uint32_t(h[68]) << 24) | (std::uint32_t(h[69]) << 16) | (std::uint32_t(h[70]) << 8) | h[71];
  return app == static_cast<std::uint32_t>(schema::application_id);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Opening
//
// Opening only reads: it identifies the file and keeps a connection for lookups. Nothing is
// created, migrated or renamed until the first write (ensure_writer). A file that is not a
// usable prism database (not SQLite, damaged, another program's) is refused and left as it is;
// only `prism db repair` (database::repair) moves a damaged one aside.

sqlite_store::sqlite_store(std::string p, database::access m) : path(std::move(p)), mode(m) {
  open();
}
sqlite_store::~sqlite_store() = default;

namespace {

// The nearest existing ancestor of `dir` (the directory a first write would create things in).
fs::path existing_ancestor(fs::path dir) {
  std::error_code ec;
  while (!dir.empty() && !fs::exists(dir, ec)) {
    auto parent = dir.parent_path();
    if (parent == dir) break;
    dir = parent;
  }
  return dir.empty() ? fs::path(".") : dir;
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

void sqlite_store::refuse(refusal_kind kind, std::string why) {
  refused_as = kind;
  conn.reset();
  conn_rw = false;
  prepared = false;
  writable_ = false;
  reason = why;
  refusal_ = std::move(why);
  // Read-only opens are the `prism db` commands and repair, which report the refusal themselves.
  if (mode == database::access::read_write)
    log().warn("tuning database {}: {}; dispatch uses vendor defaults and tuning results cannot be saved",
               path, refusal_);
}

void sqlite_store::open() {
  conn.reset();
  conn_rw = false;
  prepared = false;
  writable_ = false;
  reason.clear();
  refusal_.clear();
  refused_as = refusal_kind::none;
  if (path.empty()) {
    refused_as = refusal_kind::other;
    refusal_ = reason = "the database path is empty";
    return;
  }
  fs::path file(path);
  fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // No file yet: lookups find nothing; the first write creates it (and its directory).
    if (mode == database::access::read_only) {
      reason = "no database file at " + path;
      return;
    }
    fs::path base = existing_ancestor(dir);
    std::error_code ec;
    if (!fs::is_directory(base, ec))
      reason = "cannot create directory " + dir.string() + ": " + base.string() + " is not a directory";
    else if (::access(base.c_str(), W_OK) != 0)
      reason = base == dir
                   ? "directory " + dir.string() + " is not writable"
                   : "cannot create directory " + dir.string() + ": " + base.string() + " is not writable";
    if (!reason.empty()) {
      log().warn(
          "tuning database {} cannot be created ({}): dispatch uses vendor defaults and tuning results "
          "cannot be saved",
          path, reason);
      return;
    }
    writable_ = true;
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    refuse(refusal_kind::other, "it is not a regular file");
    return;
  }
  bool dir_writable = ::access(dir.c_str(), W_OK) == 0;
  bool file_writable = ::access(path.c_str(), W_OK) == 0;
  std::string ro_why = !dir_writable    ? "directory " + dir.string() + " is not writable"
                       : !file_writable ? "file " + path + " is not writable"
                                        : "";
  if (!open_reader(ro_why.empty())) return;
  if (mode == database::access::read_only) return;
  if (!ro_why.empty()) {
    reason = ro_why;
    log().warn(
        "tuning database {} is read-only ({}): lookups use the rows there, tuning results cannot be saved",
        path, reason);
    return;
  }
  if (found_version > schema::current_version) {
    reason = "it was written by a newer prism (schema v" + std::to_string(found_version) +
             ", this prism writes v" + std::to_string(schema::current_version) + ")";
    log().warn("tuning database {}: {}; lookups only, tuning results cannot be saved", path, reason);
    return;
  }
  writable_ = true;
}

// Opens an existing file for reading and identifies it. A read-write connection (no create) is
// used where possible: it removes the transient -wal/-shm it makes when it closes, where a
// read-only one would leave them behind. When a -wal is already there (a writer is running,
// or one was killed) a read-only open leaves the files as they are.
bool sqlite_store::open_reader(bool may_open_rw) {
  bool rw = may_open_rw && (mode == database::access::read_write || !file_exists(path + "-wal"));
  std::vector<std::pair<std::string, int>> attempts;
  if (rw) attempts.emplace_back(path, SQLITE_OPEN_READWRITE);
  attempts.emplace_back(file_uri(path, "mode=ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  // mode=ro fails on a WAL file whose -shm cannot be created; immutable=1 still reads it.
  if (!file_exists(path + "-wal"))
    attempts.emplace_back(file_uri(path, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  std::string last_error;
  for (auto& [uri, flags] : attempts) {
    try {
      conn = std::make_unique<sql::connection>(uri, flags);
      conn_rw = (flags & SQLITE_OPEN_READWRITE) != 0;
      // A non-SQLite file fails here with SQLITE_NOTADB; a damaged one reports its first problem.
      std::string check = conn->query_text("PRAGMA quick_check(1)");
      if (check != "ok") throw sql::failure(SQLITE_CORRUPT, SQLITE_CORRUPT, "quick_check: " + check);
      std::string foreign = schema::foreign_reason(*conn);
      if (!foreign.empty()) {
        refuse(refusal_kind::foreign,
               "it is not a prism tuning database: " + foreign +
                   "; prism leaves it untouched (choose another file with --db or PRISM_TUNING_DB)");
        return false;
      }
      found_version = static_cast<int>(conn->query_int("PRAGMA user_version"));
      return true;
    } catch (const sql::failure& f) {
      conn.reset();
      conn_rw = false;
      if (f.code == SQLITE_NOTADB) {
        refuse(refusal_kind::not_sqlite,
               "it is not an SQLite database (" + f.text +
                   "); prism leaves it untouched (choose another file with --db or PRISM_TUNING_DB)");
        return false;
      }
      if (f.code == SQLITE_CORRUPT) {
        refuse(refusal_kind::damaged, "the database is damaged (" + f.text + "); `prism db repair --db " +
                                          path + "` moves it aside so that a new one can be started");
        return false;
      }
      last_error = f.text;
    }
  }
  refuse(refusal_kind::other, "cannot be opened: " + last_error);
  return false;
}

// The first write: creates the file (and its directory) if needed, switches it to WAL and
// brings its schema up to date. Throws database_error when the file cannot be written.
void sqlite_store::ensure_writer(const char* operation) {
  require_writable(operation);
  if (conn && conn_rw && prepared) return;
  try {
    if (!conn || !conn_rw) {
      conn.reset();
      fs::path file(path);
      std::error_code ec;
      if (!file.parent_path().empty()) fs::create_directories(file.parent_path(), ec);
      if (ec)
        throw db_error(operation, "cannot save tuning results to " + path + ": cannot create directory " +
                                      file.parent_path().string() + ": " + ec.message());
      conn = std::make_unique<sql::connection>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
      conn_rw = true;
      if (conn->read_only()) throw sql::failure(SQLITE_READONLY, SQLITE_READONLY, path + " opened read-only");
      std::string check = conn->query_text("PRAGMA quick_check(1)");
      if (check != "ok") throw sql::failure(SQLITE_CORRUPT, SQLITE_CORRUPT, "quick_check: " + check);
    }
    // Another process may have put something else at this path since we looked.
    std::string foreign = schema::foreign_reason(*conn);
    if (!foreign.empty()) {
      refuse(refusal_kind::foreign,
             "it is not a prism tuning database: " + foreign + "; prism leaves it untouched");
      throw db_error(operation, "cannot save tuning results to " + path + ": " + reason);
    }
    set_wal();
    // NORMAL is durable against process crashes (kill -9) in WAL mode; only power loss can drop
    // the last commits, and never corrupts the file.
    conn->exec("PRAGMA synchronous=NORMAL");
    int before = schema::migrate(*conn);
    found_version = std::max(before, schema::current_version);
    if (found_version > schema::current_version) {
      writable_ = false;
      reason = "it was written by a newer prism (schema v" + std::to_string(found_version) +
               ", this prism writes v" + std::to_string(schema::current_version) + ")";
      require_writable(operation);
    }
    prepared = true;
  } catch (const sql::failure& f) {
    conn.reset();
    conn_rw = false;
    throw db_error(operation, "cannot save tuning results to " + path + ": " + f.text);
  }
}

// True once the file has prism's tables: a file another process has just created may have none
// yet, and reads then find nothing.
bool sqlite_store::schema_ready() {
  if (!conn) return false;
  if (found_version >= 1) return true;
  found_version = static_cast<int>(conn->query_int("PRAGMA user_version"));
  return found_version >= 1;
}

// Reads after opening found no file: another process may have created it since.
void sqlite_store::ensure_reader() {
  if (conn || !refusal_.empty() || !file_exists(path)) return;
  bool dir_ok =
      ::access((fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path()).c_str(),
               W_OK) == 0;
  bool rw = dir_ok && ::access(path.c_str(), W_OK) == 0;
  open_reader(rw);
}

// Several processes may create the same new file at once; switching it to WAL needs an
// exclusive lock, so a concurrent switch can answer SQLITE_BUSY (or leave the mode unchanged).
// Retry until the file reports WAL: once any process has set it, it persists in the file.
void sqlite_store::set_wal() {
  auto start = std::chrono::steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    std::string mode_now;
    try {
      mode_now = conn->query_text("PRAGMA journal_mode=WAL");
    } catch (const sql::failure& f) {
      if (!f.is_busy()) throw;
    }
    if (mode_now == "wal") return;
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(sql::busy_deadline_ms))
      throw sql::failure(SQLITE_BUSY, SQLITE_BUSY,
                         "could not switch " + path + " to WAL mode (got '" + mode_now + "')");
    ++conn->busy_retries;
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + attempt % 20));
  }
}

// Copies the WAL into the main file and truncates it, so that the .db file alone is complete
// (a copy of it holds every row). Best effort: a busy reader only delays it.
void sqlite_store::checkpoint() {
  if (!conn || !conn_rw || !prepared) return;
  try {
    conn->query_text("PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (const sql::failure& f) {
    log().debug("tuning database {}: checkpoint: {}", path, f.text);
  }
}

std::string database::repair(const std::string& path, bool force) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw prism::error(errc::not_found, "tuning_db::repair", "no database file at " + path);
  if (!S_ISREG(st.st_mode))
    throw prism::error(errc::invalid_argument, "tuning_db::repair", path + " is not a regular file");
  {
    sqlite_store probe(path, access::read_only);
    auto kind = probe.refused_as;
    if (kind == sqlite_store::refusal_kind::none) return {};
    if (kind == sqlite_store::refusal_kind::foreign)
      throw prism::error(errc::invalid_argument, "tuning_db::repair",
                         path + " is a sound SQLite database of another program, not a damaged prism one: " +
                             probe.refusal());
  }
  if (!force && !has_prism_header(path))
    throw prism::error(errc::invalid_argument, "tuning_db::repair",
                       path +
                           " does not start with an SQLite header carrying prism's application_id, so it "
                           "may not be a prism database; `prism db repair --force` moves it aside anyway");
  // A lock file serializes processes repairing the same file.
  std::string lock_path = path + ".lock";
  int lock_fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX);
  std::string aside = path + ".corrupt-" + timestamp_utc() + "-" + std::to_string(::getpid());
  int rc = ::rename(path.c_str(), aside.c_str());
  int err = errno;
  if (rc == 0) {
    // A stale WAL must never be replayed into the new database: it goes with the file.
    ::rename((path + "-wal").c_str(), (aside + "-wal").c_str());
    ::unlink((path + "-shm").c_str());
  }
  if (lock_fd >= 0) {
    ::flock(lock_fd, LOCK_UN);
    ::close(lock_fd);
    ::unlink(lock_path.c_str());
  }
  if (rc != 0)
    throw prism::error(errc::io_error, "tuning_db::repair",
                       "cannot move " + path + " to " + aside + ": " + std::strerror(err));
  log().warn("tuning database {} was damaged: moved it to {}; the next write starts a new one", path, aside);
  return aside;
}

void sqlite_store::close() {
  checkpoint();
  // The last connection to close also removes the -wal and -shm files.
  conn.reset();
  conn_rw = false;
  prepared = false;
}

// ---------------------------------------------------------------------------------------------
// Row helpers

namespace {

constexpr const char* result_columns =
    "device, op, dtype, shape, backend, config, p20_ns, p50_ns, p80_ns, default_ns, kernel_hash, "
    "driver_version, prism_version, tuned_at";

result_row read_result(const sql::statement& st) {
  result_row r;
  r.device = st.text(0);
  r.op = st.text(1);
  r.dtype = st.text(2);
  r.shape = st.text(3);
  r.backend = st.text(4);
  r.config = st.text(5);
  r.p20_ns = st.real(6);
  r.p50_ns = st.real(7);
  r.p80_ns = st.real(8);
  r.default_ns = st.real(9);
  r.kernel_hash = st.text(10);
  r.driver_version = st.text(11);
  r.prism_version = st.text(12);
  r.tuned_at = st.integer(13);
  return r;
}

void insert_result(sql::connection& conn, const result_row& r) {
  sql::statement st(conn, std::string("INSERT OR REPLACE INTO results (") + result_columns +
                              ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)");
  st.bind(1, r.device).bind(2, r.op).bind(3, r.dtype).bind(4, r.shape).bind(5, r.backend).bind(6, r.config);
  st.bind(7, r.p20_ns).bind(8, r.p50_ns).bind(9, r.p80_ns).bind(10, r.default_ns).bind(11, r.kernel_hash);
  st.bind(12, r.driver_version)
      .bind(13, r.prism_version.empty() ? std::string(prism::version()) : r.prism_version);
  st.bind(14, r.tuned_at ? r.tuned_at : detail::now_seconds());
  st.run();
}

void insert_candidate(sql::connection& conn, const candidate_row& c) {
  sql::statement st(
      conn,
      "INSERT OR REPLACE INTO candidates (device, op, dtype, shape, backend, config, status, reason, "
      "p20_ns, p50_ns, p80_ns, kernel_hash, measured_at) VALUES "
      "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)");
  st.bind(1, c.device).bind(2, c.op).bind(3, c.dtype).bind(4, c.shape).bind(5, c.backend).bind(6, c.config);
  st.bind(7, std::string_view(candidate_status_name(c.status))).bind(8, c.reason);
  st.bind(9, c.p20_ns).bind(10, c.p50_ns).bind(11, c.p80_ns).bind(12, c.kernel_hash);
  st.bind(13, c.measured_at ? c.measured_at : detail::now_seconds());
  st.run();
}

void upsert_device(sql::connection& conn, const device_record& d) {
  sql::statement st(
      conn,
      "INSERT INTO devices (fingerprint, name, driver_version, info, first_seen, last_seen) "
      "VALUES (?1,?2,?3,?4,?5,?5) ON CONFLICT(fingerprint) DO UPDATE SET name=excluded.name, "
      "driver_version=excluded.driver_version, info=excluded.info, last_seen=excluded.last_seen");
  st.bind(1, d.fingerprint).bind(2, d.name).bind(3, d.driver_version);
  st.bind(4, d.info_json.empty() ? std::string("{}") : d.info_json).bind(5, detail::now_seconds());
  st.run();
}

// WHERE clause for a row_filter; binds start at 1 in the order device, op, dtype, shape.
struct filter_sql {
  std::string where;
  std::vector<std::string> binds;
};
filter_sql where_of(const row_filter& f) {
  filter_sql out;
  auto add = [&](const char* clause, const std::string& value) {
    out.where += out.where.empty() ? " WHERE " : " AND ";
    out.where += clause;
    out.binds.push_back(value);
  };
  // A prefix match without LIKE: '%' and '_' in the filter are plain characters.
  if (!f.device.empty()) add("instr(device, ?) = 1", f.device);
  if (!f.op.empty()) add("op = ?", f.op);
  if (!f.dtype.empty()) add("dtype = ?", f.dtype);
  if (!f.shape.empty()) add("shape = ?", shape_key::parse(f.shape).str());
  return out;
}
// The winner of a finished shape replaces the stored row when it is faster, or when another
// prism or driver measured the stored one (it may be stale: the same config can build another
// kernel there). One statement, as on the server (postgres_store.cpp).
void upsert_winner(sql::connection& conn, const result_row& r) {
  sql::statement st(
      conn,
      std::string("INSERT INTO results (") + result_columns +
          ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14) "
          "ON CONFLICT(device, op, dtype, shape) DO UPDATE SET backend=excluded.backend, "
          "config=excluded.config, p20_ns=excluded.p20_ns, p50_ns=excluded.p50_ns, "
          "p80_ns=excluded.p80_ns, default_ns=excluded.default_ns, "
          "kernel_hash=excluded.kernel_hash, driver_version=excluded.driver_version, "
          "prism_version=excluded.prism_version, tuned_at=excluded.tuned_at "
          "WHERE excluded.p50_ns < results.p50_ns OR excluded.prism_version <> results.prism_version OR "
          "excluded.driver_version <> results.driver_version");
  st.bind(1, r.device).bind(2, r.op).bind(3, r.dtype).bind(4, r.shape).bind(5, r.backend).bind(6, r.config);
  st.bind(7, r.p20_ns).bind(8, r.p50_ns).bind(9, r.p80_ns).bind(10, r.default_ns).bind(11, r.kernel_hash);
  st.bind(12, r.driver_version)
      .bind(13, r.prism_version.empty() ? std::string(prism::version()) : r.prism_version);
  st.bind(14, r.tuned_at ? r.tuned_at : detail::now_seconds());
  st.run();
}

candidate_row read_candidate(const sql::statement& st) {
  candidate_row c;
  c.device = st.text(0);
  c.op = st.text(1);
  c.dtype = st.text(2);
  c.shape = st.text(3);
  c.backend = st.text(4);
  c.config = st.text(5);
  c.status = parse_candidate_status(st.text(6));
  c.reason = st.text(7);
  c.p20_ns = st.real(8);
  c.p50_ns = st.real(9);
  c.p80_ns = st.real(10);
  c.kernel_hash = st.text(11);
  c.measured_at = st.integer(12);
  return c;
}

constexpr const char* candidate_columns =
    "device, op, dtype, shape, backend, config, status, reason, p20_ns, p50_ns, p80_ns, kernel_hash, "
    "measured_at";

void bind_all(sql::statement& st, const filter_sql& f) {
  for (std::size_t i = 0; i < f.binds.size(); ++i) st.bind(static_cast<int>(i + 1), f.binds[i]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writes and reads (the database object serializes calls)

int sqlite_store::schema_version() {
  ensure_reader();
  if (!conn) return 0;
  return static_cast<int>(conn->query_int("PRAGMA user_version"));
}

int sqlite_store::init_schema() {
  int before = 0;
  if (conn) before = static_cast<int>(conn->query_int("PRAGMA user_version"));
  ensure_writer("tuning_db::init");
  return before;
}

void sqlite_store::require_writable(const char* operation) const {
  if (!writable_)
    throw db_error(operation, "cannot save tuning results to " + path + ": " +
                                  (reason.empty() ? std::string("the database is not open") : reason) +
                                  " (choose another file with --db or PRISM_TUNING_DB)");
}

void sqlite_store::put_device(const device_record& dev) {
  ensure_writer("tuning_db::put_device");
  guarded("tuning_db::put_device", [&] { conn->write_transaction([&] { upsert_device(*conn, dev); }); });
}

void sqlite_store::put_result(const result_row& row) {
  ensure_writer("tuning_db::put_result");
  guarded("tuning_db::put_result", [&] { conn->write_transaction([&] { insert_result(*conn, row); }); });
}

bool sqlite_store::store_if_faster(const result_row& row, bool replace, merge_report* report) {
  sql::statement st(*conn, "SELECT p50_ns FROM results WHERE device=?1 AND op=?2 AND dtype=?3 AND shape=?4");
  st.bind(1, row.device).bind(2, row.op).bind(3, row.dtype).bind(4, row.shape);
  bool exists = st.step();
  double old_p50 = exists ? st.real(0) : 0;
  if (exists && !replace && !(row.p50_ns < old_p50)) {
    if (report) ++report->kept;
    return false;
  }
  insert_result(*conn, row);
  if (report) ++(exists ? report->replaced : report->inserted);
  return true;
}

bool sqlite_store::put_result_if_faster(const result_row& row) {
  ensure_writer("tuning_db::put_result_if_faster");
  bool stored = false;
  guarded("tuning_db::put_result_if_faster",
          [&] { conn->write_transaction([&] { stored = store_if_faster(row, false, nullptr); }); });
  return stored;
}

void sqlite_store::put_candidate(const candidate_row& row) {
  ensure_writer("tuning_db::put_candidate");
  guarded("tuning_db::put_candidate",
          [&] { conn->write_transaction([&] { insert_candidate(*conn, row); }); });
}

void sqlite_store::put_shape(const result_row& winner, const std::vector<candidate_row>& cands) {
  ensure_writer("tuning_db::put_shape");
  guarded("tuning_db::put_shape", [&] {
    conn->write_transaction([&] {
      for (auto& c : cands) insert_candidate(*conn, c);
      upsert_winner(*conn, winner);
    });
  });
}

std::size_t sqlite_store::clear(const row_filter& filter) {
  ensure_writer("tuning_db::clear");
  std::size_t removed = 0;
  guarded("tuning_db::clear", [&] {
    auto f = where_of(filter);
    conn->write_transaction([&] {
      sql::statement del(*conn, "DELETE FROM results" + f.where);
      bind_all(del, f);
      del.run();
      removed = static_cast<std::size_t>(sqlite3_changes(conn->handle()));
      sql::statement delc(*conn, "DELETE FROM candidates" + f.where);
      bind_all(delc, f);
      delc.run();
    });
  });
  return removed;
}

void sqlite_store::vacuum() {
  ensure_writer("tuning_db::vacuum");
  guarded("tuning_db::vacuum", [&] {
    conn->exec("VACUUM");
    conn->query_text("PRAGMA wal_checkpoint(TRUNCATE)");
  });
}

merge_report sqlite_store::store_rows(const row_bundle& rows, bool replace) {
  ensure_writer("tuning_db::store_rows");
  merge_report report;
  guarded("tuning_db::store_rows", [&] {
    conn->write_transaction([&] {
      report = merge_report{};
      for (auto& d : rows.devices) {
        upsert_device(*conn, d);
        ++report.devices;
      }
      for (auto& c : rows.candidates) insert_candidate(*conn, c);
      for (auto& r : rows.results) store_if_faster(r, replace, &report);
    });
  });
  checkpoint();
  return report;
}

std::vector<result_row> sqlite_store::group_rows(const std::string& device, const std::string& op,
                                                 const std::string& dtype) {
  std::vector<result_row> rows;
  ensure_reader();
  if (!schema_ready()) return rows;
  guarded("tuning_db::lookup", [&] {
    sql::statement st(*conn, std::string("SELECT ") + result_columns +
                                 " FROM results WHERE device=?1 AND op=?2 AND dtype=?3 ORDER BY shape");
    st.bind(1, device).bind(2, op).bind(3, dtype);
    while (st.step()) rows.push_back(read_result(st));
  });
  return rows;
}

std::vector<candidate_row> sqlite_store::candidates(const std::string& device, const std::string& op,
                                                    const std::string& dtype, const shape_key& shape) {
  std::vector<candidate_row> out;
  ensure_reader();
  if (!schema_ready()) return out;
  guarded("tuning_db::candidates", [&] {
    sql::statement st(*conn, std::string("SELECT ") + candidate_columns +
                                 " FROM candidates WHERE device=?1 AND op=?2 AND dtype=?3 AND shape=?4 "
                                 "ORDER BY backend, config");
    st.bind(1, device).bind(2, op).bind(3, dtype).bind(4, shape.str());
    while (st.step()) out.push_back(read_candidate(st));
  });
  return out;
}

std::vector<candidate_row> sqlite_store::all_candidates(const row_filter& filter) {
  std::vector<candidate_row> out;
  ensure_reader();
  if (!schema_ready()) return out;
  guarded("tuning_db::candidates", [&] {
    auto f = where_of(filter);
    sql::statement st(*conn, std::string("SELECT ") + candidate_columns + " FROM candidates" + f.where +
                                 " ORDER BY device, op, dtype, shape, backend, config");
    bind_all(st, f);
    while (st.step()) out.push_back(read_candidate(st));
  });
  return out;
}

std::vector<result_row> sqlite_store::results(const row_filter& filter) {
  std::vector<result_row> out;
  ensure_reader();
  if (!schema_ready()) return out;
  guarded("tuning_db::results", [&] {
    auto f = where_of(filter);
    sql::statement st(*conn, std::string("SELECT ") + result_columns + " FROM results" + f.where +
                                 " ORDER BY device, op, dtype, shape");
    bind_all(st, f);
    while (st.step()) out.push_back(read_result(st));
  });
  return out;
}

std::vector<device_record> sqlite_store::devices() {
  std::vector<device_record> out;
  ensure_reader();
  if (!schema_ready()) return out;
  guarded("tuning_db::devices", [&] {
    sql::statement st(*conn,
                      "SELECT fingerprint, name, driver_version, info FROM devices ORDER BY fingerprint");
    while (st.step()) out.push_back(device_record{st.text(0), st.text(1), st.text(2), st.text(3)});
  });
  return out;
}

std::string sqlite_store::integrity_check() {
  ensure_reader();
  if (!conn) return "not open: " + reason;
  return guarded("tuning_db::integrity_check", [&] {
    sql::statement st(*conn, "PRAGMA integrity_check");
    std::string out;
    while (st.step()) {
      if (!out.empty()) out += '\n';
      out += st.text(0);
    }
    return out;
  });
}

}  // namespace prism::tuning
