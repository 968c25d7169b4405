// SPDX-License-Identifier: Apache-2.0
// The storage behind prism::tuning::database: one abstract store, implemented by an SQLite file
// (sqlite_store.hpp) and a PostgreSQL server (postgres_store.hpp). The database object owns
// what is the same for both: lookups and their memo, validators, check, stats, JSON exchange.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prism/tuning_db.hpp"

namespace prism::tuning {

/// Rows as one store holds them, for merges between stores (push, pull, import, merge).
struct row_bundle {
  std::vector<device_record> devices;
  std::vector<result_row> results;
  std::vector<candidate_row> candidates;
};

/// A tuning store. Not thread safe: the database object serializes every call.
class store {
 public:
  virtual ~store() = default;

  /// The file path, or the URL with its password hidden.
  virtual const std::string& location() const = 0;
  virtual bool is_open() const = 0;
  virtual bool writable() const = 0;
  /// Why results cannot be saved ("" when writable()).
  virtual const std::string& read_only_reason() const = 0;
  /// Why the store is not used at all ("" when it is).
  virtual const std::string& refusal() const = 0;
  /// Where writes go instead when the store itself cannot take them ("" when they go to it).
  virtual std::string queued_to() const { return {}; }
  virtual int schema_version() = 0;
  /// Creates or upgrades the schema; returns the version found before (0 = none).
  virtual int init_schema() = 0;
  virtual void checkpoint() {}
  virtual void close() {}

  // ---- writes (each one transaction) ----
  virtual void put_device(const device_record& dev) = 0;
  virtual void put_result(const result_row& row) = 0;
  /// Stores `row` only when its key is new or `row` is faster (smaller p50).
  virtual bool put_result_if_faster(const result_row& row) = 0;
  virtual void put_candidate(const candidate_row& row) = 0;
  /// A finished shape: its candidates, and the winner unless the stored row is as fast and
  /// measured by the same prism and driver (a row of another one may be stale: replaced).
  virtual void put_shape(const result_row& winner, const std::vector<candidate_row>& candidates) = 0;
  virtual std::size_t clear(const row_filter& filter) = 0;
  virtual void vacuum() = 0;
  /// Stores everything in one transaction: devices upserted, candidates replaced, per result
  /// key the faster row (or the incoming one when `replace`).
  virtual merge_report store_rows(const row_bundle& rows, bool replace) = 0;

  // ---- reads ----
  /// The rows of (device, op, dtype) for lookups. May be served from a snapshot.
  virtual std::vector<result_row> group_rows(const std::string& device, const std::string& op,
                                             const std::string& dtype) = 0;
  /// Changes whenever answers of group_rows may have changed behind the caller's back (a
  /// snapshot refresh): the database drops its memo then. Cheap: read on every lookup.
  virtual std::uint64_t generation() const { return 0; }
  virtual std::vector<candidate_row> candidates(const std::string& device, const std::string& op,
                                                const std::string& dtype, const shape_key& shape) = 0;
  virtual std::vector<result_row> results(const row_filter& filter) = 0;
  virtual std::vector<candidate_row> all_candidates(const row_filter& filter) = 0;
  virtual std::vector<device_record> devices() = 0;
  virtual std::string integrity_check() = 0;
  virtual std::uint64_t busy_retries() const { return 0; }
};

/// Opens the store `location` names. Never throws for an unusable store: its refusal() says why.
std::unique_ptr<store> open_store(const std::string& location, database::access mode);

/// Moves database::changes(): a store calls it after rows changed behind lookups' backs.
void note_rows_changed() noexcept;

}  // namespace prism::tuning
