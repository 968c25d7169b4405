// SPDX-License-Identifier: Apache-2.0
// A thin RAII layer over libpq: a connection opened from a postgresql:// URL (with a
// connect_timeout), results, parameterized statements and transactions, and failures that say
// whether the server was unreachable, refused the login, or answered with an SQL error.
#pragma once

#include <libpq-fe.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prism::tuning::pg {

/// Why a libpq call failed.
enum class failure_kind {
  unreachable,  ///< no connection (server down, wrong host or socket, timed out, connection lost)
  auth,         ///< the server refused the login (password, role, pg_hba.conf)
  sql,          ///< the server answered the statement with an error
};

struct failure : std::exception {
  failure_kind kind;
  std::string sqlstate;  ///< e.g. "23505"; empty when there is none
  std::string text;
  failure(failure_kind k, std::string state, std::string t)
      : kind(k), sqlstate(std::move(state)), text(std::move(t)) {}
  const char* what() const noexcept override { return text.c_str(); }
  /// A fault of the server or the network (as opposed to an answer of the server).
  bool is_connection() const { return kind != failure_kind::sql; }
};

/// True when `location` starts with postgresql:// or postgres://.
bool is_url(std::string_view location);
/// "" when libpq accepts `url` as a connection URI, else why not (libpq's own message).
std::string check_url(const std::string& url);
/// The URL with its password replaced by "***" (for messages and logs).
std::string redact(const std::string& url);
/// `text` with every occurrence of `url`'s password replaced by "***" (libpq quotes URLs).
std::string hide_password(std::string text, const std::string& url);

/// One result: rows x columns of text (NULL reads as "").
class result {
 public:
  explicit result(PGresult* res) : res_(res, &PQclear) {}
  int rows() const { return PQntuples(res_.get()); }
  std::string text(int row, int column) const;
  double real(int row, int column) const;
  std::int64_t integer(int row, int column) const;
  bool is_null(int row, int column) const { return PQgetisnull(res_.get(), row, column) != 0; }

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> res_;
};

/// Statement parameters, sent as text (numbers in a round-trip exact form).
class params {
 public:
  params& add(std::string_view text);
  params& add(double value);
  params& add(std::int64_t value);
  std::size_t size() const { return values_.size(); }
  std::vector<const char*> pointers() const;

 private:
  std::vector<std::string> values_;
};

/// One server connection. Not thread safe.
class connection {
 public:
  /// Connects to `url`; `connect_timeout_s` applies unless the URL sets connect_timeout.
  /// Throws failure (unreachable or auth) naming the redacted URL and libpq's reason.
  connection(const std::string& url, int connect_timeout_s);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Runs `sql` with `p` ($1, $2, ...). Throws failure.
  result exec(std::string_view sql, const params& p = {});
  /// BEGIN; fn(); COMMIT, rolling back on any exception. Serialization failures and
  /// deadlocks (SQLSTATE 40001, 40P01) retry the whole transaction.
  void transaction(const std::function<void()>& fn);
  /// False once the connection is lost.
  bool ok() const;

 private:
  [[noreturn]] void fail(PGresult* res, std::string_view sql);
  PGconn* conn_ = nullptr;
  std::string where_;  // the redacted URL
};

}  // namespace prism::tuning::pg
