// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store: a server a fleet shares (tables in the PostgreSQL schema `prism`).
// Lookups are answered from an in-memory snapshot of each device's rows, refreshed in the
// background; when the server cannot be used, the local SQLite file takes lookups and writes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tuning_db/postgres.hpp"
#include "tuning_db/sqlite_store.hpp"
#include "tuning_db/store.hpp"

namespace prism::tuning {

class postgres_store final : public store {
 public:
  /// `url` must have passed database::location_error.
  postgres_store(std::string url, database::access mode);
  ~postgres_store() override;

  const std::string& location() const override { return shown_; }
  bool is_open() const override;
  bool writable() const override;
  const std::string& read_only_reason() const override;
  const std::string& refusal() const override { return refusal_; }
  std::string queued_to() const override { return local_ ? local_->location() : std::string(); }
  int schema_version() override { return found_version_; }
  int init_schema() override;
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
  std::uint64_t generation() const override { return generation_.load(std::memory_order_acquire); }
  std::vector<candidate_row> candidates(const std::string& device, const std::string& op,
                                        const std::string& dtype, const shape_key& shape) override;
  std::vector<result_row> results(const row_filter& filter) override;
  std::vector<candidate_row> all_candidates(const row_filter& filter) override;
  std::vector<device_record> devices() override;
  std::string integrity_check() override;

 private:
  using group_map = std::map<std::pair<std::string, std::string>, std::vector<result_row>>;

  std::string url_;    // as given, password included
  std::string shown_;  // the URL with its password hidden
  database::access mode_;
  int timeout_s_;
  double refresh_s_;
  std::unique_ptr<pg::connection> conn_;
  int found_version_ = 0;
  std::string refusal_;                  // why the server is not used ("" when it is)
  std::string reason_;                   // why results cannot be saved
  std::atomic<bool> faulted_{false};     // refusal_ is a fault to ride out (not a bad URL)
  std::unique_ptr<sqlite_store> local_;  // the local file, once the server cannot be used

  // The snapshot: rows per device, grouped by (op, dtype). Guarded by snap_mu_ (the refresher
  // thread swaps it while lookups read it).
  std::mutex snap_mu_;
  std::map<std::string, group_map> snapshot_;
  std::set<std::string> wanted_;  // devices lookups asked for
  std::atomic<std::uint64_t> generation_{0};
  std::thread refresher_;
  std::condition_variable refresh_cv_;
  bool stop_ = false;

  bool usable() const { return conn_ && refusal_.empty(); }
  void connect();
  /// The local file when the server cannot be used and this is a read-write fault; else null.
  /// Opened (and the fault warned about, once) on first need.
  sqlite_store* fallback();
  void lost(const pg::failure& f, const char* operation);
  template <class Server, class Local>
  auto write(const char* operation, const std::string& device, Server&& on_server, Local&& on_local)
      -> decltype(on_local(std::declval<sqlite_store&>()));
  void start_refresher();
  void refresh_loop();
};

}  // namespace prism::tuning
