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
  std::unique_ptr<sql::connection> conn;  // null when nothing could be opened
  bool writable = false;
  std::string reason;          // why not writable
  std::string moved_aside_to;  // where a corrupt file went
  struct stat opened_stat {};  // identity of the file we opened (for move_aside)
  bool opened_stat_valid = false;

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
  void open_read_write();
  void open_read_only(std::string why);
  void set_wal();
  void move_aside(const std::string& why);

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
