// SPDX-License-Identifier: Apache-2.0
// The private state of prism::tuning::database, shared by database.cpp and exchange.cpp: the
// store and the store-independent lookup memo.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "prism/tuning_db.hpp"
#include "tuning_db/store.hpp"

namespace prism::tuning {

struct database::impl {
  impl(std::string location, database::access mode);

  std::string location;  // as given (a PostgreSQL URL keeps its password here only)
  database::access mode;
  std::unique_ptr<store> st;

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
  std::uint64_t seen_generation = 0;

  std::uint64_t sql_queries = 0, lookups = 0, memo_hits = 0, writes = 0;

  void forget(const std::string& device, const std::string& op, const std::string& dtype);
  void forget_all();
  static std::string group_id(const std::string& device, const std::string& op, const std::string& dtype);
  std::string skip_reason(const result_row& row, const std::string& driver_version,
                          const row_validator* own = nullptr);
};

}  // namespace prism::tuning
