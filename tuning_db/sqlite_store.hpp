// SPDX-License-Identifier: Apache-2.0
// The SQLite store: one tuning database file (WAL mode, short BEGIN IMMEDIATE transactions,
// schema migrations, refusal of foreign or damaged files). See prism/tuning_db.hpp.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/tuning_db.hpp"
#include "tuning_db/common.hpp"
#include "tuning_db/sqlite.hpp"
#include "tuning_db/store.hpp"

namespace prism::tuning {

class sqlite_store final : public store {
 public:
  sqlite_store(std::string path, database::access mode);
  ~sqlite_store() override;

  const std::string& location() const override { return path; }
  bool is_open() const override { return conn != nullptr || (refusal_.empty() && writable_); }
  bool writable() const override { return writable_; }
  const std::string& read_only_reason() const override { return reason; }
  const std::string& refusal() const override { return refusal_; }
  int schema_version() override;
  int init_schema() override;
  void checkpoint() override;
  void close() override;

  void put_device(const device_record& dev) override;
  void put_result(const result_row& row) override;
  bool put_result_if_faster(const result_row& row) override;
  void put_candidate(const candidate_row& row) override;
  void put_shape(const result_row& winner, const std::vector<candidate_row>& candidates) override;
  std::size_t clear(const row_filter& filter) override;
  void vacuum() override;
  merge_report store_rows(const row_bundle& rows, bool replace) override;

  std::vector<result_row> group_rows(const std::string& device, const std::string& op,
                                     const std::string& dtype) override;
  std::vector<candidate_row> candidates(const std::string& device, const std::string& op,
                                        const std::string& dtype, const shape_key& shape) override;
  std::vector<result_row> results(const row_filter& filter) override;
  std::vector<candidate_row> all_candidates(const row_filter& filter) override;
  std::vector<device_record> devices() override;
  std::string integrity_check() override;
  std::uint64_t busy_retries() const override { return conn ? conn->busy_retries.load() : 0; }

  enum class refusal_kind { none, foreign, not_sqlite, damaged, other };
  refusal_kind refused_as = refusal_kind::none;

 private:
  std::string path;
  database::access mode;
  std::unique_ptr<sql::connection> conn;  // null before the file exists or when it is refused
  bool conn_rw = false;                   // conn was opened read-write
  bool prepared = false;                  // conn is in WAL mode with the current schema
  bool writable_ = false;                 // a write would be attempted (see ensure_writer)
  int found_version = 0;                  // user_version when the file was opened
  std::string reason;                     // why not writable
  std::string refusal_;                   // why the existing file is not used at all ("" when it is)

  void open();
  bool open_reader(bool may_open_rw);
  void ensure_reader();
  bool schema_ready();
  void ensure_writer(const char* operation);
  void refuse(refusal_kind kind, std::string why);
  void set_wal();
  void require_writable(const char* operation) const;
  template <class F>
  auto guarded(const char* operation, F&& fn) -> decltype(fn());
  /// Inside a write transaction: stores `row` unless an existing row is as fast (or replace).
  bool store_if_faster(const result_row& row, bool replace, merge_report* report);
};

// Turns SQLite failures into prism::error(database_error) naming the file.
template <class F>
auto sqlite_store::guarded(const char* operation, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const sql::failure& f) {
    throw detail::db_error(operation, path + ": " + f.text);
  }
}

}  // namespace prism::tuning
