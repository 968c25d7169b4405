// SPDX-License-Identifier: Apache-2.0
// The private state of prism::tuning::database, shared by database.cpp and exchange.cpp.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "prism/tuning_db.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/sqlite.hpp"

namespace prism::tuning {

struct database::impl {
  impl(std::string path, database::access mode);

  std::string path;
  database::access mode;
  std::unique_ptr<sql::connection> conn;  // null before the file exists or when it is refused
  bool conn_rw = false;                   // conn was opened read-write
  bool prepared = false;                  // conn is in WAL mode with the current schema
  bool writable = false;                  // a write would be attempted (see ensure_writer)
  int found_version = 0;                  // user_version when the file was opened
  std::string reason;                     // why not writable
  enum class refusal_kind { none, foreign, not_sqlite, damaged, other };
  refusal_kind refused_as = refusal_kind::none;
  std::string refusal;  // why the existing file is not used at all ("" when it is)

  std::mutex mu;
  row_validator validator;

  // Memo: rows per (device, op, dtype), loaded once; answers per query.
  struct cached_row {
    result_row row;
    shape_key key;
  };
  std::unordered_map<std::string, std::vector<cached_row>> groups;
  std::unordered_map<std::string, std::optional<match>> memo;
  std::set<std::string> logged_skips;

  std::uint64_t sql_queries = 0, lookups = 0, memo_hits = 0, writes = 0;

  void open();
  bool open_reader(bool may_open_rw);
  void ensure_reader();
  bool schema_ready();
  void ensure_writer(const char* operation);
  void refuse(refusal_kind kind, std::string why);
  void set_wal();
  void checkpoint();
  void close();

  void require_writable(const char* operation) const;
  void forget(const std::string& device, const std::string& op, const std::string& dtype);
  template <class F>
  auto guarded(const char* operation, F&& fn) -> decltype(fn());

  static std::string group_id(const std::string& device, const std::string& op, const std::string& dtype);
  std::vector<result_row> load_group(const std::string& device, const std::string& op,
                                     const std::string& dtype);
  std::vector<result_row> select_results(const row_filter& filter);
  std::vector<device_record> select_devices();
  std::string skip_reason(const result_row& row, const std::string& driver_version,
                          const row_validator* own = nullptr);
  /// Inside a write transaction: stores `row` unless an existing row is as fast (or replace).
  bool store_if_faster(const result_row& row, bool replace, merge_report* report);
  /// Inside a write transaction: upserts a device record.
  void store_device(const device_record& dev);
};

// Turns SQLite failures into prism::error(database_error) naming the file.
template <class F>
auto database::impl::guarded(const char* operation, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const sql::failure& f) {
    throw detail::db_error(operation, path + ": " + f.text);
  }
}

}  // namespace prism::tuning
