// SPDX-License-Identifier: Apache-2.0
// SQLite wrapper implementation: statement stepping with a bounded SQLITE_BUSY retry loop on
// top of sqlite3_busy_timeout, and BEGIN IMMEDIATE write transactions.
#include "tuning_db/sqlite.hpp"

#include <chrono>
#include <random>
#include <thread>

namespace prism::tuning::sql {
namespace {

using clock_type = std::chrono::steady_clock;

// Jittered sleep so that processes retrying together do not stay in lock-step.
void backoff(int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  int base = std::min(50, 1 + attempt * 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(base + static_cast<int>(rng() % 10)));
}

bool busy_code(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

}  // namespace

connection::connection(const std::string& uri, int flags) {
  int rc = sqlite3_open_v2(uri.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    int ext = db_ ? sqlite3_extended_errcode(db_) : rc;
    if (db_) sqlite3_close_v2(db_);
    db_ = nullptr;
    throw failure(rc & 0xff, ext, "sqlite3_open_v2(" + uri + "): " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Waits inside SQLite for locks held by other processes; the loops below add a hard deadline.
  sqlite3_busy_timeout(db_, 5000);
}

connection::~connection() {
  if (db_) sqlite3_close_v2(db_);
}

void connection::fail(int rc, std::string_view what) const {
  int ext = sqlite3_extended_errcode(db_);
  throw failure(rc & 0xff, ext, std::string(what) + ": " + sqlite3_errmsg(db_));
}

bool connection::read_only() const {
  return sqlite3_db_readonly(db_, "main") == 1;
}

void connection::exec(std::string_view sql) {
  statement st(*this, sql);
  st.run();
}

std::string connection::query_text(std::string_view sql) {
  statement st(*this, sql);
  return st.step() ? st.text(0) : std::string();
}

std::int64_t connection::query_int(std::string_view sql) {
  statement st(*this, sql);
  return st.step() ? st.integer(0) : 0;
}

void connection::write_transaction(const std::function<void()>& fn) {
  auto start = clock_type::now();
  for (int attempt = 0;; ++attempt) {
    try {
      exec("BEGIN IMMEDIATE");
    } catch (const failure& f) {
      if (f.is_busy() && clock_type::now() - start < std::chrono::milliseconds(busy_deadline_ms)) {
        ++busy_retries;
        backoff(attempt);
        continue;
      }
      throw;
    }
    try {
      fn();
      exec("COMMIT");
      return;
    } catch (const failure& f) {
      if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (f.is_busy() && clock_type::now() - start < std::chrono::milliseconds(busy_deadline_ms)) {
        ++busy_retries;
        backoff(attempt);
        continue;
      }
      throw;
    } catch (...) {
      if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
}

statement::statement(connection& conn, std::string_view sql) : conn_(conn) {
  auto start = clock_type::now();
  for (int attempt = 0;; ++attempt) {
    int rc = sqlite3_prepare_v2(conn_.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
    if (rc == SQLITE_OK) return;
    // Preparing reads the schema, which can meet a lock while another process migrates.
    if (busy_code(rc) && clock_type::now() - start < std::chrono::milliseconds(busy_deadline_ms)) {
      ++conn_.busy_retries;
      backoff(attempt);
      continue;
    }
    conn_.fail(rc, "prepare \"" + std::string(sql.substr(0, 60)) + "\"");
  }
}

statement::~statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

statement& statement::bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
statement& statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
statement& statement::bind(int index, std::int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
statement& statement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

bool statement::step() {
  auto start = clock_type::now();
  for (int attempt = 0;; ++attempt) {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    // Inside an explicit transaction a busy statement must not be retried alone: the
    // transaction is retried as a whole by write_transaction.
    if (busy_code(rc) && sqlite3_get_autocommit(conn_.handle()) &&
        clock_type::now() - start < std::chrono::milliseconds(busy_deadline_ms)) {
      ++conn_.busy_retries;
      sqlite3_reset(stmt_);
      backoff(attempt);
      continue;
    }
    int ext = sqlite3_extended_errcode(conn_.handle());
    std::string msg = sqlite3_errmsg(conn_.handle());
    const char* sql = sqlite3_sql(stmt_);
    sqlite3_reset(stmt_);
    throw failure(rc & 0xff, ext, std::string(sql ? std::string_view(sql).substr(0, 60) : "") + ": " + msg);
  }
}

void statement::run() {
  while (step()) {
  }
}

void statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string statement::text(int column) const {
  auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, column))
           : std::string();
}
double statement::real(int column) const {
  return sqlite3_column_double(stmt_, column);
}
std::int64_t statement::integer(int column) const {
  return sqlite3_column_int64(stmt_, column);
}
bool statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

}  // namespace prism::tuning::sql
