// SPDX-License-Identifier: Apache-2.0
// A thin RAII layer over the SQLite C API: connection, prepared statements, and the retry
// policy for SQLITE_BUSY that lets many processes share one database file.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace prism::tuning::sql {

/// An SQLite failure: primary + extended result code and SQLite's message.
struct failure : std::exception {
  int code = 0;           ///< primary result code (SQLITE_BUSY, SQLITE_CORRUPT, ...)
  int extended_code = 0;  ///< extended code (SQLITE_BUSY_RECOVERY, ...)
  std::string text;
  failure(int code_, int extended, std::string text_)
      : code(code_), extended_code(extended), text(std::move(text_)) {}
  const char* what() const noexcept override { return text.c_str(); }
  /// The file is not a database or is damaged.
  bool is_corruption() const { return code == SQLITE_NOTADB || code == SQLITE_CORRUPT; }
  bool is_busy() const { return code == SQLITE_BUSY || code == SQLITE_LOCKED; }
  bool is_read_only() const {
    return code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_AUTH;
  }
};

/// How long a statement keeps retrying SQLITE_BUSY (on top of the busy timeout) before failing.
inline constexpr int busy_deadline_ms = 60'000;

class connection;

/// A prepared statement. Bind indexes start at 1; columns at 0.
class statement {
 public:
  statement(connection& conn, std::string_view sql);
  ~statement();
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  statement& bind(int index, std::string_view text);
  statement& bind(int index, double value);
  statement& bind(int index, std::int64_t value);
  statement& bind_null(int index);
  /// Steps once: true while a row is available, false when done. Retries SQLITE_BUSY.
  bool step();
  /// Steps to completion (for statements that return no rows).
  void run();
  void reset();

  std::string text(int column) const;
  double real(int column) const;
  std::int64_t integer(int column) const;
  bool is_null(int column) const;

 private:
  connection& conn_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// One SQLite connection. Not thread safe: the database object serializes access.
class connection {
 public:
  /// Opens `uri` (a file name or a file: URI) with sqlite3_open_v2 flags. Throws failure.
  connection(const std::string& uri, int flags);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  sqlite3* handle() const noexcept { return db_; }
  /// Runs SQL without results, retrying SQLITE_BUSY.
  void exec(std::string_view sql);
  /// Runs a statement whose first row's first column is text (e.g. a PRAGMA).
  std::string query_text(std::string_view sql);
  std::int64_t query_int(std::string_view sql);
  /// BEGIN IMMEDIATE; fn(); COMMIT, rolling back on any exception. The whole transaction is
  /// retried when SQLITE_BUSY still surfaces after the busy timeout.
  void write_transaction(const std::function<void()>& fn);
  /// Throws a failure built from the connection's last error.
  [[noreturn]] void fail(int rc, std::string_view what) const;
  bool read_only() const;

  std::atomic<std::uint64_t> busy_retries{0};

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace prism::tuning::sql
