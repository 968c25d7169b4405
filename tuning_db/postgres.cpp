// SPDX-License-Identifier: Apache-2.0
// libpq wrapper implementation: connecting with a default connect_timeout, text-format
// parameterized statements, and transactions retried on serialization failures.
#include "tuning_db/postgres.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

namespace prism::tuning::pg {

namespace {

// libpq's messages end in a newline and continue on indented lines: one line for logs.
std::string trimmed(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool is_url(std::string_view location) {
  return starts_with(location, "postgresql://") || starts_with(location, "postgres://");
}

namespace {
// The password of a URL ("" when none).
std::string password_of(const std::string& url) {
  std::string shown = redact(url);
  if (shown == url) return {};
  auto start = url.find("://") + 3;
  auto colon = url.find(':', start);
  auto at = url.substr(0, url.find_first_of("/?", start)).rfind('@');
  return url.substr(colon + 1, at - colon - 1);
}
}  // namespace

std::string hide_password(std::string text, const std::string& url) {
  std::string password = password_of(url);
  if (password.empty()) return text;
  for (auto pos = text.find(password); pos != std::string::npos; pos = text.find(password, pos + 3))
    text.replace(pos, password.size(), "***");
  return text;
}

std::string check_url(const std::string& url) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (opts) {
    PQconninfoFree(opts);
    return {};
  }
  std::string why = err ? trimmed(err) : "libpq cannot parse it";
  if (err) PQfreemem(err);
  return hide_password(why, url);
}

std::string redact(const std::string& url) {
  // postgresql://user:password@host/...: the password is between the first ':' after the
  // scheme and the last '@' of the authority.
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  auto start = scheme_end + 3;
  auto authority_end = url.find_first_of("/?", start);
  std::string authority =
      url.substr(start, authority_end == std::string::npos ? std::string::npos : authority_end - start);
  auto at = authority.rfind('@');
  if (at == std::string::npos) return url;
  auto colon = authority.find(':');
  if (colon == std::string::npos || colon > at) return url;
  std::string out = url.substr(0, start) + authority.substr(0, colon) + ":***" + authority.substr(at);
  if (authority_end != std::string::npos) out += url.substr(authority_end);
  return out;
}

std::string result::text(int row, int column) const {
  if (PQgetisnull(res_.get(), row, column)) return {};
  return std::string(PQgetvalue(res_.get(), row, column),
                     static_cast<std::size_t>(PQgetlength(res_.get(), row, column)));
}

double result::real(int row, int column) const {
  return std::strtod(PQgetvalue(res_.get(), row, column), nullptr);
}

std::int64_t result::integer(int row, int column) const {
  return std::strtoll(PQgetvalue(res_.get(), row, column), nullptr, 10);
}

params& params::add(std::string_view text) {
  values_.emplace_back(text);
  return *this;
}

params& params::add(double value) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest exact form
  values_.emplace_back(buf, r.ptr);
  return *this;
}

params& params::add(std::int64_t value) {
  values_.push_back(std::to_string(value));
  return *this;
}

std::vector<const char*> params::pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (auto& v : values_) out.push_back(v.c_str());
  return out;
}

connection::connection(const std::string& url, int connect_timeout_s) : where_(redact(url)) {
  // Keywords are read in order and the expanded URL comes last, so a connect_timeout in the URL
  // wins over ours.
  std::string timeout = std::to_string(connect_timeout_s);
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "prism", url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (!conn_)
    throw failure(failure_kind::unreachable, "", where_ + ": libpq could not allocate a connection");
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string why = trimmed(PQerrorMessage(conn_));
    bool auth = PQconnectionNeedsPassword(conn_) || why.find("authentication") != std::string::npos ||
                why.find("password") != std::string::npos;
    PQfinish(conn_);
    conn_ = nullptr;
    throw failure(auth ? failure_kind::auth : failure_kind::unreachable, "", why);
  }
  // Server notices (e.g. "relation already exists, skipping") are not prism's business.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

connection::~connection() {
  if (conn_) PQfinish(conn_);
}

bool connection::ok() const {
  return conn_ && PQstatus(conn_) == CONNECTION_OK;
}

void connection::fail(PGresult* res, std::string_view sql) {
  std::string state;
  std::string why;
  if (res) {
    if (const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE)) state = s;
    why = trimmed(PQresultErrorMessage(res));
    PQclear(res);
  }
  if (why.empty()) why = trimmed(PQerrorMessage(conn_));
  // Class 08 is a connection exception; 57P01..57P03 the server shutting down or starting. An
  // error without SQLSTATE comes from libpq itself, not from the server: the connection broke
  // ("server closed the connection unexpectedly" may come while PQstatus still says OK).
  bool lost = PQstatus(conn_) != CONNECTION_OK || state.empty() || starts_with(state, "08") ||
              starts_with(state, "57P");
  std::string first_line(sql.substr(0, sql.find('\n')));
  throw failure(lost ? failure_kind::unreachable : failure_kind::sql, state,
                lost ? why : why + " (in: " + first_line.substr(0, 80) + ")");
}

result connection::exec(std::string_view sql, const params& p) {
  if (!ok()) throw failure(failure_kind::unreachable, "", "the connection to the server was lost");
  std::string text(sql);
  auto ptrs = p.pointers();
  // PQexec runs scripts of several statements (migrations); PQexecParams takes parameters.
  PGresult* res = ptrs.empty() ? PQexec(conn_, text.c_str())
                               : PQexecParams(conn_, text.c_str(), static_cast<int>(ptrs.size()), nullptr,
                                              ptrs.data(), nullptr, nullptr, 0);
  auto status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(res, sql);
  return result(res);
}

void connection::transaction(const std::function<void()>& fn) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  for (int attempt = 0;; ++attempt) {
    exec("BEGIN");
    try {
      fn();
      exec("COMMIT");
      return;
    } catch (const failure& f) {
      if (ok()) {
        try {
          exec("ROLLBACK");
        } catch (const failure&) {
        }
      }
      bool retry = (f.sqlstate == "40001" || f.sqlstate == "40P01") && attempt < 20;
      if (!retry) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt * 2 + static_cast<int>(rng() % 5)));
    } catch (...) {
      if (ok()) {
        try {
          exec("ROLLBACK");
        } catch (const failure&) {
        }
      }
      throw;
    }
  }
}

}  // namespace prism::tuning::pg
