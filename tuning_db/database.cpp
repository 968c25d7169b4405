// SPDX-License-Identifier: Apache-2.0
// prism::tuning::database: opening (with corrupt-file and read-only fallbacks), writes in short
// BEGIN IMMEDIATE transactions, memoized exact/nearest lookups, check and stats.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "prism/tuning_db.hpp"
#include "prism/version.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/database_impl.hpp"
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

const char* candidate_status_name(candidate_status s) noexcept {
  switch (s) {
    case candidate_status::ok:
      return "ok";
    case candidate_status::build_error:
      return "build_error";
    case candidate_status::out_of_resources:
      return "out_of_resources";
    case candidate_status::wrong_result:
      return "wrong_result";
    case candidate_status::runtime_error:
      return "runtime_error";
    case candidate_status::unsupported:
      return "unsupported";
  }
  return "unknown";
}

candidate_status parse_candidate_status(std::string_view name) {
  for (auto s :
       {candidate_status::ok, candidate_status::build_error, candidate_status::out_of_resources,
        candidate_status::wrong_result, candidate_status::runtime_error, candidate_status::unsupported})
    if (name == candidate_status_name(s)) return s;
  throw prism::error(
      errc::invalid_argument, "tuning::parse_candidate_status",
      "unknown candidate status '" + std::string(name) +
          "'; valid: ok, build_error, out_of_resources, wrong_result, runtime_error, unsupported");
}

const char* match_tier_name(match_tier t) noexcept {
  return t == match_tier::exact ? "db-exact" : "db-nearest";
}

// ---------------------------------------------------------------------------------------------
// Opening
//
// Opening only reads: it identifies the file and keeps a connection for lookups. Nothing is
// created, migrated or renamed until the first write (ensure_writer). A file that is not a
// usable prism database (not SQLite, damaged, another program's) is refused and left as it is;
// only `prism db repair` (database::repair) moves a damaged one aside.

database::impl::impl(std::string p, database::access m) : path(std::move(p)), mode(m) {}

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

void database::impl::refuse(refusal_kind kind, std::string why) {
  refused_as = kind;
  conn.reset();
  conn_rw = false;
  prepared = false;
  writable = false;
  reason = why;
  refusal = std::move(why);
  // Read-only opens are the `prism db` commands and repair, which report the refusal themselves.
  if (mode == database::access::read_write)
    log().warn("tuning database {}: {}; dispatch uses vendor defaults and tuning results cannot be saved",
               path, refusal);
}

void database::impl::open() {
  conn.reset();
  conn_rw = false;
  prepared = false;
  writable = false;
  reason.clear();
  refusal.clear();
  refused_as = refusal_kind::none;
  if (path.empty()) {
    refused_as = refusal_kind::other;
    refusal = reason = "the database path is empty";
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
    writable = true;
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
  writable = true;
}

// Opens an existing file for reading and identifies it. A read-write connection (no create) is
// used where possible: it removes the transient -wal/-shm it makes when it closes, where a
// read-only one would leave them behind. When a -wal is already there (a writer is running,
// or one was killed) a read-only open leaves the files as they are.
bool database::impl::open_reader(bool may_open_rw) {
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
void database::impl::ensure_writer(const char* operation) {
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
      writable = false;
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
bool database::impl::schema_ready() {
  if (!conn) return false;
  if (found_version >= 1) return true;
  found_version = static_cast<int>(conn->query_int("PRAGMA user_version"));
  return found_version >= 1;
}

// Reads after opening found no file: another process may have created it since.
void database::impl::ensure_reader() {
  if (conn || !refusal.empty() || !file_exists(path)) return;
  bool dir_ok =
      ::access((fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path()).c_str(),
               W_OK) == 0;
  bool rw = dir_ok && ::access(path.c_str(), W_OK) == 0;
  open_reader(rw);
}

// Several processes may create the same new file at once; switching it to WAL needs an
// exclusive lock, so a concurrent switch can answer SQLITE_BUSY (or leave the mode unchanged).
// Retry until the file reports WAL: once any process has set it, it persists in the file.
void database::impl::set_wal() {
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
void database::impl::checkpoint() {
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
    database probe(path, access::read_only);
    auto kind = probe.impl_->refused_as;
    if (kind == impl::refusal_kind::none) return {};
    if (kind == impl::refusal_kind::foreign)
      throw prism::error(errc::invalid_argument, "tuning_db::repair",
                         path + " is a sound SQLite database of another program, not a damaged prism one: " +
                             probe.impl_->refusal);
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

void database::close() {
  std::lock_guard lock(impl_->mu);
  impl_->close();
}

void database::checkpoint() {
  std::lock_guard lock(impl_->mu);
  impl_->checkpoint();
}

const std::string& database::refusal() const noexcept {
  return impl_->refusal;
}

void database::impl::close() {
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
void bind_all(sql::statement& st, const filter_sql& f) {
  for (std::size_t i = 0; i < f.binds.size(); ++i) st.bind(static_cast<int>(i + 1), f.binds[i]);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// database

database::database(std::string path, access mode) : impl_(std::make_unique<impl>(std::move(path), mode)) {
  impl_->open();
}
database::~database() = default;

std::string database::default_path() {
  if (auto p = detail::env("PRISM_TUNING_DB")) return *p;
  if (auto xdg = detail::env("XDG_CACHE_HOME")) return (fs::path(*xdg) / "prism" / "tuning.db").string();
  if (auto home = detail::env("HOME")) return (fs::path(*home) / ".cache" / "prism" / "tuning.db").string();
  return (fs::current_path() / "prism-tuning.db").string();
}

namespace {
struct default_state {
  std::mutex mu;
  std::string path;
  database* db = nullptr;
  std::vector<database*> all;  // every database process_default() ever returned
  bool exit_hook = false;
};
// Never destroyed: the database may be used until the very end of the process.
default_state& defaults() {
  static auto* s = new default_state;
  return *s;
}
// At exit the default databases are closed, which folds their WAL into the .db file. One
// used afterwards (by another exit handler) reopens itself.
void close_defaults() {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  for (auto* db : s.all) db->close();
}
database* make_default(default_state& s, const std::string& path) {
  auto* db = new database(path);
  s.all.push_back(db);
  if (!s.exit_hook) {
    s.exit_hook = true;
    std::atexit(close_defaults);
  }
  return db;
}
}  // namespace

database& database::process_default() {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  if (!s.db) s.db = make_default(s, s.path.empty() ? default_path() : s.path);
  return *s.db;
}

void database::set_default_path(std::string path) {
  auto& s = defaults();
  std::lock_guard lock(s.mu);
  s.path = std::move(path);
  // The old object stays alive (deliberately leaked): callers may still hold a reference.
  if (s.db && !s.path.empty() && s.db->path() != s.path) s.db = make_default(s, s.path);
}

const std::string& database::path() const noexcept {
  return impl_->path;
}
bool database::is_open() const noexcept {
  return impl_->conn != nullptr || (impl_->refusal.empty() && impl_->writable);
}
bool database::writable() const noexcept {
  return impl_->writable;
}
const std::string& database::read_only_reason() const noexcept {
  return impl_->reason;
}
int database::current_schema_version() noexcept {
  return schema::current_version;
}

int database::schema_version() const {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_reader();
  if (!impl_->conn) return 0;
  return static_cast<int>(impl_->conn->query_int("PRAGMA user_version"));
}

void database::set_validator(row_validator validator) {
  std::lock_guard lock(impl_->mu);
  impl_->validator = std::move(validator);
  impl_->memo.clear();
  impl_->logged_skips.clear();
}

void database::impl::require_writable(const char* operation) const {
  if (!writable)
    throw db_error(operation, "cannot save tuning results to " + path + ": " +
                                  (reason.empty() ? std::string("the database is not open") : reason) +
                                  " (choose another file with --db or PRISM_TUNING_DB)");
}

void database::impl::forget(const std::string& device, const std::string& op, const std::string& dtype) {
  groups.erase(group_id(device, op, dtype));
  memo.clear();
}

void database::impl::store_device(const device_record& dev) {
  upsert_device(*conn, dev);
}

void database::put_device(const device_record& dev) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::put_device");
  impl_->guarded("tuning_db::put_device", [&] {
    impl_->conn->write_transaction([&] { upsert_device(*impl_->conn, dev); });
    ++impl_->writes;
  });
}

void database::put_result(const result_row& row) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::put_result");
  impl_->guarded("tuning_db::put_result", [&] {
    impl_->conn->write_transaction([&] { insert_result(*impl_->conn, row); });
    ++impl_->writes;
  });
  impl_->forget(row.device, row.op, row.dtype);
}

bool database::impl::store_if_faster(const result_row& row, bool replace, merge_report* report) {
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

bool database::put_result_if_faster(const result_row& row) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::put_result_if_faster");
  bool stored = false;
  impl_->guarded("tuning_db::put_result_if_faster", [&] {
    impl_->conn->write_transaction([&] { stored = impl_->store_if_faster(row, false, nullptr); });
    ++impl_->writes;
  });
  impl_->forget(row.device, row.op, row.dtype);
  return stored;
}

void database::put_candidate(const candidate_row& row) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::put_candidate");
  impl_->guarded("tuning_db::put_candidate", [&] {
    impl_->conn->write_transaction([&] { insert_candidate(*impl_->conn, row); });
    ++impl_->writes;
  });
}

void database::put_shape(const result_row& winner, const std::vector<candidate_row>& cands) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::put_shape");
  impl_->guarded("tuning_db::put_shape", [&] {
    impl_->conn->write_transaction([&] {
      for (auto& c : cands) insert_candidate(*impl_->conn, c);
      insert_result(*impl_->conn, winner);
    });
    ++impl_->writes;
  });
  impl_->forget(winner.device, winner.op, winner.dtype);
}

std::size_t database::clear(const row_filter& filter) {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::clear");
  std::size_t removed = 0;
  impl_->guarded("tuning_db::clear", [&] {
    auto f = where_of(filter);
    impl_->conn->write_transaction([&] {
      sql::statement del(*impl_->conn, "DELETE FROM results" + f.where);
      bind_all(del, f);
      del.run();
      removed = static_cast<std::size_t>(sqlite3_changes(impl_->conn->handle()));
      sql::statement delc(*impl_->conn, "DELETE FROM candidates" + f.where);
      bind_all(delc, f);
      delc.run();
    });
    ++impl_->writes;
  });
  impl_->groups.clear();
  impl_->memo.clear();
  return removed;
}

void database::vacuum() {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_writer("tuning_db::vacuum");
  impl_->guarded("tuning_db::vacuum", [&] {
    impl_->conn->exec("VACUUM");
    impl_->conn->query_text("PRAGMA wal_checkpoint(TRUNCATE)");
  });
}

// ---- reads ----

std::string database::impl::group_id(const std::string& device, const std::string& op,
                                     const std::string& dtype) {
  return device + '\x1f' + op + '\x1f' + dtype;
}

std::vector<result_row> database::impl::load_group(const std::string& device, const std::string& op,
                                                   const std::string& dtype) {
  std::vector<result_row> rows;
  ensure_reader();
  if (!schema_ready()) return rows;
  sql::statement st(*conn, std::string("SELECT ") + result_columns +
                               " FROM results WHERE device=?1 AND op=?2 AND dtype=?3 ORDER BY shape");
  st.bind(1, device).bind(2, op).bind(3, dtype);
  while (st.step()) rows.push_back(read_result(st));
  return rows;
}

std::string database::impl::skip_reason(const result_row& row, const std::string& driver_version,
                                        const row_validator* own) {
  if (!driver_version.empty() && !row.driver_version.empty() && row.driver_version != driver_version)
    return "driver version changed: tuned on '" + row.driver_version + "', device now reports '" +
           driver_version + "'";
  if (own) return (*own)(row);
  if (validator) return validator(row);
  return {};
}

std::optional<match> database::lookup(const lookup_query& q) {
  auto& d = *impl_;
  std::lock_guard lock(d.mu);
  ++d.lookups;
  std::string canon = q.shape.canonical();
  std::string gid = d.group_id(q.device, q.op, q.dtype);
  std::string memo_key =
      gid + '\x1f' + canon + '\x1f' + q.driver_version + '\x1f' + std::to_string(q.max_distance);
  if (auto it = d.memo.find(memo_key); it != d.memo.end()) {
    ++d.memo_hits;
    return it->second;
  }
  auto git = d.groups.find(gid);
  if (git == d.groups.end()) {
    std::vector<impl::cached_row> rows;
    try {
      ++d.sql_queries;
      for (auto& r : d.load_group(q.device, q.op, q.dtype)) {
        impl::cached_row c;
        try {
          c.key = shape_key::parse(r.shape);
        } catch (const prism::error& e) {
          log().warn("tuning database {}: skipping row {} {} '{}': {}", d.path, r.op, r.dtype, r.shape,
                     e.message());
          continue;
        }
        c.row = std::move(r);
        rows.push_back(std::move(c));
      }
    } catch (const sql::failure& f) {
      // A lookup never fails dispatch: log and answer from the defaults.
      log().warn("tuning database {}: lookup of {} {} failed ({}); using defaults", d.path, q.op, q.dtype,
                 f.text);
      return std::nullopt;
    }
    git = d.groups.emplace(gid, std::move(rows)).first;
  }

  auto usable = [&](const impl::cached_row& c) {
    std::string why = d.skip_reason(c.row, q.driver_version, q.validator ? &q.validator : nullptr);
    if (why.empty()) return true;
    std::string once = gid + '\x1f' + c.row.shape + '\x1f' + why;
    if (d.logged_skips.insert(once).second)
      log().warn("tuning database: skipping {} {} [{}] (backend {}, config '{}'): {}", c.row.op, c.row.dtype,
                 c.row.shape, c.row.backend, c.row.config, why);
    return false;
  };

  std::optional<match> answer;
  for (auto& c : git->second) {
    if (c.key.canonical() == canon) {
      if (usable(c)) answer = match{match_tier::exact, c.row, 0.0};
      break;
    }
  }
  if (!answer) {
    const impl::cached_row* best = nullptr;
    double best_d = 0;
    for (auto& c : git->second) {
      double dist = shape_distance(q.shape, c.key);
      if (!(dist <= q.max_distance) || dist == 0) continue;
      // Ties go to the smaller shape key text so every process picks the same row.
      if (best && (dist > best_d || (dist == best_d && c.row.shape >= best->row.shape))) continue;
      if (!usable(c)) continue;
      best = &c;
      best_d = dist;
    }
    if (best) answer = match{match_tier::nearest, best->row, best_d};
  }
  d.memo.emplace(memo_key, answer);
  return answer;
}

std::optional<result_row> database::find_result(const std::string& device, const std::string& op,
                                                const std::string& dtype, const shape_key& shape) {
  std::lock_guard lock(impl_->mu);
  return impl_->guarded("tuning_db::find_result", [&]() -> std::optional<result_row> {
    std::string canon = shape.canonical();
    for (auto& r : impl_->load_group(device, op, dtype))
      if (shape_key::parse(r.shape).canonical() == canon) return r;
    return std::nullopt;
  });
}

std::vector<candidate_row> database::candidates(const std::string& device, const std::string& op,
                                                const std::string& dtype, const shape_key& shape) {
  std::lock_guard lock(impl_->mu);
  std::vector<candidate_row> out;
  impl_->ensure_reader();
  if (!impl_->schema_ready()) return out;
  impl_->guarded("tuning_db::candidates", [&] {
    sql::statement st(
        *impl_->conn,
        "SELECT device, op, dtype, shape, backend, config, status, reason, p20_ns, p50_ns, p80_ns, "
        "kernel_hash, measured_at FROM candidates WHERE device=?1 AND op=?2 AND dtype=?3 AND shape=?4 "
        "ORDER BY backend, config");
    st.bind(1, device).bind(2, op).bind(3, dtype).bind(4, shape.str());
    while (st.step()) {
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
      out.push_back(std::move(c));
    }
  });
  return out;
}

std::vector<result_row> database::impl::select_results(const row_filter& filter) {
  std::vector<result_row> out;
  ensure_reader();
  if (!schema_ready()) return out;
  auto f = where_of(filter);
  sql::statement st(*conn, std::string("SELECT ") + result_columns + " FROM results" + f.where +
                               " ORDER BY device, op, dtype, shape");
  bind_all(st, f);
  while (st.step()) out.push_back(read_result(st));
  return out;
}

std::vector<device_record> database::impl::select_devices() {
  std::vector<device_record> out;
  ensure_reader();
  if (!schema_ready()) return out;
  sql::statement st(*conn,
                    "SELECT fingerprint, name, driver_version, info FROM devices ORDER BY fingerprint");
  while (st.step()) out.push_back(device_record{st.text(0), st.text(1), st.text(2), st.text(3)});
  return out;
}

std::vector<result_row> database::results(const row_filter& filter) {
  std::lock_guard lock(impl_->mu);
  return impl_->guarded("tuning_db::results", [&] { return impl_->select_results(filter); });
}

std::vector<device_record> database::devices() {
  std::lock_guard lock(impl_->mu);
  return impl_->guarded("tuning_db::devices", [&] { return impl_->select_devices(); });
}

std::optional<device_record> database::find_device(const std::string& fingerprint) {
  for (auto& d : devices())
    if (d.fingerprint == fingerprint) return d;
  return std::nullopt;
}

std::vector<stale_row> database::check(const std::vector<device_record>& current) {
  auto rows = results();
  auto known = devices();
  std::lock_guard lock(impl_->mu);
  std::vector<stale_row> out;
  for (auto& r : rows) {
    std::string why;
    auto cur =
        std::find_if(current.begin(), current.end(), [&](auto& d) { return d.fingerprint == r.device; });
    if (cur != current.end()) {
      why = impl_->skip_reason(r, cur->driver_version);
    } else if (!current.empty()) {
      // Same device name under another fingerprint: the driver or platform changed since.
      auto rec = std::find_if(known.begin(), known.end(), [&](auto& d) { return d.fingerprint == r.device; });
      if (rec != known.end()) {
        auto same_name =
            std::find_if(current.begin(), current.end(), [&](auto& d) { return d.name == rec->name; });
        if (same_name != current.end())
          why = "tuned on another fingerprint of " + rec->name + " (" + r.device + ", driver '" +
                rec->driver_version + "'); the device is now " + same_name->fingerprint + " with driver '" +
                same_name->driver_version + "'";
      }
      if (why.empty() && impl_->validator) why = impl_->validator(r);
    } else if (impl_->validator) {
      why = impl_->validator(r);
    }
    if (!why.empty()) out.push_back(stale_row{r, why});
  }
  return out;
}

std::vector<op_stats> database::stats(const row_filter& filter) {
  auto rows = results(filter);
  auto devs = devices();
  std::map<std::pair<std::string, std::string>, std::vector<const result_row*>> groups;
  for (auto& r : rows) groups[{r.device, r.op}].push_back(&r);
  std::vector<op_stats> out;
  for (auto& [key, members] : groups) {
    op_stats s;
    s.device = key.first;
    s.op = key.second;
    for (auto& d : devs)
      if (d.fingerprint == s.device) s.device_name = d.name;
    s.rows = members.size();
    double log_sum = 0;
    for (auto* r : members) {
      double sp = r->speedup();
      if (sp <= 0) continue;
      log_sum += std::log(sp);
      s.min_speedup = s.rows_with_default == 0 ? sp : std::min(s.min_speedup, sp);
      s.max_speedup = std::max(s.max_speedup, sp);
      ++s.rows_with_default;
    }
    if (s.rows_with_default) s.geomean_speedup = std::exp(log_sum / static_cast<double>(s.rows_with_default));
    out.push_back(std::move(s));
  }
  return out;
}

std::string database::integrity_check() {
  std::lock_guard lock(impl_->mu);
  impl_->ensure_reader();
  if (!impl_->conn) return "not open: " + impl_->reason;
  return impl_->guarded("tuning_db::integrity_check", [&] {
    sql::statement st(*impl_->conn, "PRAGMA integrity_check");
    std::string out;
    while (st.step()) {
      if (!out.empty()) out += '\n';
      out += st.text(0);
    }
    return out;
  });
}

database_counters database::counters() const {
  std::lock_guard lock(impl_->mu);
  database_counters c;
  c.sql_queries = impl_->sql_queries;
  c.lookups = impl_->lookups;
  c.memo_hits = impl_->memo_hits;
  c.writes = impl_->writes;
  c.busy_retries = impl_->conn ? impl_->conn->busy_retries.load() : 0;
  return c;
}

}  // namespace prism::tuning
